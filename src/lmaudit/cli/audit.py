"""`lmaudit score`, `lmaudit audit` and `lmaudit attack`: a model's signal for a corpus, an audit from models, and an
audit from precomputed losses."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click

from lmaudit.attacks.settings import AttackSettings
from lmaudit.cli.app import log_warnings, overwrite_option, progress
from lmaudit.cli.help import GroupedCommand
from lmaudit.cli.options import (
    BACKEND_NAMES,
    COLUMN_NAMES,
    EVALUATION_NAMES,
    PLACEMENT_NAMES,
    SIGNAL_NAMES,
    backend_options,
    column_names,
    column_options,
    evaluation_options,
    placement_options,
    setting,
    signal_options,
)
from lmaudit.config import NONMEMBER_SET_NAME, RELEASES, ROLE_FILE_FIELDS, AuditConfig, TokenPassSettings, given
from lmaudit.data.roles import MEMBER, NONMEMBER, SHADOW_MEMBER, SHADOW_NONMEMBER
from lmaudit.errors import InputError
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.signals.registry import signal_names
from lmaudit.signals.settings import SignalSettings

# Required, unless a --config file gives them (so not click's required=True, which would refuse the config's values).
UNLESS_CONFIG = "  [required unless --config]"
UNLESS_DATA = "  [required unless --data or --config]"


@click.command(cls=GroupedCommand, groups={
    "Model": "--model --adapter", "Data": f"--data {COLUMN_NAMES}", "Output": "--out --cache-dir --shard --chunk-size",
    "Signal": SIGNAL_NAMES, "Placement": PLACEMENT_NAMES, "Backend": BACKEND_NAMES,
}, epilog="lmaudit score --model model --data members.csv --out member-signals.parquet")
@click.option("--model", required=True, type=click.Path(), help="Model folder (save_pretrained or `lmaudit train`).")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter folder to apply to --model.")
@click.option("--data", required=True, type=click.Path(), help="Corpus file with a 'text' column (.csv, .jsonl, .parquet).")
@column_options(from_config=False)
@signal_options(from_config=False)
@placement_options(from_config=False)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file (.csv, .jsonl or .parquet).")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Signal store, as sensitive as the data (default: FOLDER.signals/ beside the folder of --out, so "
                   "that every output file of that folder shares it).")
@click.option("--shard", default=None, help="Score only part i of N (e.g. 0/4); N processes sharing --cache-dir split the "
                                            "work (default: all).")
@click.option("--chunk-size", default=512, type=click.IntRange(min=1), help="Samples per stored chunk.")
@backend_options(from_config=False, what="chunks are")
def score(model: str, adapter: str | None, data: str, out: str, cache_dir: str | None, shard: str | None,
          chunk_size: int, **options) -> None:
    """Compute a per-sample LM signal (nats; lower = more likely under the model), reading --data in chunks."""
    from lmaudit.backends.choose import signal_backend
    from lmaudit.models.load import resolve_device
    from lmaudit.models.source import ModelSource, Placement
    from lmaudit.signals.compute import Scoring, score_file
    from lmaudit.signals.store import default_cache_dir, parse_shard

    settings = SignalSettings(**{key: options.pop(key) for key in list(options) if key in SignalSettings.model_fields})
    placement = Placement(device=resolve_device(options["device"]), dtype=options["dtype"],
                          device_map=options["device_map"], quantization=options["quantization"])
    backend = signal_backend(options["backend"], options["ray_address"], options["ray_workers"], placement.device)
    scoring = Scoring(cache_dir=Path(cache_dir) if cache_dir else default_cache_dir(Path(out).parent),
                      placement=placement, backend=backend, progress=progress(), chunk_size=chunk_size)
    written, truncated = score_file(ModelSource(model, adapter), data, out, settings, scoring,
                                    parse_shard(shard) if shard is not None else None, column_names(options))
    click.echo(f"wrote {settings.signal} of {written} samples to {out} ({truncated} truncated)")


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


@click.command(cls=GroupedCommand, groups={
    "Configuration": "--config --plan",
    "Models": "--target --adapter --reference --reference-adapter --shadow --allow-tokenizer-mismatch",
    "Data": f"--members --nonmembers --population --calibration-members --shadow-members --shadow-nonmembers --data "
            f"{COLUMN_NAMES}",
    "Output": "--out --cache-dir --overwrite --figures --include-text --release --field",
    "Signal": f"{SIGNAL_NAMES} --token-signal",
    "Evaluation": EVALUATION_NAMES,
    "Attacks' settings": "--whitebox --whitebox-split --min-k-fraction --rmia-offline-a --lowercase --recall-prefix "
                         "--neighbours --neighbour-words --neighbour-model --self-prompt-reference --camia --samia --reference-kl "
                         "--frequency-data --extraction",
    "Placement": PLACEMENT_NAMES, "Backend": BACKEND_NAMES,
}, epilog="lmaudit audit --target model --out report \\\n"
          "    --members members.csv --nonmembers nonmembers.csv\n"
          "lmaudit audit --target model --reference base-model --out report \\\n"
          "    --members members.csv --nonmembers nonmembers.csv \\\n"
          "    --population population.csv")
@click.option("--config", "config_path", default=None, type=click.Path(),
              help="audit.yaml with the same settings; options given here override its values.")
@click.option("--plan", "plan_path", default=None, type=click.Path(),
              help="Run exactly this plan (`lmaudit plan`): its models, data and seed; refused unless it and they are "
                   "unchanged.")
@click.option("--target", default=None, type=click.Path(), help=f"The audited model's folder.{UNLESS_CONFIG}")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter applied to --target (the base).")
@click.option("--reference", multiple=True, type=click.Path(),
              help="Reference model, never trained on the audited members; repeat for several (RMIA, LiRA).")
@click.option("--reference-adapter", multiple=True, type=click.Path(),
              help="A PEFT adapter applied to a reference; one per --reference, in the same order.")
@click.option("--shadow", default=None, type=click.Path(), help="Shadow classifier (--signal classifier).")
@role_file_options
@click.option("--data", default=None, type=click.Path(), help="One file with a 'role' column instead of per-role files.")
@column_options(from_config=True)
@click.option("--out", default=None, type=click.Path(file_okay=False), help=f"Folder of the report.{UNLESS_CONFIG}")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Signal store, as sensitive as the data (default: OUT.signals/ beside --out, never in it).")
@signal_options(from_config=True)
@evaluation_options(from_config=True)
@placement_options(from_config=True)
@audit_setting("whitebox", is_flag=True, default_text="off",
               help="Also run the white-box attacks: logistic regression on the target's attention and gradient features.")
@audit_setting("include_text", is_flag=True, default_text="off",
               help="Copy the sample texts into scores.parquet, and list the blind baseline's words that say 'member' "
                    "in report.json (training text!).")
@audit_setting("fields", "--field", "fields", multiple=True, metavar="KIND=REGEX", default_text="none",
               help="A sensitive field found by a regular expression (its first group, else the whole match), which the "
                    "localisation counts as a class of tokens of its own; repeat.")
@audit_setting("release", type=click.Choice(RELEASES), default_text="not declared",
               help="How the model is released: the report's release context (words only, never a number or a risk "
                    "level) and its coverage of the EDPB's attack families.")
@audit_setting("allow_tokenizer_mismatch", is_flag=True, default_text="off",
               help="Audit even when a reference's tokenizer differs from the target's (masks are then not paired); "
                    "the report's warnings and verdict say so.")
@token_setting("token_signal", type=click.Choice(signal_names("tokens")), default_text="none",
               help="Also compute this per-token signal of the target for the token-level attacks (e.g. mlm_tokens "
                    "beside --signal mlm_energy); --signal clm_tokens needs none.")
@token_setting("lowercase", "--lowercase/--no-lowercase",
               help="Token signals: score the lowercased texts too, for the lowercase attack (one more pass).")
@token_setting("recall_prefix", type=click.IntRange(min=0),
               help="Token signals: population samples in ReCaLL's non-member prefix (0 = no ReCaLL).")
@token_setting("neighbours", type=click.IntRange(min=0),
               help="Token signals: neighbour texts per sample for the neighbourhood attack (N more passes; 0 = off).")
@token_setting("neighbour_words", type=click.IntRange(min=1), help="Words replaced per neighbour.")
@audit_setting("figures", "--figures/--no-figures",
               help="Draw the page's ROC curves and score histograms (a third of a small audit's time).")
@token_setting("camia", is_flag=True, default_text="off",
               help="Causal LMs: score each text repeated 6 times too, for CAMIA (one more pass, 6x as long).")
@token_setting("samia", type=click.IntRange(min=0),
               help="Causal LMs: SaMIA's sampled continuations per text (N more generations each; 0 = off).")
@token_setting("reference_kl", is_flag=True, default_text="off",
               help="Causal LMs: KL(reference || target) of the next-token distributions at every token, for "
                    "informia_tokens (one more pass, of the target and the first reference together).")
@token_setting("neighbour_model", type=click.Path(), help="Masked or causal LM that proposes the neighbours' words.",
               default_text="the first reference")
@token_setting("self_prompt_reference", type=click.Path(), default_text="none",
               help="Causal LMs: SPV-MIA's self-prompt reference (`lmaudit train self-prompt`); needs --neighbours N.")
@token_setting("frequency_data", type=click.Path(), default_text="none",
               help="Non-audited text whose token frequencies DC-PDD uses, besides the population's.")
@setting(AttackSettings, "min_k_fraction", from_config=True, type=click.FloatRange(min=0, max=1, min_open=True),
         help="Share of least likely tokens Min-K% and Min-K%++ average.")
@setting(AttackSettings, "rmia_offline_a", from_config=True, type=click.FloatRange(min=0, max=1, min_open=True),
         help="RMIA's offline scaling a (1: the references' mean; see docs/attacks.md).")
@setting(AttackSettings, "whitebox_split", from_config=True, type=click.Choice(("patient", "sample")),
         help="logistic_split's 20% training split: by patient (no one on both sides) or by sample (Jagannatha et al.).")
@backend_options(from_config=True, what="signals are")
@click.option("--extraction", "extraction_asked", is_flag=True,
              help="Also run the extraction audit (causal LMs; the settings of the config file's `extraction:` section, "
                   "else 32-token prefixes and suffixes): report.json's `extraction` and the verdict's extraction line.")
@click.option("--overwrite", is_flag=True,
              help="Replace the report of an audit configured otherwise in --out (without it such a folder is refused; "
                   "a rerun of the same audit reuses its signals).")
def audit(config_path: str | None, plan_path: str | None, nonmembers: tuple[str, ...], extraction_asked: bool,
          overwrite: bool, **options) -> None:
    """Audit a model: signals of target (and references or shadow), every attack the data allows, the report."""
    from lmaudit.audit.run import run_audit
    from lmaudit.config import load_config
    from lmaudit.report.tables import summary_table

    options["nonmembers"] = nonmember_files(nonmembers)
    planned = None
    if plan_path:
        from lmaudit.report.plan import planned_options

        options, planned = planned_options(plan_path, options, config_path)
    if not config_path:
        # --data's role column gives the members and non-members
        needed = ("target", "out") if options.get("data") else ("target", "members", "nonmembers", "out")
        missing = [f"--{name}" for name in needed if not options.get(name)]
        if missing:
            raise InputError(f"missing {', '.join(missing)}; give them or --config audit.yaml")
    config = load_config(config_path, options)
    if extraction_asked and config.extraction is None:
        from lmaudit.signals.sampling import ExtractionSettings

        config = config.model_copy(update={"extraction": ExtractionSettings()})
    report = run_audit(config, progress=progress(), overwrite=overwrite, plan=planned)
    click.echo(summary_table(report))
    log_warnings(report["warnings"])
    click.echo(f"report: {Path(config.out) / 'report.html'}")


@click.command(cls=GroupedCommand, groups={
    "Data": "--scores", "Output": "--out --overwrite", "Evaluation": f"{EVALUATION_NAMES} --seed",
}, epilog="lmaudit attack --scores scores.csv --out report")
@click.option("--scores", required=True, type=click.Path(),
              help="sample_id, role, target_loss[, reference_loss or reference_loss_1, _2, ..., group_id, length]")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder of the report.")
@evaluation_options(from_config=False)
@setting(EvaluationSettings, "seed", help="Seed of the bootstrap, the permutation tests and the balanced repeats.")
@click.option("--overwrite", is_flag=True, help="Replace the report of another audit in --out (without it such a folder "
                                                "is refused).")
def attack(scores: str, out: str, overwrite: bool, **options) -> None:
    """Audit from precomputed losses (lower = more likely under the model): same attacks and report."""
    from lmaudit.audit.run import run_attack
    from lmaudit.report.tables import summary_table

    report = run_attack(scores, out, EvaluationSettings(**given(options)), overwrite=overwrite)
    click.echo(summary_table(report))
    log_warnings(report["warnings"])
    click.echo(f"report: {Path(out) / 'report.html'}")



@click.command("dataset-inference", cls=GroupedCommand, groups={
    "Models": "--target --adapter --reference", "Data": f"--suspect --validation --population {COLUMN_NAMES}",
    "Output": "--out --cache-dir --overwrite --include-text", "Signal": f"{SIGNAL_NAMES} --token-signal",
    "Placement": PLACEMENT_NAMES,
}, epilog="lmaudit dataset-inference --target model --out dataset-inference \\\n"
          "    --suspect suspect.csv --validation validation.csv")
@click.option("--target", required=True, type=click.Path(), help="The model's folder.")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter applied to --target (the base).")
@click.option("--reference", multiple=True, type=click.Path(),
              help="Reference model, never trained on the suspect or validation texts; repeat for several.")
@click.option("--suspect", "members", required=True, type=click.Path(),
              help="The texts suspected of having been trained on (.csv, .jsonl, .parquet; a 'text' column, "
                   "optionally 'group_id').")
@click.option("--validation", "nonmembers", required=True, type=click.Path(),
              help="Texts drawn like the suspect ones and known unseen by the model.")
@click.option("--population", default=None, type=click.Path(),
              help="More unseen texts, for the attacks that calibrate on them (RMIA, DC-PDD); optional.")
@column_options(from_config=True)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder of dataset_inference.json.")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Signal store, as sensitive as the data (default: OUT.signals/ beside --out, never in it).")
@signal_options(from_config=True)
@placement_options(from_config=True)
@token_setting("token_signal", type=click.Choice(signal_names("tokens")), default_text="none",
               help="Also compute this per-token signal for the token-level attacks (e.g. mlm_tokens).")
@audit_setting("include_text", is_flag=True, default_text="off",
               help="List the blind baseline's words that say 'member' in dataset_inference.json (training text!).")
@overwrite_option
def dataset_inference(overwrite: bool, **options) -> None:
    """Was this dataset used to train the model? Maini et al.'s test of a suspect set against a validation set."""
    from lmaudit.audit.dataset_inference import RESULT_FILE, infer_dataset
    from lmaudit.config import load_config

    if Path(options["members"]).resolve() == Path(options["nonmembers"]).resolve():
        raise InputError(f"{options['members']}: given as both --suspect and --validation; the validation texts must be "
                         "others, drawn alike and known unseen by the model")
    document = infer_dataset(load_config(None, options), progress(), overwrite)
    log_warnings(document["warnings"])
    click.echo(document["statement"])
    click.echo(f"result: {Path(options['out']) / RESULT_FILE}")


COMMANDS = (score, audit, attack, dataset_inference)
