"""The release gate (docs/gate.md): whether a report is its plan's, what the planned audit ran and did not, and for each
planned threshold one decision that means one thing: PASS, FAIL, or CANNOT DECIDE with the reason.

A risk threshold of `moderate` fails a level that reads high, or whose attacks expose most of its members at the 1%
threshold beyond chance (metrics/risk_rule.py:MOST_EXPOSED: a leak that too few non-members keep from reading high is
still a leak); it cannot decide a level whose counts could never read high, or whose texts alone separate the sets. A
threshold of `low` passes only a level that reads low; an inconclusive one cannot be decided. A number is compared by
the side of its interval the threshold names (its upper end unless it says otherwise); where even a model that learnt
nothing could not have met it on these counts, and the interval reaches below it, the gate cannot decide."""

from __future__ import annotations

from typing import NamedTuple

from lmaudit.metrics.power import best_value
from lmaudit.metrics.risk_rule import MODERATE_LEVEL, MOST_EXPOSED
from lmaudit.report.document import LevelVerdict, ReportDocument
from lmaudit.report.formatting import finite_or_none
from lmaudit.report.plan import (
    PLAN_KEY,
    RUN_SETTINGS,
    PlanDocument,
    PlannedThreshold,
    plan_sha256,
    threshold_text,
)

PASS, FAIL, UNDECIDED = "PASS", "FAIL", "CANNOT DECIDE"


class Decision(NamedTuple):
    """One threshold of the plan against the report: PASS, FAIL or CANNOT DECIDE, and the line that says why."""

    decision: str
    line: str


def plan_mismatches(report: ReportDocument, plan: PlanDocument) -> list[str]:
    """What shows that the report was not produced from this plan, one line each (none: it was)."""
    provenance = report.provenance or {}
    recorded = (provenance.get("plan") or {}).get(PLAN_KEY)
    if recorded != plan_sha256(plan):
        return [f"report: produced from plan {recorded}, not from this plan ({plan_sha256(plan)})"]
    lines = [] if provenance.get("data") == plan.data else ["report: its data files' SHA-256 are not the plan's"]
    target = (report.model_files or {}).get("target") or {}
    planned = plan.target
    if (target.get("fingerprint"), target.get("adapter_fingerprint")) != (planned.fingerprint,
                                                                         planned.adapter_fingerprint):
        lines.append("report: its target's fingerprint is not the plan's")
    measured = {key: value for key, value in report.config.items() if key not in RUN_SETTINGS}
    differing = next((key for key in dict.fromkeys([*plan.settings, *measured])
                      if plan.settings.get(key) != measured.get(key)), None)
    if differing is not None:
        lines.append(f"report: its setting '{differing}' is not the plan's")
    return lines


def decisions(report: ReportDocument, thresholds: list[PlannedThreshold]) -> list[Decision]:
    """Each planned threshold against the report's verdict at its level (a level the report lacks cannot be decided)."""
    return [decide(report.summary.levels.get(threshold.level), threshold) for threshold in thresholds]


def decide(level: LevelVerdict | None, threshold: PlannedThreshold) -> Decision:
    """One threshold against one level's verdict (None: the report has no such level)."""
    text = threshold_text(threshold)
    if level is None:
        return Decision(UNDECIDED, f"{UNDECIDED} {text}: the report has no {threshold.level} level")
    where = f"{text} ({level.name} level)"
    if threshold.metric == "risk":
        return _risk_decision(level, threshold.at_most, where)
    return _number_decision(level, threshold, where)


def most_exposed(level: LevelVerdict) -> bool:
    """Whether the level's attacks expose most of its members at the 1% threshold, beyond chance: the headline TPR
    above MOST_EXPOSED and the level's test rejecting at MODERATE_LEVEL."""
    record, p_value = level.tpr_at_1pct_fpr, level.p_value
    return bool(record is not None and record.tpr > MOST_EXPOSED and p_value is not None and p_value < MODERATE_LEVEL)


def _risk_decision(level: LevelVerdict, limit: str, where: str) -> Decision:
    risk, power, units = level.risk, level.power, f"{level.name}s"
    read = f"reads {risk}"
    if limit == "low":
        if risk == "low":
            return Decision(PASS, f"{PASS} {where}: {read}")
        if risk in ("moderate", "high"):
            return Decision(FAIL, f"{FAIL} {where}: {read}")
    elif risk == "high":
        return Decision(FAIL, f"{FAIL} {where}: {read}")
    if level.shift:
        return Decision(UNDECIDED, f"{UNDECIDED} {where}: the texts alone separate members from non-members, so "
                                   f"neither a high nor a low reading stands (the attacks alone: "
                                   f"{level.risk_from_attacks})")
    if limit == "low":
        why = (f"too few non-member {units} to read low (about {power.nonmembers_for_low:,} independent ones needed, "
               f"{power.counts.nonmembers:,} given)" if power and not power.can_read_low else
               "the non-members did not resolve a 1% false-positive rate")
        return Decision(UNDECIDED, f"{UNDECIDED} {where}: {read}: {why}")
    if most_exposed(level):
        record = level.tpr_at_1pct_fpr
        return Decision(FAIL, f"{FAIL} {where}: {read}, but {record.attack} on {record.signal} exposes "
                              f"{record.tpr:.1%} of member {units} ({record.tp} of {record.n_members}) at the "
                              f"1% threshold, beyond chance (family-wise p = {level.p_value:.2g}): most members")
    if power and not power.can_read_high:
        return Decision(UNDECIDED, f"{UNDECIDED} {where}: {read}, but these counts could never read high "
                                   f"({power.counts.members:,} member and {power.counts.nonmembers:,} "
                                   f"non-member {units}: at "
                                   f"best {power.best_exposure_ratio:.1f} times the false-positive rate, epsilon "
                                   f"{power.best_epsilon:.2f}, p {power.smallest_p:.2g})")
    return Decision(PASS, f"{PASS} {where}: {read}")


def measured(level: LevelVerdict, metric: str) -> tuple[float | None, tuple, str]:
    """A metric's point value at a level's verdict (None when not measured), its interval and what it is."""
    if metric == "auc":
        record = level.strongest
        return finite_or_none(record.auc), record.auc_ci, f"{record.attack} on {record.signal}, the strongest"
    record = level.tpr_at_1pct_fpr
    if record is None:
        return None, (None, None), ""
    return (finite_or_none(record.tpr), record.tpr_ci,
            f"{record.attack} on {record.signal}, exposing most ({record.tp} of {record.n_members})")


def _number_decision(level: LevelVerdict, threshold: PlannedThreshold, where: str) -> Decision:
    point, interval, detail = measured(level, threshold.metric)
    low, high = (finite_or_none(bound) for bound in interval)
    value = {"upper": high, "point": point, "lower": low}[threshold.side]
    limit = threshold.at_most
    if value is None:
        return Decision(UNDECIDED, f"{UNDECIDED} {where}: not measured by the audit")
    shown = f"{value:.4f} ({detail}: {_shown(point)} [{_shown(low)}, {_shown(high)}])"
    if value <= limit:
        return Decision(PASS, f"{PASS} {where}: {shown}")
    counts = level.power.counts if level.power is not None else None
    best = best_value(threshold.metric, threshold.side, counts) if counts is not None else None
    if best is not None and best > limit and (low is None or low <= limit):
        return Decision(UNDECIDED, f"{UNDECIDED} {where}: {shown}; on these counts even a model that learnt nothing "
                                   f"would read {best:.4f}")
    return Decision(FAIL, f"{FAIL} {where}: {shown}")


def strength_lines(report: ReportDocument, plan: PlanDocument) -> list[str]:
    """What the planned audit measured with and what it could not run, and any threshold the plan accepted as
    undecidable when it was written: the gate's opening lines."""
    settings = plan.settings
    signal = settings.get("signal") or {}
    token = f" and {settings['token_signal']}" if settings.get("token_signal") else ""
    references = len(settings.get("reference") or [])
    permutations = (settings.get("evaluation") or {}).get("permutations")
    lines = [f"plan {plan_sha256(plan)[:12]}: signal {signal.get('signal')}{token}, {references} reference model"
             f"{'s' * (references != 1)}, white-box {'on' if settings.get('whitebox') else 'off'}, {permutations:,} "
             f"relabellings, seed {(settings.get('evaluation') or {}).get('seed')}"]
    ran = sorted({row.attack for rows in report.ranking.values() for row in rows})
    lines.append(f"ran {len(ran)} attack{'s' * (len(ran) != 1)}: {', '.join(ran)}")
    reasons: dict[str, list[tuple[str, str]]] = {}  # each attack that never ran: why, on each signal it was tried on
    for skipped in report.skipped:
        said = (skipped.signal or "", skipped.reason)
        if skipped.attack not in ran and said not in reasons.setdefault(skipped.attack, []):
            reasons[skipped.attack].append(said)
    by_reason: dict[tuple, list[str]] = {}
    for attack, said in reasons.items():
        by_reason.setdefault(tuple(said), []).append(attack)
    for said, names in by_reason.items():
        why = said[0][1] if len(said) == 1 else "; ".join(f"on {signal}, {reason}" for signal, reason in said)
        lines.append(f"not run: {', '.join(names)}: {why}")
    if report.summary.threat_models.not_tried:
        lines.append(f"threat models not tried: {', '.join(report.summary.threat_models.not_tried)}")
    lines += [f"accepted when planned: {entry.threshold} cannot be decided by this data ({entry.reason})"
              for entry in plan.undecidable]
    return lines


def _shown(value) -> str:
    return "n/a" if finite_or_none(value) is None else f"{value:.4f}"
