"""Warnings an auditor must see before trusting the numbers, read from report.json's document: inverted signals,
a shadow model unlike the target, Algorithm 4's vote cut where it calls no or every sample, too little population to
calibrate, no threshold at all, truncated samples; and, from the metrics' numbers before the document is built, a
population unlike the audited non-members and scores too large for arithmetic."""

from __future__ import annotations

from collections.abc import Mapping

from lmaudit.attacks.base import LEVELS
from lmaudit.metrics.evaluate import EXTREME_SCORE, ExtremeScores
from lmaudit.metrics.results import AttackResult

INVERTED_AUC = 0.4  # an AUC below this, with its whole interval under 0.5, is a strong signal the wrong way round
ACCURACY_MISMATCH = 0.10  # shadow and target train accuracies further apart than this (fraction) calibrate badly
VOTE_SATURATION = 0.05  # Algorithm 4's thresholds calling fewer (or more, of the rest) audited samples than this


def on_all_data(results: list[AttackResult], level: str) -> list[AttackResult]:
    """The results of one level on all the audited data (no slice)."""
    return [r for r in results if r.level == level and r.slice == "all"]


def inverted_signal_warnings(results: list[AttackResult], level_names: dict[str, str]) -> list[str]:
    """One warning per level whose attacks score members clearly lower than non-members (AUC well below 0.5; an AUC
    or bound that is not a number is not below anything)."""
    warnings = []
    for level in LEVELS:
        inverted = [r for r in on_all_data(results, level) if r.auc < INVERTED_AUC and r.auc_ci[1] < 0.5]
        if inverted:
            listed = ", ".join(f"{r.attack} ({r.signal}) {r.auc:.3f}" for r in inverted)
            warnings.append(
                f"{level_names.get(level, level)} level: AUC well below 0.5 for {listed}: a strong signal in the inverted "
                "direction (members look less like training data than non-members). Check that the member file holds "
                "the target's training data and that no two models are swapped; an attack fitted on another model "
                "(a shadow) may also not transfer. The verdict does not count a flipped attack: its direction must be "
                "fixed before the labels are seen.")
    return warnings


def shadow_mismatch_warnings(models: dict) -> list[str]:
    """A warning when the shadow classifier's train accuracy differs from the target's by more than ACCURACY_MISMATCH."""
    target, shadow = models.get("target"), models.get("shadow")
    if not target or not shadow or target.get("train_accuracy") is None or shadow.get("train_accuracy") is None:
        return []
    difference = abs(target["train_accuracy"] - shadow["train_accuracy"])
    if difference <= ACCURACY_MISMATCH:
        return []
    return [f"the shadow model's train accuracy ({shadow['train_accuracy']:.1%}) differs from the target's "
            f"({target['train_accuracy']:.1%}) by {100 * difference:.0f} points: thresholds calibrated on the shadow "
            "model assume it overfits like the target, so accuracy and precision at them mislead; train the shadow "
            "model like the target (same architecture, size, epochs and amount of data)"]


def saturated_vote_warnings(results: list[AttackResult]) -> list[str]:
    """A warning when Algorithm 4's shadow thresholds call at most VOTE_SATURATION or at least 1 - VOTE_SATURATION of
    the audited samples members: every user's share is then about the same, and its AUC reflects the cut, not the model."""
    saturated = [r for r in results if r.attack == "sample_to_user" and r.slice == "all"
                 and (called := (r.calibration or {}).get("posts_called_members")) is not None
                 and min(called, 1 - called) <= VOTE_SATURATION]
    if not saturated:
        return []
    listed = ", ".join(f"{r.signal} ({r.calibration['posts_called_members']:.0%} called)" for r in saturated)
    return [f"sample_to_user (Algorithm 4) on {listed}: the shadow model's thresholds call almost none or almost all of "
            "the audited samples members, so every user's share is about the same and its AUC says where the shadow "
            "cut, not what the target leaks; read Algorithm 2 (user_threshold_*), whose AUC needs no threshold"]


def population_reader(result: AttackResult) -> str:
    """An attack as a population warning names it: with why its population count is smaller than the data's, when it
    trains on part of the population and calibrates its thresholds on the rest."""
    trained_on = (result.calibration or {}).get("trained_on", "")
    return (f"{result.attack}, which trains on half of the population and calibrates on the other half"
            if "population" in trained_on else result.attack)


def population_warnings(results: list[AttackResult], level_names: dict[str, str]) -> list[str]:
    """One warning per level whose population is too small (or too tied) to calibrate some threshold: each reason, with
    the attacks it concerns when not all of the level's (attacks may read different parts of the population). An audit
    without population data gets none: its cells say why they are blank."""
    warnings = []
    for level in LEVELS:
        at_level = on_all_data(results, level)
        attacks_by_reason: dict[str, list[str]] = {}
        for result in at_level:
            unavailable = result.unavailable or {}
            for key in sorted((k for k in unavailable if k.startswith("population_threshold")),
                              key=lambda k: -float(k.rsplit("_", 1)[1])):
                if result.n_population:  # no population at all is a choice (a shadow calibrates), not a shortage
                    attacks_by_reason.setdefault(unavailable[key], []).append(population_reader(result))
        if attacks_by_reason:
            parts, said = [], None
            for reason, attacks in attacks_by_reason.items():
                # "the population has 7 patients; a 10% threshold needs 10" says the count once for the thresholds after
                count, _, need = reason.partition("; ")
                part = need if count == said and need else reason
                said = count
                parts.append(part if len(attacks) == len(at_level) else f"{part} ({', '.join(dict.fromkeys(attacks))})")
            listed = "; ".join(parts)
            advice = "; give more population data" if any("needs at least" in r for r in attacks_by_reason) else ""
            warnings.append(f"{level_names.get(level, level)} level: {listed}. Precision, recall and advantage at those "
                            f"thresholds are missing{advice}")
    return warnings


def uncalibrated_warnings(results: list[AttackResult], level_names: dict[str, str]) -> list[str]:
    """One warning per level and cause with attacks that got no threshold at all, only their AUC and TPRs measured: no
    population (and no calibration members or shadow model for them), or a population too small or too tied to
    calibrate any threshold (the population warning above gives the counts)."""
    warnings = []
    for level in LEVELS:
        bare = [r for r in on_all_data(results, level) if not r.thresholds]
        by_cause: dict[str, list[str]] = {}
        for result in bare:
            cause = ("no population data, and no calibration members or shadow model for them" if not result.n_population
                     else f"its population of {result.n_population} is too small or too tied to calibrate a threshold")
            by_cause.setdefault(cause, []).append(result.attack)
        for cause, attacks in by_cause.items():
            advice = "give population data (--population)" if cause.startswith("no population") else "give more population data"
            warnings.append(f"{level_names.get(level, level)} level: no threshold could be calibrated for "
                            f"{', '.join(dict.fromkeys(attacks))} ({cause}): precision, recall, advantage and the epsilon "
                            f"bound are missing; {advice}")
    return warnings


def truncation_warnings(data: dict) -> list[str]:
    """A warning when samples were truncated to the model's length limit (their tail was never scored)."""
    truncated = data.get("truncated", 0)
    if not truncated:
        return []
    total = sum(data.get("counts", {}).values())
    return [f"{truncated} of {total} scored samples ({truncated / max(total, 1):.1%}) were longer than the model's limit "
            "(or --max-length) and were truncated: the text beyond it was not scored, so leakage there is not measured"]


def ungrouped_warnings(data: dict, level_names: dict[str, str]) -> list[str]:
    """A warning when some samples lack the group id the others have: each is audited as a group of its own."""
    ungrouped = data.get("ungrouped", 0)
    if not ungrouped:
        return []
    total, unit = sum(data.get("counts", {}).values()), level_names.get("group", "group")
    return [f"{ungrouped} of {total} samples have no group_id: each is audited as a {unit} of its own; if they share "
            f"{unit}s, intervals and tests count them as independent, so give every sample its group_id"]


def population_mismatch_warnings(population: dict, level_names: Mapping[str, str]) -> list[str]:
    """One warning per attack and level that `metrics/population_fit.py:population_fit` rejected (each level called by
    its name in `level_names`, as the report's tables call it): precision and recall at population thresholds mislead
    there."""
    return [
        f"{r['attack']} on {r['signal']} ({level_names.get(r['level'], r['level'])} level): the population scores unlike "
        f"the audited non-members (AUC {r['population_auc']:.3f} of the population against them; family-wise p = "
        f"{r['family_p']:.2g}, below {population['level']:g}); thresholds calibrated on that population call another "
        "share of the non-members than they say, so precision and recall at them mislead"
        for r in population["rejected"]
    ]


def extreme_score_warnings(found: list[ExtremeScores]) -> list[str]:
    """One warning per sample-level attack with scores beyond EXTREME_SCORE in size
    (`metrics/evaluate.py:extreme_scores`)."""
    return [f"{e.attack} on {e.signal}: {e.extreme} of {e.scores} scores are beyond {EXTREME_SCORE:g} in size, near the "
            "largest floats; their ranks (the AUC, the TPRs) stand, but sums and differences of such values overflow: "
            "check the losses that produced them" for e in found]


def audit_warnings(document: dict, results: list[AttackResult]) -> list[str]:
    """Every check above on a report.json document."""
    names = document.get("level_names", {})
    return (inverted_signal_warnings(results, names) + shadow_mismatch_warnings(document.get("models") or {})
            + saturated_vote_warnings(results)
            + population_warnings(results, names) + uncalibrated_warnings(results, names)
            + truncation_warnings(document["data"]) + ungrouped_warnings(document["data"], names))
