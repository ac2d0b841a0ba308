"""The options of `lmaudit audit` that set what an audit measures and how it runs, shared by `lmaudit plan`, which
fixes the first kind and leaves the second (report/plan.py:RUN_SETTINGS) to `audit --plan`."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click

from lmaudit.attacks.settings import AttackSettings
from lmaudit.cli.options import (
    backend_options,
    column_options,
    evaluation_options,
    placement_options,
    serving_options,
    setting,
    signal_options,
    stack,
)
from lmaudit.config import NONMEMBER_SET_NAME, RELEASES, ROLE_FILE_FIELDS, AuditConfig, TokenPassSettings
from lmaudit.data.roles import MEMBER, NONMEMBER, SHADOW_MEMBER, SHADOW_NONMEMBER
from lmaudit.errors import InputError
from lmaudit.signals.registry import signal_names

# Required, unless a --config file gives them (so not click's required=True, which would refuse the config's values).
UNLESS_CONFIG = "  [required unless --config]"
UNLESS_DATA = "  [required unless --data or --config]"


ROLE_FILE_HELP = {
    MEMBER: f"Samples the target trained on.{UNLESS_DATA}",
    SHADOW_MEMBER: "The shadow classifier's training data.", SHADOW_NONMEMBER: "Data the shadow classifier did not see.",
    NONMEMBER: "Samples the target did not train on. Repeat as NAME=FILE for several sets (e.g. other hospitals): each "
               "result is also reported per set, and the verdict audits the first." + UNLESS_DATA,
}


def role_file_options(function):
    """One --<role file> option per role (--members, --nonmembers, ...), as the configuration names them; --nonmembers
    may repeat, as NAME=FILE, for several non-member sets."""
    for role, field in reversed(ROLE_FILE_FIELDS.items()):
        several = {"multiple": True, "metavar": "[NAME=]FILE"} if role == NONMEMBER else {"default": None}
        function = click.option(f"--{field.replace('_', '-')}", type=click.Path(), **several,
                                help=ROLE_FILE_HELP.get(role, f"Samples of role {role}."))(function)
    return function


def _named_set(value: str) -> bool:
    name = value.split("=", 1)[0]
    return "=" in value and NONMEMBER_SET_NAME.fullmatch(name) is not None and not Path(value).exists()


def nonmember_files(values: tuple[str, ...]) -> str | dict[str, str] | None:
    """--nonmembers as the configuration takes it: one FILE as given; several, or NAME=FILE, as sets by name (an
    unnamed file is named by its stem)."""
    if not values:
        return None
    if len(values) == 1 and not _named_set(values[0]):
        return values[0]
    sets: dict[str, str] = {}
    for value in values:
        name, path = value.split("=", 1) if _named_set(value) else (Path(value).stem, value)
        if name in sets:
            raise InputError(f"--nonmembers: two sets named '{name}'; name each set with NAME=FILE")
        sets[name] = path
    return sets


audit_setting = partial(setting, AuditConfig, from_config=True)
token_setting = partial(setting, TokenPassSettings, from_config=True)  # the configuration's token_passes section


def audit_config(config_path: str | None, options: dict, extraction_asked: bool, *required: str) -> AuditConfig:
    """The configuration of `audit`'s (or `plan`'s) options on top of a --config file: InputError, before anything is
    read, for a missing target, data or `required` option when no file gives them."""
    from lmaudit.config import load_config

    if not config_path:
        # --data's role column gives the members and non-members
        needed = ("target", "data") if options.get("data") else ("target", "members", "nonmembers")
        missing = [f"--{name}" for name in (*needed, *required) if not options.get(name)]
        if missing:
            raise InputError(f"missing {', '.join(missing)}; give them or --config audit.yaml")
    config = load_config(config_path, options)
    if extraction_asked and config.extraction is None:
        from lmaudit.signals.sampling import ExtractionSettings

        config = config.model_copy(update={"extraction": ExtractionSettings()})
    return config


audit_settings_options = stack(
    click.option("--target", default=None, type=click.Path(), help=f"The audited model's folder.{UNLESS_CONFIG}"),
    click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter applied to --target (the base)."),
    click.option("--reference", multiple=True, type=click.Path(),
                  help="Reference model, never trained on the audited members; repeat for several (RMIA, LiRA)."),
    click.option("--reference-adapter", multiple=True, type=click.Path(),
                  help="A PEFT adapter applied to a reference; one per --reference, in the same order."),
    click.option("--shadow", default=None, type=click.Path(), help="Shadow classifier (--signal classifier)."),
    role_file_options,
    click.option("--data", default=None, type=click.Path(), help="One file with a 'role' column instead of per-role files."),
    column_options(from_config=True),
    signal_options(from_config=True),
    evaluation_options(from_config=True),
    placement_options(from_config=True),
    audit_setting("whitebox", is_flag=True, default_text="off",
                   help="Also run the white-box attacks: logistic regression on the target's attention and gradient features."),
    audit_setting("include_text", is_flag=True, default_text="off",
                   help="Copy the sample texts into scores.parquet, and list the blind baseline's words that say 'member' "
                        "in report.json (training text!)."),
    audit_setting("fields", "--field", "fields", multiple=True, metavar="KIND=REGEX", default_text="none",
                   help="A sensitive field found by a regular expression (its first group, else the whole match), which the "
                        "localisation counts as a class of tokens of its own; repeat."),
    audit_setting("release", type=click.Choice(RELEASES), default_text="not declared",
                   help="How the model is released: the report's release context (words only, never a number or a risk "
                        "level) and its coverage of the EDPB's attack families."),
    audit_setting("allow_tokenizer_mismatch", is_flag=True, default_text="off",
                   help="Audit even when a reference's tokenizer differs from the target's (masks are then not paired); "
                        "the report's warnings and verdict say so."),
    token_setting("token_signal", type=click.Choice(signal_names("tokens")), default_text="none",
                   help="Also compute this per-token signal of the target for the token-level attacks (e.g. mlm_tokens "
                        "beside --signal mlm_energy); --signal clm_tokens needs none."),
    token_setting("lowercase", "--lowercase/--no-lowercase",
                   help="Token signals: score the lowercased texts too, for the lowercase attack (one more pass)."),
    token_setting("recall_prefix", type=click.IntRange(min=0),
                   help="Token signals: population samples in ReCaLL's non-member prefix (0 = no ReCaLL)."),
    token_setting("neighbours", type=click.IntRange(min=0),
                   help="Token signals: neighbour texts per sample for the neighbourhood attack (N more passes; 0 = off)."),
    token_setting("neighbour_words", type=click.IntRange(min=1), help="Words replaced per neighbour."),
    audit_setting("figures", "--figures/--no-figures",
                   help="Draw the page's ROC curves and score histograms (a third of a small audit's time)."),
    token_setting("camia", is_flag=True, default_text="off",
                   help="Causal LMs: score each text repeated 6 times too, for CAMIA (one more pass, 6x as long)."),
    token_setting("samia", type=click.IntRange(min=0),
                   help="Causal LMs: SaMIA's sampled continuations per text (N more generations each; 0 = off)."),
    token_setting("reference_kl", is_flag=True, default_text="off",
                   help="Causal LMs: KL(reference || target) of the next-token distributions at every token, for "
                        "informia_tokens (one more pass, of the target and the first reference together)."),
    token_setting("neighbour_model", type=click.Path(), help="Masked or causal LM that proposes the neighbours' words.",
                   default_text="the first reference"),
    token_setting("self_prompt_reference", type=click.Path(), default_text="none",
                   help="Causal LMs: SPV-MIA's self-prompt reference (`lmaudit train self-prompt`); needs --neighbours N."),
    token_setting("frequency_data", type=click.Path(), default_text="none",
                   help="Non-audited text whose token frequencies DC-PDD uses, besides the population's."),
    setting(AttackSettings, "min_k_fraction", from_config=True, type=click.FloatRange(min=0, max=1, min_open=True),
             help="Share of least likely tokens Min-K% and Min-K%++ average."),
    setting(AttackSettings, "rmia_offline_a", from_config=True, type=click.FloatRange(min=0, max=1, min_open=True),
             help="RMIA's offline scaling a (1: the references' mean; see docs/attacks.md)."),
    setting(AttackSettings, "whitebox_split", from_config=True, type=click.Choice(("patient", "sample")),
             help="logistic_split's 20% training split: by patient (no one on both sides) or by sample (Jagannatha et al.)."),
    backend_options(from_config=True, what="signals are"),
    serving_options(from_config=True),
    click.option("--extraction", "extraction_asked", is_flag=True,
                  help="Also run the extraction audit (causal LMs; the settings of the config file's `extraction:` section, "
                       "else 32-token prefixes and suffixes): report.json's `extraction` and the verdict's extraction line."),
)
