"""The null laboratory of the white-box audit's bounds (`metrics/gaussian_pair.py` beside Steinke et al.'s and the
f-DP one): gradient canaries of a correct DP-SGD run simulated from their observations' exact distribution (an
included canary is sampled into each of T steps with the Poisson rate q and adds 1 to its coordinate, then noise
N(0, sigma^2); an excluded one sees the noise alone), scored by the same code the training runs
(`models/dp_checks.py:CanaryObservations`). How often each bound exceeds the run's true epsilon (the PRV accountant's,
tight for these canaries), and how often it reaches a target (power). A scope row feeds the score-based bound scores
of another shape (a single Laplace mechanism), where it does not hold."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lmaudit.metrics.fdp_one_run import gaussian_bound
from lmaudit.metrics.gaussian_pair import gaussian_pair_bound
from lmaudit.metrics.one_run import one_run_bound
from lmaudit.models.dp_checks import CanaryObservations
from lmaudit.studies.null_lab import Rate

DELTA = 1e-5
BOUND_LEVEL = 0.05  # each bound holds at 95% confidence


@dataclass(frozen=True)
class DPSGDScenario:
    """m canaries through `steps` DP-SGD steps at Poisson rate `sample_rate` (1: full batches) and noise multiplier
    `sigma`."""

    name: str
    canaries: int
    sample_rate: float
    sigma: float
    steps: int

    def true_epsilon(self) -> float:
        """The run's epsilon at DELTA by the PRV accountant (Opacus)."""
        from lmaudit.models.dp import privacy_spent

        return privacy_spent(self.sample_rate, self.sigma, self.steps, DELTA)["epsilon_prv"]


def simulated_scores(scenario: DPSGDScenario, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One run's canary scores (log-likelihood ratios over the steps) and coins."""
    included = rng.random(scenario.canaries) < 0.5
    observed = CanaryObservations(included, scenario.sample_rate, scenario.sigma)
    for _ in range(scenario.steps):
        planted = included & (rng.random(scenario.canaries) < scenario.sample_rate)
        observed.add_step(planted + scenario.sigma * rng.normal(size=scenario.canaries))
    return observed.scores, included


def bounds(scores: np.ndarray, included: np.ndarray, seed: int) -> dict[str, float]:
    """The three white-box bounds (epsilon at DELTA) of one run."""
    return {"Steinke et al.": one_run_bound(scores, included, DELTA, seed=seed).epsilon_lower_bound,
            "f-DP": gaussian_bound(scores, included, DELTA).epsilon_lower_bound,
            "Gaussian pair": gaussian_pair_bound(scores, included, DELTA).epsilon_lower_bound}


def dp_sgd_rates(scenario: DPSGDScenario, runs: int, targets: tuple[float, ...] = ()) -> list[Rate]:
    """Per bound: how often it exceeds the true epsilon (stated at most BOUND_LEVEL), and how often it reaches each of
    `targets` (power, no stated level)."""
    true = scenario.true_epsilon()
    found = [bounds(*simulated_scores(scenario, np.random.default_rng(seed)), seed) for seed in range(runs)]
    truth = f"correct DP-SGD, epsilon {true:.2f} at delta {DELTA:g}"
    rates = [Rate(f"white-box: {name} bound above the true epsilon", scenario.name, truth,
                  sum(run[name] > true + 1e-9 for run in found), runs, BOUND_LEVEL) for name in found[0]]
    rates += [Rate(f"white-box: {name} bound >= {target:g}", scenario.name, truth,
                   sum(run[name] >= target for run in found), runs) for target in targets for name in found[0]]
    return rates


def unrelated_rate(canaries: int, runs: int) -> Rate:
    """Scores unrelated to the coins (a model that learnt nothing): how often the score-based bound proves any epsilon
    above 0 (stated at most BOUND_LEVEL)."""
    proved = 0
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        proved += gaussian_pair_bound(rng.normal(size=canaries), rng.random(canaries) < 0.5, DELTA).mu_lower_bound > 0
    return Rate("white-box: Gaussian pair bound above 0", f"{canaries} canaries, scores unrelated to the coins", "null",
                proved, runs, BOUND_LEVEL)


def laplace_rate(canaries: int, epsilon: float, runs: int) -> Rate:
    """Out of scope: scores from one Laplace mechanism (pure epsilon-DP, location 1 when included, scale 1/epsilon).
    How often the score-based bound exceeds epsilon: it assumes Gaussian scores, which these are not."""
    above = 0
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        included = rng.random(canaries) < 0.5
        scores = included + rng.laplace(scale=1 / epsilon, size=canaries)
        above += gaussian_pair_bound(scores, included, DELTA).epsilon_lower_bound > epsilon
    return Rate("out of scope: Gaussian pair bound above the true epsilon",
                f"{canaries} canaries, one Laplace mechanism", f"pure epsilon {epsilon:g}", above, runs)
