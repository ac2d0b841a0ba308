"""An audit plan (docs/gate.md): the decision written before an audit runs: the model and its fingerprint, the data
files and their SHA-256, the seed, the attacks, and per level the thresholds that fail the gate; sealed like a report.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from lmaudit import __version__
from lmaudit.errors import InputError
from lmaudit.models.fingerprints import adapter_file_names, files_digest_now, model_file_names
from lmaudit.models.folders import check_adapter_folder, resolve_model_folder
from lmaudit.report.integrity import data_hashes, read_sealed, seal_mismatches, sealed

PLAN_KEY = "plan_sha256"
PLAN_KIND = "audit_plan"
# What a threshold bounds at a level, read from report.json's summary.levels[level]: each passes when at most its value.
METRICS = {
    "auc_upper": "the upper end of the strongest attack's AUC interval (strongest.auc_ci)",
    "tpr_at_1pct_fpr": "the verdict's true-positive rate at 1% false positives (tpr_at_1pct_fpr.tpr)",
    "risk": "the level's risk: low < moderate < high, inconclusive counted as high",
}
RISKS = ("low", "moderate", "high")
THRESHOLD = re.compile(r"(?P<level>[a-z_]+):(?P<metric>[a-z_0-9]+)=(?P<value>\S+)")
# The audit's settings a plan fixes; `lmaudit audit --plan` takes them from the plan alone.
PLANNED = ("target", "adapter", "reference", "members", "nonmembers", "population", "calibration_members", "data",
           "seed")
DATA_SETTINGS = ("members", "nonmembers", "population", "calibration_members", "data")


def parse_threshold(text: str) -> dict:
    """LEVEL:METRIC=VALUE as a threshold record (`at_most` a number in [0, 1], or a risk); InputError naming it."""
    match = THRESHOLD.fullmatch(text.strip())
    if match is None or match["metric"] not in METRICS:
        raise InputError(f"--threshold {text}: write LEVEL:METRIC=VALUE with METRIC one of {', '.join(METRICS)} "
                         "(e.g. sample:auc_upper=0.6)")
    if match["metric"] == "risk":
        if match["value"] not in RISKS:
            raise InputError(f"--threshold {text}: a risk threshold is one of {', '.join(RISKS)}")
        return {"level": match["level"], "metric": "risk", "at_most": match["value"]}
    try:
        value = float(match["value"])
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise InputError(f"--threshold {text}: {match['metric']} is a number from 0 to 1")
    return {"level": match["level"], "metric": match["metric"], "at_most": value}


def data_files(settings: dict) -> list[str]:
    """The data files a plan's settings name (a non-member file or several sets by name), in the settings' order."""
    files = []
    for name in DATA_SETTINGS:
        value = settings.get(name)
        files += list(value.values()) if isinstance(value, dict) else [value] if value else []
    return files


def target_record(target: str, adapter: str | None) -> dict:
    """The target's folder and fingerprint, and its adapter's, hashed now (never from the fingerprint cache)."""
    folder = resolve_model_folder(target)
    if not folder.is_dir():
        raise InputError(f"{target}: no such model folder; give --target the folder the audit will read")
    record = {"folder": target, "fingerprint": files_digest_now(folder, model_file_names(folder)), "adapter": adapter}
    if adapter is not None:
        check_adapter_folder(Path(adapter))
        record["adapter_fingerprint"] = files_digest_now(Path(adapter), adapter_file_names(Path(adapter)))
    return record


def plan_document(settings: dict, thresholds: list[dict]) -> dict:
    """The sealed plan of an audit with `settings` (PLANNED, as given) failing at `thresholds`."""
    if not thresholds:
        raise InputError("give at least one --threshold LEVEL:METRIC=VALUE; a plan without one passes every model")
    levels = list(dict.fromkeys(threshold["level"] for threshold in thresholds))
    return sealed({"kind": PLAN_KIND, "lmaudit_version": __version__,
                   "created": datetime.now(UTC).isoformat(timespec="seconds"),
                   "target": target_record(settings["target"], settings.get("adapter")),
                   "data": data_hashes(data_files(settings)), "settings": settings, "attacks": "all",
                   "levels": levels, "thresholds": thresholds, "metrics": {t["metric"]: METRICS[t["metric"]]
                                                                           for t in thresholds}}, PLAN_KEY)


def load_plan(path: str | Path) -> tuple[dict, list[str]]:
    """A plan and what differs from its seal, one line each; InputError naming the file when it cannot be read or is
    not a plan."""
    path = Path(path)
    plan, text = read_sealed(path)
    lines = seal_mismatches(path, plan, text, PLAN_KEY)
    if not lines and (plan.get("kind") != PLAN_KIND or not isinstance(plan.get("settings"), dict)):
        raise InputError(f"{path}: not an audit plan; write one with `lmaudit plan`")
    return plan, lines


def plan_sha256(plan: dict) -> str:
    """The plan's recorded self-hash."""
    return plan["integrity"][PLAN_KEY]


def checked_plan(path: str | Path) -> dict:
    """The plan at `path`, refused (InputError, one line) unless its seal, its data files' SHA-256 and its target's
    fingerprint all match: what `lmaudit audit --plan` runs."""
    plan, lines = load_plan(path)
    if lines:
        raise InputError(f"{path}: its self-hash does not match its content ({lines[0].split(': ', 1)[1]}); "
                         "plan again with `lmaudit plan`")
    for file, recorded in plan["data"].items():
        if data_hashes([file])[file] != recorded:
            raise InputError(f"{file}: its SHA-256 differs from the plan's ({path}); audit the data that was planned")
    target = plan["target"]
    if target_record(target["folder"], target["adapter"]) != target:
        raise InputError(f"{target['folder']}: its fingerprint differs from the plan's ({path}); audit the model that "
                         "was planned")
    return plan


def planned_options(plan_path: str, options: dict, config_path: str | None) -> tuple[dict, dict]:
    """`lmaudit audit --plan`'s options: the plan's settings (refused in one line, before anything is written, unless
    the plan and its data and model are unchanged; an option the plan fixes may not be given too), and the plan's
    record for the report."""
    if config_path:
        raise InputError("--config: not with --plan; the plan fixes the audit's models, data and seed")
    clashing = [name for name in PLANNED if options.get(name) not in (None, (), False)]
    if clashing:
        raise InputError(f"--{clashing[0].replace('_', '-')}: given with --plan, which fixes it; drop it")
    planned = checked_plan(plan_path)
    return {**options, **planned["settings"]}, {"path": str(plan_path), "plan_sha256": plan_sha256(planned)}
