"""An audit plan (docs/gate.md): the decision written before an audit runs: the model and its fingerprint, the data
files and their SHA-256, every setting that changes what the audit measures, what the planned data can show at each
level (metrics/power.py), and the thresholds that fail the gate; sealed like a report. A threshold the data cannot
decide is refused when the plan is written, unless the team accepts it, which the plan records."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from lmaudit import __version__
from lmaudit.atomic import write_text
from lmaudit.attacks.base import CLASSIFIER_LEVEL_NAMES, GENERIC_LEVEL_NAMES, LANGUAGE_MODEL_LEVEL_NAMES, LEVELS
from lmaudit.config import AuditConfig, validated
from lmaudit.errors import InputError
from lmaudit.metrics.power import LevelCounts, LevelPower, best_value, level_power
from lmaudit.models.fingerprints import adapter_file_names, files_digest_now, model_file_names
from lmaudit.models.folders import check_adapter_folder, resolve_model_folder
from lmaudit.report.integrity import data_hashes, read_sealed, seal_mismatches, sealed, written_form
from lmaudit.report.level_words import power_words
from lmaudit.strict_json import json_ready

PLAN_KEY = "plan_sha256"
PLAN_KIND = "audit_plan"
PLAN_SCHEMA = 2  # 2: the plan fixes every measuring setting and states its power
# What a threshold bounds at a level, read from report.json's summary.levels[level]: each passes when at most its value.
METRICS = {
    "auc": "the strongest attack's AUC (strongest.auc, its interval strongest.auc_ci)",
    "tpr_at_1pct_fpr": "the true-positive rate of the attack that exposes most members at the threshold accusing at "
                       "most 1% of the non-members (tpr_at_1pct_fpr.tpr, its interval tpr_at_1pct_fpr.tpr_ci)",
    "risk": "the level's risk: moderate passes low and moderate, low passes low alone",
}
SIDES = ("upper", "point", "lower")  # which number of a metric's interval is compared: upper by default
EARLIER_NAMES = {"auc_upper": ("auc", "upper")}  # a metric as plans named it before sides existed
RISKS = ("low", "moderate")  # the risk a threshold allows at most; "high" would pass every model
THRESHOLD = re.compile(r"(?P<level>[a-z_]+):(?P<metric>[a-z_0-9]+)(?::(?P<side>[a-z]+))?=(?P<value>\S+)")
# Every name a report gives a level, and the level's own key (which plans and report.json write).
LEVEL_ALIASES = {name: level for names in (LANGUAGE_MODEL_LEVEL_NAMES, CLASSIFIER_LEVEL_NAMES, GENERIC_LEVEL_NAMES)
                 for level, name in names.items()} | {level: level for level in LEVELS}
# The settings of how an audit runs and is written, not of what it measures: a plan leaves them to `audit --plan`.
RUN_SETTINGS = ("out", "cache_dir", "device", "device_map", "backend", "ray_address", "ray_workers", "figures",
                "include_text", "release", "vllm_python", "api_key_env", "concurrency", "request_timeout", "retries")


class PlanRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlannedThreshold(PlanRecord):
    """A threshold as the plan records it (parse_threshold): a number `at_most` on one side of its interval, or a risk."""

    level: str
    metric: Literal["auc", "tpr_at_1pct_fpr", "risk"]
    side: Literal["upper", "point", "lower"] | None = None
    at_most: float | Literal["low", "moderate"]


class PlannedTarget(PlanRecord):
    """The model the plan audits: its folder and the SHA-256 of its files, and its adapter's (None without one)."""

    folder: str
    fingerprint: str
    adapter: str | None
    adapter_fingerprint: str | None = None


class PlannedLevel(PlanRecord):
    """A level of the planned data: its name in the report and what its counts can show (metrics/power.py)."""

    name: str
    power: LevelPower


class AcceptedUndecidable(PlanRecord):
    """A threshold the planned data cannot decide, written with --accept-undecidable, and why."""

    threshold: str
    reason: str


class PlanDocument(PlanRecord):
    """plan.json: the audit decided before it runs: the target's fingerprint, the data files' SHA-256, every setting
    that changes what the audit measures, each level's power, the thresholds that fail the gate, and the seal."""

    schema_version: Literal[PLAN_SCHEMA]
    kind: Literal[PLAN_KIND]
    lmaudit_version: str
    created: str
    target: PlannedTarget
    data: dict[str, str]
    settings: dict[str, Any]
    levels: dict[str, PlannedLevel]
    thresholds: list[PlannedThreshold]
    undecidable: list[AcceptedUndecidable]
    metrics: dict[str, str]
    integrity: dict[str, str]


def write_plan(path: str | Path, document: dict) -> PlanDocument:
    """Write the sealed plan `document` to `path`, whole or not at all, once it matches PlanDocument; the plan."""
    plan = PlanDocument.model_validate(document)  # a writer's bug is refused before anything is on disk
    write_text(path, written_form(document))
    return plan


def parse_threshold(text: str) -> PlannedThreshold:
    """LEVEL:METRIC[:SIDE]=VALUE as a threshold record: the level's key (patient, admission, user and the report's
    other names accepted), the metric, for a number the side of its interval compared (upper unless given) and
    `at_most` a number in [0, 1], or a risk; InputError naming it."""
    match = THRESHOLD.fullmatch(text.strip())
    metric, side = EARLIER_NAMES.get(match["metric"], (match["metric"], match["side"])) if match else (None, None)
    if match is None or metric not in METRICS:
        raise InputError(f"--threshold {text}: write LEVEL:METRIC[:SIDE]=VALUE with METRIC one of {', '.join(METRICS)} "
                         "(e.g. sample:auc:upper=0.6, patient:risk=moderate)")
    level = LEVEL_ALIASES.get(match["level"])
    if level is None:
        raise InputError(f"--threshold {text}: no level '{match['level']}'; use one of {', '.join(LEVEL_ALIASES)}")
    if metric == "risk":
        if match["value"] not in RISKS or side:
            raise InputError(f"--threshold {text}: a risk threshold is {' or '.join(RISKS)} (high would pass every model)")
        return PlannedThreshold(level=level, metric="risk", at_most=match["value"])
    if (side or "upper") not in SIDES:
        raise InputError(f"--threshold {text}: SIDE is one of {', '.join(SIDES)} (the number of the interval compared)")
    try:
        value = float(match["value"])
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise InputError(f"--threshold {text}: {metric} is a number from 0 to 1")
    return PlannedThreshold(level=level, metric=metric, side=side or "upper", at_most=value)


def threshold_text(threshold: PlannedThreshold) -> str:
    """A threshold as the command line writes it, in its one written form (group:risk=moderate, sample:auc:upper=0.8)."""
    if threshold.side is None:
        return f"{threshold.level}:{threshold.metric}={threshold.at_most}"
    return f"{threshold.level}:{threshold.metric}:{threshold.side}={threshold.at_most:g}"


def undecidable(threshold: PlannedThreshold, counts: LevelCounts, units: str, delta: float = 1e-5) -> str | None:
    """Why the counts of a threshold's level cannot decide it (no outcome of the audit could pass it, or none could
    show what it asks), or None where they can; `units` names the level's units ('patients')."""
    power = level_power(counts, delta)
    given = f"{counts.members:,} member and {counts.nonmembers:,} non-member {units}"
    if threshold.metric == "risk" and threshold.at_most == "low":
        if power.can_read_low:
            return None
        return (f"'low' needs the non-members to resolve a 1% false-positive rate: about {power.nonmembers_for_low:,} "
                f"independent non-member {units}, {counts.nonmembers:,} planned")
    if threshold.metric == "risk":
        if power.can_read_high:
            return None
        reason = (f"even an attack that exposed every member and accused no non-member would show at most "
                  f"{power.best_exposure_ratio:.1f} times the rate it accuses (5 needed) and epsilon "
                  f"{power.best_epsilon:.2f} (1 needed)" if power.smallest_p < 0.01 else
                  f"{counts.permutations:,} relabellings of {counts.relabelled_members + counts.relabelled_nonmembers:,} "
                  "groups cannot give p below 0.01")
        return f"'high' cannot be read with {given}: {reason}"
    best = best_value(threshold.metric, threshold.side, counts)
    if best <= threshold.at_most:
        return None
    return (f"with {given}, even a model that learnt nothing would read {threshold.metric} ({threshold.side}) "
            f"{best:.3f}, above {threshold.at_most:g}")


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


def planned_settings(config: AuditConfig) -> dict:
    """The settings of `config` that a plan fixes: every one but RUN_SETTINGS, defaults included, as report.json's
    `config` echoes them."""
    return {key: value for key, value in config.model_dump(mode="json").items() if key not in RUN_SETTINGS}


def plan_document(config: AuditConfig, thresholds: list[PlannedThreshold], counts: dict[str, LevelCounts],
                  level_names: dict[str, str], accept_undecidable: bool = False) -> dict:
    """The sealed plan of the audit `config` (its signal already chosen) failing at `thresholds`, with what `counts`
    (the planned data's, per level) can show; InputError for a threshold at a level the data lacks, or one it cannot
    decide unless `accept_undecidable`, which the plan then records with the reasons."""
    if not thresholds:
        raise InputError("give at least one --threshold LEVEL:METRIC=VALUE; a plan without one passes every model")
    missing = next((t for t in thresholds if t.level not in counts), None)
    if missing is not None:
        raise InputError(f"--threshold {threshold_text(missing)}: the planned data has no {missing.level} level (no "
                         f"{'group_id' if missing.level == 'group' else 'subgroup_id'} column with values)")
    delta = config.evaluation.delta
    reasons = [(t, undecidable(t, counts[t.level], f"{level_names[t.level]}s", delta)) for t in thresholds]
    reasons = [(t, AcceptedUndecidable(threshold=threshold_text(t), reason=reason)) for t, reason in reasons if reason]
    if reasons and not accept_undecidable:
        threshold, first = reasons[0]
        raise InputError(f"--threshold {first.threshold} ({level_names[threshold.level]} level): the planned data "
                         f"cannot decide it ({first.reason}); plan "
                         "more data or another threshold, or give --accept-undecidable to write it anyway (the gate "
                         "then says CANNOT DECIDE)")
    levels = {level: PlannedLevel(name=level_names[level], power=level_power(counts[level], delta)) for level in counts}
    return sealed(json_ready({"schema_version": PLAN_SCHEMA, "kind": PLAN_KIND, "lmaudit_version": __version__,
                              "created": datetime.now(UTC).isoformat(timespec="seconds"),
                              "target": target_record(config.target, config.adapter),
                              "data": data_hashes([role_file.path for role_file in config.role_files()]),
                              "settings": planned_settings(config),
                              "levels": levels, "thresholds": thresholds, "undecidable": [r for _, r in reasons],
                              "metrics": {t.metric: METRICS[t.metric] for t in thresholds}}), PLAN_KEY)


def load_plan(path: str | Path) -> tuple[PlanDocument | None, list[str]]:
    """A plan and what differs from its seal, one line each (with any, no plan: what it says is not what was
    sealed); InputError naming the file when it cannot be read, is not a plan, or was written before plans fixed the
    audit's settings."""
    path = Path(path)
    plan, text = read_sealed(path)
    lines = seal_mismatches(path, plan, text, PLAN_KEY)
    if not lines and (plan.get("kind") != PLAN_KIND or not isinstance(plan.get("settings"), dict)):
        raise InputError(f"{path}: not an audit plan; write one with `lmaudit plan`")
    if not lines and plan.get("schema_version") != PLAN_SCHEMA:
        raise InputError(f"{path}: written by an earlier lmaudit, whose plans did not fix every setting the audit "
                         "measures with; plan again with `lmaudit plan`")
    if lines:
        return None, lines
    try:
        return PlanDocument.model_validate(plan), lines
    except ValidationError as error:
        where = ".".join(str(part) for part in error.errors()[0]["loc"])
        raise InputError(f"{path}: not a plan of this lmaudit's schema (at {where}); plan again with "
                         "`lmaudit plan`") from None


def plan_sha256(plan: PlanDocument) -> str:
    """The plan's recorded self-hash."""
    return plan.integrity[PLAN_KEY]


def checked_plan(path: str | Path) -> PlanDocument:
    """The plan at `path`, refused (InputError, one line) unless its seal, its data files' SHA-256 and its target's
    fingerprint all match: what `lmaudit audit --plan` runs."""
    plan, lines = load_plan(path)
    if lines:
        raise InputError(f"{path}: its self-hash does not match its content ({lines[0].split(': ', 1)[1]}); "
                         "plan again with `lmaudit plan`")
    for file, recorded in plan.data.items():
        if data_hashes([file])[file] != recorded:
            raise InputError(f"{file}: its SHA-256 differs from the plan's ({path}); audit the data that was planned")
    target = plan.target
    if PlannedTarget(**target_record(target.folder, target.adapter)) != target:
        raise InputError(f"{target.folder}: its fingerprint differs from the plan's ({path}); audit the model that "
                         "was planned")
    return plan


def planned_config(plan_path: str, options: dict, config_path: str | None) -> tuple[AuditConfig, dict]:
    """`lmaudit audit --plan`'s configuration: the plan's settings with the given run options (RUN_SETTINGS) on top,
    refused in one line, before anything is written, unless the plan and its data and model are unchanged and no
    option the plan fixes is given too; and the plan's record for the report."""
    if config_path:
        raise InputError("--config: not with --plan; the plan fixes every setting the audit measures with")
    fixed = [name for name, value in options.items() if name not in RUN_SETTINGS and value not in (None, (), False)]
    if fixed:
        raise InputError(f"--{fixed[0].replace('_', '-')}: fixed by the plan ({plan_path}); drop it, or write a new "
                         "plan with it")
    planned = checked_plan(plan_path)
    run = {name: value for name, value in options.items() if name in RUN_SETTINGS and value is not None}
    config = validated({**planned.settings, **run}, str(plan_path))
    return config, {"path": str(plan_path), "plan_sha256": plan_sha256(planned)}


def plan_lines(plan: PlanDocument) -> list[str]:
    """The plan in words for the terminal: each level's power, then each threshold and whether its data decides it."""
    group_name = plan.levels["group"].name if "group" in plan.levels else "group"
    lines = [power_words(entry.name, entry.power, group_name) for entry in plan.levels.values()]
    accepted = {entry.threshold: entry.reason for entry in plan.undecidable}
    for threshold in plan.thresholds:
        text = threshold_text(threshold)
        lines.append(f"threshold {text}: this data cannot decide it ({accepted[text]}); accepted with "
                     "--accept-undecidable" if text in accepted else f"threshold {text}: the planned data can decide it")
    return lines
