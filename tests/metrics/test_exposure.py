"""Exposure of planted secrets (Carlini et al. 2019) against hand-computed ranks and a known loss distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from lmaudit.metrics.exposure import exposures, extrapolated_exposure, fitted_tail, sampled_exposure, sampled_rank


def test_rank_counts_the_candidates_below_the_secret():
    candidates = np.array([3.0, 1.0, 2.0, 5.0, 4.0])
    assert sampled_rank(0.5, candidates) == 1
    assert sampled_rank(2.5, candidates) == 3
    assert sampled_rank(2.0, candidates) == 2  # a tie counts in the secret's favour
    assert sampled_rank(9.0, candidates) == 6


def test_sampled_exposure_is_log2_space_over_rank():
    # 1023 candidates and the secret: a space of 1024; first place is 10 bits, last place 0.
    assert sampled_exposure(1, 1023) == pytest.approx(10.0)
    assert sampled_exposure(1024, 1023) == pytest.approx(0.0)
    assert sampled_exposure(32, 1023) == pytest.approx(5.0)


def test_extrapolation_recovers_a_normal_tail():
    losses = np.random.default_rng(0).normal(10.0, 2.0, size=20000)
    distribution = fitted_tail(losses)
    # three standard deviations below the mean: -log2 Phi(-3) = 9.47 bits, past what 20000 samples can count well
    assert extrapolated_exposure(4.0, distribution, 30.0) == pytest.approx(-math.log2(norm.cdf(-3)), abs=0.3)
    assert extrapolated_exposure(10.0, distribution, 30.0) == pytest.approx(1.0, abs=0.1)  # the median: 1 bit
    assert extrapolated_exposure(-50.0, distribution, 26.6) == 26.6  # capped at the space's size


def test_every_secret_against_the_same_candidates():
    rng = np.random.default_rng(1)
    candidates = rng.normal(20.0, 1.0, size=999)
    found = exposures(np.array([10.0, 20.0, 30.0]), candidates, space_bits=26.6)
    assert [e.rank for e in found] == [1, 1 + int(np.sum(candidates < 20.0)), 1000]
    assert found[0].sampled == pytest.approx(math.log2(1000))
    assert found[0].extrapolated > found[1].extrapolated > found[2].extrapolated >= 0
