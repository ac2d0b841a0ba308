"""The null laboratory of the memorisation curve (`metrics/memorisation_curve.py`): canaries dealt to repetition
tiers in turn, each planted by a fair coin, scored from a standard normal, a planted canary of a learned tier moved up
by its tier's shift; "ties": scores rounded to halves. How often the curve claims a count it should not (any claim,
under the null) and finds the one it should (power). No torch."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lmaudit.metrics.memorisation_curve import CURVE_LEVEL, memorised_counts, tier_p_values
from lmaudit.studies.null_lab import Rate


@dataclass(frozen=True)
class CurveScenario:
    """`canaries` dealt to the counts of `shifts` (count: how far a planted canary of that tier scores up, in standard
    deviations; all 0 is the null), scores rounded to halves where `ties`."""

    name: str
    canaries: int
    shifts: dict[int, float] = field(default_factory=lambda: {1: 0.0, 4: 0.0, 16: 0.0})
    ties: bool = False

    @property
    def truth(self) -> str:
        learned = [f"the {count}-copy tier {shift:g} sd up" for count, shift in self.shifts.items() if shift]
        return ", ".join(learned) or "null"


def simulated_canaries(scenario: CurveScenario, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One run's (scores, coins, repetition counts)."""
    counts = np.array(sorted(scenario.shifts))[np.arange(scenario.canaries) % len(scenario.shifts)]
    included = rng.random(scenario.canaries) < 0.5
    shift = np.array([scenario.shifts[int(count)] for count in counts], float)
    scores = rng.normal(size=scenario.canaries) + included * shift
    return (np.round(scores * 2) / 2 if scenario.ties else scores), included, counts


def claims(scenario: CurveScenario, runs: int, seed: int = 0) -> list[dict[int, bool]]:
    """Each run's claims, by repetition count (Holm over the counts at CURVE_LEVEL)."""
    rng = np.random.default_rng(seed)
    return [{count: memorised for count, (_, memorised) in
             memorised_counts(tier_p_values(*simulated_canaries(scenario, rng))).items()} for _ in range(runs)]


def curve_rates(scenario: CurveScenario, runs: int, seed: int = 0) -> list[Rate]:
    """Under the null: a claim at any count (stated: at most CURVE_LEVEL). Otherwise: the smallest count claimed being
    the smallest learned one (power), and a claim at an unlearned count (family-wise, at most CURVE_LEVEL)."""
    made = claims(scenario, runs, seed)
    learned = sorted(count for count, shift in scenario.shifts.items() if shift)
    if not learned:
        return [Rate("memorisation curve: a claim at any count", scenario.name, "null", sum(any(c.values()) for c in made),
                     runs, CURVE_LEVEL)]
    smallest = [min((count for count, memorised in c.items() if memorised), default=None) for c in made]
    unlearned = [count for count in scenario.shifts if count not in learned]
    return [Rate(f"memorisation curve: smallest count claimed = {learned[0]}", scenario.name, scenario.truth,
                 sum(value == learned[0] for value in smallest), runs),
            Rate("memorisation curve: a claim at an unlearned count", scenario.name, scenario.truth,
                 sum(any(c[count] for count in unlearned) for c in made), runs, CURVE_LEVEL)]
