"""Decision thresholds in membership-score units; a sample is called a member when score >= threshold."""

from __future__ import annotations

import math

import numpy as np


def population_threshold(population_scores: np.ndarray, alpha: float) -> float:
    """Smallest population score t with at most floor(alpha * n) population scores >= t; +inf if none.

    Only population data (the null distribution) is read, so the attack's false-positive
    rate on data like it is at most alpha; ties never push it above alpha.
    """
    scores = np.asarray(population_scores, dtype=float)
    allowed = math.floor(alpha * len(scores) + 1e-9)
    values, counts = np.unique(scores, return_counts=True)
    at_or_above = np.cumsum(counts[::-1])[::-1]  # number of population scores >= each value
    eligible = values[at_or_above <= allowed]
    return float(eligible[0]) if len(eligible) else math.inf


def mean_member_loss_threshold(calibration_member_losses: np.ndarray) -> float:
    """Yeom / Jagannatha mu threshold: call a member when loss <= mean known-member loss (as -mu)."""
    return -float(np.mean(np.asarray(calibration_member_losses, dtype=float)))
