"""The blind baseline as the report reads it: beside the ranking, how far each level's strongest attack goes beyond
what the texts alone give (its lift), and in words, where the texts alone separate members from a non-member set
(`metrics/validity.py` computes the numbers)."""

from __future__ import annotations

from lmaudit.report.document import RankedAttack
from lmaudit.report.formatting import finite_or_none, with_interval


def verdict_set_levels(validity: dict | None) -> dict[str, dict]:
    """The blind baseline's result per level on the verdict's non-member set (the first), or {} where it did not run."""
    sets = (validity or {}).get("sets") or {}
    return next(iter(sets.values()), {}).get("levels", {})


def with_lift(validity: dict, ranking: dict[str, list[RankedAttack]]) -> dict:
    """`validity` with, for the verdict's set, each level's strongest attack (the first of `ranking`) and its lift: its
    AUC minus the blind AUC, how far the model goes beyond what the texts alone give."""
    for level, entry in verdict_set_levels(validity).items():
        if ranking.get(level):
            strongest = ranking[level][0]
            entry["strongest_attack"] = f"{strongest.attack} on {strongest.signal}"
            entry["lift"] = strongest.auc - entry["auc"]
    return validity


def ranking_with_lift(ranking: dict[str, list[RankedAttack]], validity: dict | None) -> dict[str, list[RankedAttack]]:
    """`ranking` with each row's `lift_over_blind`: its AUC minus the blind AUC of its level on the verdict's set (no
    field where the blind baseline did not run at that level)."""
    blind = verdict_set_levels(validity)
    return {level: [row.model_copy(update={"lift_over_blind": lift_over(row, blind[level])}) for row in rows]
            if level in blind else rows for level, rows in ranking.items()}


def lift_over(row: RankedAttack, blind: dict) -> float | None:
    """A ranked attack's AUC minus the blind AUC of its level; None where its AUC is not a number."""
    auc = finite_or_none(row.auc)
    return None if auc is None else auc - blind["auc"]


def shift_caveats(validity: dict, level_names: dict[str, str]) -> tuple[list[str], list[str]]:
    """Per non-member set that the texts alone separate from the members at some level (the lower 95% bound of the
    blind AUC above metrics/validity.py:SHIFT_AUC), a caveat naming the level, the blind AUC and, for the verdict's set, the lift: those of
    the verdict's set (the first), which bear on the verdict, and those of the other sets, which do not."""
    caveats: tuple[list[str], list[str]] = ([], [])
    for position, (name, entry) in enumerate(validity["sets"].items()):
        separated = [(level, result) for level, result in entry.get("levels", {}).items() if result["texts_separate"]]
        if not separated:
            continue
        level, result = max(separated, key=lambda item: item[1]["auc_ci"][0])
        lift = (f"; the strongest attack ({result['strongest_attack']}) goes {result['lift']:+.3f} beyond it"
                if "lift" in result else "")
        who = "the non-members" if name == "nonmembers" else f"the {name} non-members"  # an unnamed set
        reading = ("Part of what the attacks find against these non-members is how the data was collected, not the "
                   "model (README, Reading the verdict)." if position == 0 else
                   "The verdict audits another set, so this does not change it; it says how far these non-members "
                   "differ from the members as texts.")
        caveats[position > 0].append(
            f"the texts alone, with no model, separate members from {who}: a blind classifier "
            f"({result['classifier'].replace('_', ' ')}) reaches AUC {with_interval(result['auc'], result['auc_ci'])} "
            f"per {level_names.get(level, level)}{lift}. {reading}")
    return caveats
