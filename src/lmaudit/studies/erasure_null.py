"""The null laboratory of the erasure audit: simulated forget and holdout subjects where the truth is known, run
through metrics/erasure.py many times. Nothing of the forget subjects remains in the after model (their scores drawn
as the holdout's: a retrained model) or some does (shifted up: no unlearning; shifted down: over-unlearning), with the
dependence real audits have: several notes per subject sharing a subject effect, ragged note counts, tied scores, few
holdout subjects, several probes that share most of their signal. No torch."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import norm

from lmaudit.metrics.erasure import (
    STILL_DETECTABLE,
    UNLEARNING_DETECTABLE,
    equivalence,
    erasure_findings,
    separation,
)
from lmaudit.studies.null_lab import Rate

DETECTIONS = (STILL_DETECTABLE, UNLEARNING_DETECTABLE)


@dataclass(frozen=True)
class ErasureScenario:
    """One simulated erasure audit's design: forget and holdout subjects, a forget subject's notes (a holdout subject's
    drawn from 1 to twice as many), the subject effect's share of a score's variance (`icc`), the after model's shift
    of the forget notes (`shift`, standard deviations; 0 = nothing remains) and the before model's, the probes beside
    the after model (each the after model's scores plus independent noise of `probe_noise` standard deviations), and
    scores rounded to tenths (ties) unless not `rounded`."""

    name: str
    forget: int
    holdout: int
    notes: int
    icc: float = 0.3
    shift: float = 0.0
    before_shift: float = 1.5
    probes: int = 0
    probe_noise: float = 0.3
    rounded: bool = True

    def with_shift(self, shift: float) -> ErasureScenario:
        """The same design with the after model's forget notes shifted by `shift` standard deviations."""
        return replace(self, shift=shift)

    @property
    def truth(self) -> str:
        return "null" if self.shift == 0 else f"forget notes shifted {self.shift:+g} sd"


def simulated_erasure(scenario: ErasureScenario, rng: np.random.Generator) -> dict:
    """Per note: subject id, whether it is a forget note, and the before, after, probes' and a retrained model's
    scores (module docstring); the models share the subject effects, each draws its own note noise."""
    counts = np.r_[np.full(scenario.forget, scenario.notes),
                   rng.integers(1, 2 * scenario.notes + 1, size=scenario.holdout)]
    subject = np.repeat(np.arange(scenario.forget + scenario.holdout), counts)
    is_forget = subject < scenario.forget
    effect = rng.normal(0, np.sqrt(scenario.icc), len(counts))[subject]

    def model(shift: float) -> np.ndarray:
        return effect + rng.normal(0, np.sqrt(1 - scenario.icc), len(subject)) + shift * is_forget

    def rounded(scores: np.ndarray) -> np.ndarray:
        return np.round(scores, 1) if scenario.rounded else scores

    after = model(scenario.shift)
    probes = {"after": rounded(after)}
    for index in range(scenario.probes):
        probes[f"probe_{index + 1}"] = rounded(after + rng.normal(0, scenario.probe_noise, len(subject)))
    return {"groups": np.array([f"s{i}" for i in subject]), "is_forget": is_forget, "probes": probes,
            "before": rounded(model(scenario.before_shift)), "retrained": rounded(model(0.0))}


def verdict_rates(scenario: ErasureScenario, runs: int, level: float = 0.05, permutations: int = 999,
                  seed: int = 0) -> list[Rate]:
    """How often the pooled verdict, and how often one subject's verdict (of every subject's in every run: each is
    its own request, tested at `level`), reads "still detectable" or "the unlearning itself is detectable" (stated: at
    most `level` when nothing remains), over `runs` simulated audits."""
    rng = np.random.default_rng(seed)
    pooled = subjects = 0
    for _ in range(runs):
        run = simulated_erasure(scenario, rng)
        findings = erasure_findings(run["probes"], run["before"], run["groups"], run["is_forget"], level,
                                    permutations, int(rng.integers(1 << 30)))
        pooled += findings[0].finding in DETECTIONS
        subjects += sum(finding.finding in DETECTIONS for finding in findings[1:])
    rule = f"erasure: detected ({1 + scenario.probes} probe{'s' if scenario.probes else ''})"
    return [Rate(f"{rule}, all subjects", scenario.name, scenario.truth, pooled, runs, level),
            Rate(f"{rule}, per subject", scenario.name, scenario.truth, subjects, runs * scenario.forget, level)]


def change_rate(scenario: ErasureScenario, runs: int, level: float = 0.05, permutations: int = 999,
                seed: int = 0) -> Rate:
    """How often the change between before and after singles out the forget subjects (stated: at most `level` when
    the two models treat them as they treat holdout subjects, `before_shift` = `shift`)."""
    rng = np.random.default_rng(seed)
    fired = 0
    for _ in range(runs):
        run = simulated_erasure(scenario, rng)
        change = separation("change", run["before"] - run["probes"]["after"], run["groups"], run["is_forget"],
                            permutations, int(rng.integers(1 << 30)), 10)
        fired += change.p_higher <= level
    truth = ("null" if scenario.before_shift == scenario.shift
             else f"before {scenario.before_shift:+g} sd, after {scenario.shift:+g} sd")
    return Rate("erasure: the change singles them out", scenario.name, truth, fired, runs, level)


def equivalence_rate(scenario: ErasureScenario, runs: int, at_margin: bool, margin: float = 0.05, level: float = 0.05,
                     seed: int = 0, retrained: bool = False) -> Rate:
    """How often the after model is called equivalent to unseen (within `margin` of AUC 1/2, or of a `retrained`
    model's AUC): `at_margin`, with its forget notes shifted so that their AUC is 1/2 + `margin` (the null's boundary;
    stated: at most `level`; scores not rounded, whose ties would pull the AUC inside the margin), else shifted as the
    scenario says (power where it is 0)."""
    rng = np.random.default_rng(seed)
    shift = float(np.sqrt(2) * norm.ppf(0.5 + margin)) if at_margin else scenario.shift
    shifted = replace(scenario, shift=shift, rounded=scenario.rounded and not at_margin)
    fired = 0
    for _ in range(runs):
        run = simulated_erasure(shifted, rng)
        fired += equivalence(run["probes"]["after"], None, run["retrained"] if retrained else None, run["groups"],
                             run["is_forget"], margin, level, 200, int(rng.integers(1 << 30))).equivalent
    against = "a retrained model's AUC" if retrained else "1/2"
    truth = f"AUC {against} + {margin:g} (the margin)" if at_margin else shifted.truth
    return Rate(f"erasure: equivalent to {against} within {margin:g}", scenario.name, truth, fired, runs,
                level if at_margin else None)


def power_rate(scenario: ErasureScenario, runs: int, level: float = 0.05, permutations: int = 999,
               seed: int = 0) -> Rate:
    """How often one subject still held reads "still detectable" (power), by the scenario's notes and shift."""
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(runs):
        run = simulated_erasure(scenario, rng)
        found += erasure_findings(run["probes"], run["before"], run["groups"], run["is_forget"], level, permutations,
                                  int(rng.integers(1 << 30)))[0].finding == STILL_DETECTABLE
    return Rate("erasure: still detectable", scenario.name, scenario.truth, found, runs)

