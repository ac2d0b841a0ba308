"""A one-run audit of DP-SGD from the gradient canaries' scores themselves, not from guesses thresholded out of them:
the canaries' two score distributions (included and excluded) read as a pair of Gaussians, after Agrawal et al.,
"Let's Ask Gauss: Improved One-Run Privacy Auditing" (arXiv:2606.12733; the construction below is written from its
stated idea, the paper's text was not at hand).

Why Gaussian: a white-box canary's score (`models/gradient_canaries.py`) is the log-likelihood ratio of its
observations summed over the T steps, and by the central limit theorem for composed privacy losses (Dong, Roth and
Su 2019, Theorem 3.5) that sum tends to N(-mu^2/2, mu^2) for an excluded canary and N(mu^2/2, mu^2) for an included
one: equal variances, means mu standard deviations apart, the pair whose privacy is exactly mu-Gaussian DP. The
audit estimates that standardised difference of means, takes its lower confidence bound from the noncentral t
distribution (exact for two Gaussian samples of equal variance), and converts it to epsilon at delta with the GDP
curve. Canaries own separate coordinates and separate noise, so their scores are independent and one run is m
samples.

Scope, measured in docs/statistics.md (white-box bounds): where the scores are exactly Gaussian (full batches, whose
log-likelihood ratio is affine in the observations) the bound exceeds the true epsilon at its stated level; with
Poisson subsampling (rates 0.01 to 0.2, 5 to 340 steps) it did at most 3% of the time. It does not hold for scores of
another shape: on a single Laplace mechanism's it exceeds the true epsilon every time, so only the white-box audit
uses it, and only Steinke et al.'s bound, which assumes nothing of the scores, decides a CONTRADICTION.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import nct

from lmaudit.metrics.fdp_one_run import gdp_epsilon

MU_CEILING = 1000.0  # the f-DP audit's largest mu (its grid's 1 / 0.001): scores that separate without noise


@dataclass(frozen=True)
class GaussianPairBound:
    """The score-based audit's result: the included and excluded canaries counted, the standardised difference of
    their mean scores (mu's estimate), its lower bound at `confidence` (0 = nothing proved) and the epsilon that
    bound implies at `delta` (nats; None at delta 0)."""

    included: int
    excluded: int
    mu_estimate: float
    mu_lower_bound: float
    epsilon_lower_bound: float | None
    delta: float
    confidence: float


def standardised_difference(scores: np.ndarray, included: np.ndarray) -> float:
    """(mean of the included canaries' scores - mean of the excluded ones') / their pooled standard deviation
    (MU_CEILING or -MU_CEILING where the pooled deviation is 0 and the means differ)."""
    inside, outside = scores[included], scores[~included]
    degrees = len(inside) + len(outside) - 2
    pooled = math.sqrt(((len(inside) - 1) * inside.var(ddof=1) + (len(outside) - 1) * outside.var(ddof=1)) / degrees)
    difference = float(inside.mean() - outside.mean())
    if pooled == 0:
        return math.copysign(MU_CEILING, difference) if difference else 0.0
    return float(np.clip(difference / pooled, -MU_CEILING, MU_CEILING))


def mu_lower_bound(estimate: float, included: int, excluded: int, confidence: float = 0.95) -> float:
    """The one-sided lower confidence bound on mu from its estimate: the mu at which the noncentral t statistic
    (df n - 2, noncentrality mu * sqrt(n1 n0 / n)) is as large as observed with probability 1 - confidence (0 when
    even mu = 0 makes it that likely)."""
    scale, degrees = math.sqrt(included * excluded / (included + excluded)), included + excluded - 2
    observed = estimate * scale
    if estimate >= MU_CEILING:
        return MU_CEILING

    def excess(mu: float) -> float:
        return float(nct.sf(observed, degrees, mu * scale)) - (1 - confidence)

    if excess(0.0) >= 0:
        return 0.0
    high = max(1.0, 2 * estimate)
    while excess(high) < 0 and high < MU_CEILING:
        high *= 2
    return float(brentq(excess, 0.0, min(high, MU_CEILING), xtol=1e-9))


def gaussian_pair_bound(scores: np.ndarray, included: np.ndarray, delta: float,
                        confidence: float = 0.95) -> GaussianPairBound:
    """The score-based one-run bound on mu and on epsilon at `delta` from the canaries' `scores` (higher = more
    likely included) and their coins `included`; nothing proved (0) with fewer than 2 canaries on either side."""
    scores, included = np.asarray(scores, dtype=float), np.asarray(included, dtype=bool)
    inside, outside = int(included.sum()), int((~included).sum())
    if min(inside, outside) < 2:
        return GaussianPairBound(inside, outside, 0.0, 0.0, 0.0 if delta > 0 else None, delta, confidence)
    estimate = standardised_difference(scores, included)
    mu = mu_lower_bound(estimate, inside, outside, confidence)
    return GaussianPairBound(inside, outside, estimate, mu, gdp_epsilon(mu, delta) if delta > 0 else None, delta,
                             confidence)
