"""The release gate (docs/gate.md): a report against the plan written before its audit ran: whether it is that plan's
report, and each planned threshold passed or failed."""

from __future__ import annotations

import math
from typing import NamedTuple

from lmaudit.report.plan import PLAN_KEY, plan_sha256

RISK_RANK = {"low": 0, "moderate": 1, "high": 2, "inconclusive": 2}  # an audit that cannot tell passes no stricter gate


class Outcome(NamedTuple):
    """One threshold of the plan against the report: passed or not, and the line that says so."""

    passed: bool
    line: str


def plan_mismatches(report: dict, plan: dict) -> list[str]:
    """What shows that the report was not produced from this plan, one line each (none: it was)."""
    provenance = report.get("provenance") or {}
    recorded = (provenance.get("plan") or {}).get(PLAN_KEY)
    if recorded != plan_sha256(plan):
        return [f"report: produced from plan {recorded}, not from this plan ({plan_sha256(plan)})"]
    lines = [] if provenance.get("data") == plan["data"] else ["report: its data files' SHA-256 are not the plan's"]
    target = (report.get("model_files") or {}).get("target") or {}
    planned = plan["target"]
    if (target.get("fingerprint"), target.get("adapter_fingerprint")) != (planned["fingerprint"],
                                                                         planned.get("adapter_fingerprint")):
        lines.append("report: its target's fingerprint is not the plan's")
    return lines


def threshold_outcomes(report: dict, thresholds: list[dict]) -> list[Outcome]:
    """Each planned threshold against the report's verdict at its level (a level or metric the report lacks fails)."""
    levels = (report.get("summary") or {}).get("levels") or {}
    return [outcome(levels.get(threshold["level"]), threshold) for threshold in thresholds]


def outcome(level: dict | None, threshold: dict) -> Outcome:
    """One threshold against one level's verdict (None: the report has no such level)."""
    where = f"{threshold['level']} {threshold['metric']}"
    limit = threshold["at_most"]
    if level is None:
        return Outcome(False, f"FAIL {where}: the report has no {threshold['level']} level (threshold {limit})")
    if threshold["metric"] == "risk":
        passed = RISK_RANK[level["risk"]] <= RISK_RANK[limit]
        return Outcome(passed, f"{'PASS' if passed else 'FAIL'} {where}: {level['risk']} (threshold: at most {limit})")
    value, detail = measured(level, threshold["metric"])
    if value is None:
        return Outcome(False, f"FAIL {where}: not measured by the audit (threshold {limit:g})")
    passed = value <= limit
    return Outcome(passed, f"{'PASS' if passed else 'FAIL'} {where} = {value:.4f} ({detail}); threshold: at most "
                           f"{limit:g}")


def measured(level: dict, metric: str) -> tuple[float | None, str]:
    """A metric's value at a level's verdict (None when not measured) and what it is, with its interval."""
    if metric == "auc_upper":
        strongest = level["strongest"]
        low, high = strongest["auc_ci"]
        return _number(high), (f"{strongest['attack']} on {strongest['signal']}: AUC {_shown(strongest['auc'])}, "
                               f"interval {_shown(low)}-{_shown(high)}")
    record = level.get("tpr_at_1pct_fpr")
    if record is None:
        return None, ""
    low, high = record["tpr_ci"]
    return _number(record["tpr"]), (f"{record['attack']} on {record['signal']}: TPR interval {_shown(low)}-"
                                    f"{_shown(high)}")


def _number(value) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _shown(value) -> str:
    return "n/a" if _number(value) is None else f"{value:.4f}"
