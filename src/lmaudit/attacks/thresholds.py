"""Decision thresholds in membership-score units; a sample is called a member when score >= threshold."""

from __future__ import annotations

import math

import numpy as np


def population_threshold(population_scores: np.ndarray, alpha: float) -> float:
    """Smallest population score t with at most floor(alpha * n) population scores >= t; +inf if none.

    Only population data (the null distribution) is read, so the attack's false-positive
    rate on data like it is at most alpha; ties never push it above alpha.
    """
    return sorted_population_threshold(np.sort(np.asarray(population_scores, dtype=float)), alpha)


def sorted_population_threshold(ascending: np.ndarray, alpha: float) -> float:
    """`population_threshold` of scores already sorted in ascending order (no sort: the permutation test calls it a
    thousand times per threshold)."""
    allowed = math.floor(alpha * len(ascending) + 1e-9)
    if allowed == 0:
        return math.inf
    candidate = len(ascending) - allowed  # the allowed-th largest score
    if candidate == 0 or ascending[candidate - 1] < ascending[candidate]:
        return float(ascending[candidate])
    # The candidate's value also sits below it, so more than `allowed` scores are >= it: the next larger value is t.
    above = int(np.searchsorted(ascending, ascending[candidate], side="right"))
    return float(ascending[above]) if above < len(ascending) else math.inf


def mean_member_loss_threshold(calibration_member_losses: np.ndarray) -> float:
    """Yeom / Jagannatha mu threshold: call a member when loss <= mean known-member loss (as -mu)."""
    return -float(np.mean(np.asarray(calibration_member_losses, dtype=float)))
