"""Coverage of the attack families that the EDPB's Opinion 28/2024 on AI models lists (attribute and membership
inference, exfiltration, regurgitation of training data, model inversion, reconstruction): for each, whether this
report tested it, what ran and how lmaudit would test it, and the declared release context in words.

Built from what the audit ran (report.json's configuration, ranking, extraction and dataset-inference sections), never
from what it might have run; the words only, so that a release context changes no number and no risk level.
"""

from __future__ import annotations

from lmaudit.attacks.base import ACCESS_LEVELS, WEIGHTS_ONLY
from lmaudit.attacks.registry import ATTACKS
from lmaudit.config import RELEASES
from lmaudit.report.document import ReportDocument, ThreatModels
from lmaudit.signals.registry import signal_names, signal_spec

GENERATED, REFERENCE, SHADOW, WHITE_BOX = ACCESS_LEVELS[0], ACCESS_LEVELS[3], ACCESS_LEVELS[4], ACCESS_LEVELS[5]
LIMITS = ("Resistance to the attacks tested here is evidence about those attacks only, at this audit's data and "
          "settings: a stronger attack, or more data, can show more leakage. A family not tested is no evidence either "
          "way. This report is not a determination that the model is anonymous, which the EDPB's Opinion 28/2024 "
          "leaves to a case-by-case assessment of all the means reasonably likely to be used.")
CONTEXTS = {
    None: ("Release context: not declared (lmaudit audit --release public-api|internal|open-weights); how much the "
           "families not tested matter depends on who can reach the model and how, which lmaudit never guesses."),
    "open-weights": ("Release context: open weights. Anyone holding the model can run every attack, white-box ones "
                     "included, and generate without limit, so the families not tested matter more than for a model "
                     "behind an interface."),
    "public-api": ("Release context: public API. Anyone may query the model at scale, black-box: the attacks that read "
                   "its generated text, or its output probabilities where the API returns them, are open to any user."),
    "internal": ("Release context: internal. Only those allowed to query the model can attack it; the evidence here "
                 "holds for attackers with their access, which should be documented beside this report."),
}
NO_WHITE_BOX = " This audit tried no white-box attack (--whitebox)."
SEPARATE = "a separate command, not part of this report"


def model_family(config: dict) -> str | None:
    """The audited model's family (mlm, clm, classifier) from the configuration's signal; None for precomputed
    losses, whose model lmaudit never saw."""
    signal = config.get("signal")
    name = signal.get("signal") if isinstance(signal, dict) else None
    if name not in signal_names():
        return None
    kind = signal_spec(name).model_kind
    return None if kind == "any" else kind


def entry(family: str, status: str, what_ran: str, how_to_test: str) -> dict:
    """One attack family's coverage: its status ('tested', 'not tested', 'not applicable'), what ran, how to test it."""
    return {"family": family, "status": status, "what_ran": what_ran, "how_to_test": how_to_test}


def listed(words: list[str]) -> str:
    """Words as a sentence lists them: `a`, `a and b`, `a, b and c`."""
    return " and ".join(filter(None, [", ".join(words[:-1]), words[-1]])) if words else ""


def widening(family: str | None, not_tried: list[str]) -> list[str]:
    """The options of lmaudit audit that would add the threat models this audit did not try."""
    options = {WHITE_BOX: "--whitebox (white-box)", REFERENCE: "--reference DIR (a reference model)",
               SHADOW: "--shadow DIR --shadow-members F --shadow-nonmembers F (a shadow model)",
               GENERATED: "--samia N (generated text only)"}
    wanted = [WHITE_BOX, SHADOW if family == "classifier" else REFERENCE, *([GENERATED] if family == "clm" else [])]
    return [options[access] for access in wanted if access in not_tried]


def membership(report: dict, family: str | None, threats: ThreatModels) -> dict:
    """Membership inference: the attacks of each level, the threat models tried and not, and dataset inference."""
    names = report.get("level_names", {})
    levels = [names.get(level, level) for level in report["ranking"]]
    attacks = sorted({row["attack"] for rows in report["ranking"].values() for row in rows})
    ran = (f"{len(attacks)} attack{'s' * (len(attacks) != 1)} ({', '.join(attacks)}) at {listed(levels)} level; "
           f"threat models tried: {', '.join(threats.tried)}")
    inference = report.get("dataset_inference")
    if inference and "unavailable" not in inference:
        ran += "; dataset inference (Maini et al.) of the members as a set"
    if family is None:
        how = "lmaudit attack (this report, from precomputed losses); lmaudit audit on the model runs every attack"
    else:
        more = widening(family, threats.not_tried)
        how = "lmaudit audit (this report)" + (f"; to add threat models: {', '.join(more)}" if more else "")
    how += "; lmaudit canaries audit bounds epsilon for a model trained with planted canaries (" + SEPARATE + ")"
    return entry("membership inference", "tested", ran, how)


def regurgitation(report: dict, family: str | None) -> dict:
    """Regurgitation of training data: the audit's extraction, or why it did not run."""
    name = "regurgitation of training data"
    if family == "classifier":
        return entry(name, "not applicable", "a classifier outputs label probabilities, never text, so it cannot give "
                     "its training text back", "nothing to test")
    section = report.get("extraction")
    if section:
        prefixes = ", ".join(str(prefix) for prefix in section["prefix_lengths"])
        return entry(name, "tested", f"extraction (lmaudit audit --extraction): each text's next "
                     f"{section['suffix_tokens']} tokens from its first {prefixes}, greedy and sampled "
                     f"({', '.join(section['schemes'])}), members against non-members",
                     "lmaudit audit --extraction (this report); lmaudit extract runs it alone")
    if family == "mlm":
        return entry(name, "not tested", "no extraction: lmaudit extracts from causal LMs only",
                     "lmaudit reconstruct tests whether a masked LM fills in a declared field (" + SEPARATE + ")")
    return entry(name, "not tested", "no extraction in this audit",
                 "lmaudit audit --extraction, or lmaudit extract (causal LMs; " + SEPARATE + ")")


def attribute_inference(family: str | None) -> dict:
    """Attribute inference: never part of an audit; the closest lmaudit test, or why there is none."""
    name = "attribute inference"
    if family == "classifier":
        return entry(name, "not tested", "no attribute-inference attack ran",
                     "lmaudit cannot: it has no attribute-inference attack on classifiers")
    return entry(name, "not tested", "no attribute-inference attack ran",
                 "lmaudit reconstruct --field KIND=REGEX (masked and causal LMs; " + SEPARATE + "): whether the model "
                 "ranks a member's true value of a field written in the text first among candidates; attributes not "
                 "written in the text lmaudit cannot test")


def reconstruction(family: str | None) -> dict:
    """Reconstruction: lmaudit reconstruct, a command of its own, or why lmaudit cannot test it."""
    name = "reconstruction"
    ran = f"lmaudit reconstruct is {SEPARATE}"
    if family == "classifier":
        return entry(name, "not tested", ran, "lmaudit cannot: lmaudit reconstruct scores masked and causal LMs only")
    return entry(name, "not tested", ran,
                 "lmaudit reconstruct --target DIR --members F --nonmembers F --out DIR --field KIND=REGEX: a declared "
                 "field's true value ranked among candidates, members against non-members; whole records rebuilt from "
                 "the weights lmaudit cannot test")


def model_inversion() -> dict:
    """Model inversion: lmaudit has no test for it."""
    return entry("model inversion", "not tested", "lmaudit has no model-inversion attack",
                 "lmaudit cannot: recovering a person's or a class's features from the model's outputs or weights needs "
                 "another tool")


def exfiltration() -> dict:
    """Exfiltration: a property of the deployment, which lmaudit does not test."""
    return entry("exfiltration", "not tested", "lmaudit has no exfiltration test",
                 "lmaudit cannot: data or weights drawn out through the deployment (access, prompt injection) depend on "
                 "the deployment, not the model's outputs; test the deployment's security")


def release_context(release: str | None, not_tried: list[str]) -> str:
    """The verdict's context line for the declared release (None: not declared); words only, never a number."""
    if release is not None and release not in RELEASES:
        raise ValueError(f"unknown release '{release}'")  # the configuration refuses it first: a writer's bug
    return CONTEXTS[release] + (NO_WHITE_BOX if release == "open-weights" and WHITE_BOX in not_tried else "")


def access_context(report: dict) -> str:
    """What the audit's own access adds to the context line: through an endpoint, the attacks its API did not allow
    (what an attacker holding the weights adds); on the weights of a model not released open, the attacks that read
    what no API returns. Words only."""
    config = report["config"]
    ran = {row["attack"] for rows in report["ranking"].values() for row in rows}
    beyond = {spec.name for spec in ATTACKS if set(spec.reads) & set(WEIGHTS_ONLY)}
    what = "the whole next-token distribution, or the weights' features and gradients"
    if config.get("target_url"):
        refused = sorted(({item["attack"] for item in report.get("skipped") or []} & beyond) - ran)
        words = (f" This audit queried the model through its endpoint ({config['target_url']}), as a user of its API "
                 f"can: {len(ran)} attack{'s' * (len(ran) != 1)} ran on what the API returns")
        return words + (f"; not run, as no API returns what they read ({what}): {listed(refused)}, which an attacker "
                        "holding the weights adds." if refused else ".")
    used = sorted(ran & beyond)
    if not used or config.get("release") == "open-weights":
        return ""
    return (f" This audit ran on the weights, not through an API: {listed(used)} read what no API returns ({what}), "
            "which is what an attacker holding the weights adds; --target-url audits what an endpoint allows.")


def coverage_section(report: dict, threats: ThreatModels) -> dict:
    """report.json's `coverage`: the declared release and its context line, one entry per attack family of the
    Opinion, and the limits of the evidence; from the report's config, ranking and extraction/dataset sections, and the
    threat models the verdict names (`verdict.py:threat_models`)."""
    config = report["config"]
    family = model_family(config)
    release = config.get("release")
    return {"release": release, "context": release_context(release, threats.not_tried) + access_context(report),
            # the Opinion's order, its first class (attribute and membership inference) split in two
            "families": [membership(report, family, threats), attribute_inference(family), exfiltration(),
                         regurgitation(report, family), model_inversion(), reconstruction(family)],
            "limits": LIMITS}


def coverage_lines(report: ReportDocument) -> list[str]:
    """The coverage as text for the terminal: the context line, one line per family, the limits."""
    coverage = report.coverage
    if coverage is None:
        return []
    lines = ["", "Attack families of the EDPB's Opinion 28/2024:", f"  {coverage.context}"]
    for item in coverage.families:
        said = item.how_to_test if item.status == "not tested" else item.what_ran
        lines.append(f"  {item.family}: {item.status.upper()}: {said}")
    return [*lines, f"  {coverage.limits}"]
