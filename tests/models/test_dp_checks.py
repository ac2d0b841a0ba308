"""The DP-SGD implementation checks against samples drawn here with known answers, and the canaries' score against its
hand-computed log-likelihood ratio."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lmaudit.models.dp_checks import CanaryObservations, ClippingRecord, clipping_check, noise_check, poisson_check


def test_poisson_batch_sizes_pass_and_fixed_or_misdrawn_ones_fail():
    rng = np.random.default_rng(0)
    passes = [poisson_check(rng.binomial(600, 0.05, size=300), 600, 0.05).passed for _ in range(50)]
    assert sum(passes) >= 49  # a correct sampler raises an alarm about once in 10^4 checks
    fixed = poisson_check(np.full(300, 30), 600, 0.05)
    assert not fixed.passed and "vary less than Poisson" in fixed.detail
    assert not poisson_check(rng.binomial(600, 0.1, size=300), 600, 0.05).passed  # drawn at twice the rate
    assert not poisson_check(rng.poisson(30, size=300) * 2, 600, 0.05).passed  # over-dispersed, mean 60
    assert poisson_check(np.full(20, 600), 600, 1.0).passed  # full batches: every sample in every step
    assert not poisson_check(np.array([600, 599]), 600, 1.0).passed


def test_noise_of_the_stated_scale_passes_and_a_tenth_fails():
    rng = np.random.default_rng(1)
    stated = rng.normal(0, 1.3, size=100_000)
    assert noise_check(float(np.square(stated).sum()), len(stated), 1.3).passed
    check = noise_check(float(np.square(stated / 10).sum()), len(stated), 1.3)
    assert not check.passed and "not the noise accounted" in check.detail
    assert noise_check(0.0, 1000, 0.0).passed


def test_clipping_agrees_or_says_by_how_much_it_does_not():
    record = ClippingRecord()
    record.add(2.0, 2.0 + 1e-6, 3.0, 5)
    assert clipping_check(record, 1.0).passed
    record.add(2.0, 7.0, 3.0, 5)
    check = clipping_check(record, 1.0)
    assert not check.passed and "not clipped at the stated norm" in check.detail
    idle = ClippingRecord()
    idle.add(1.0, 1.0, 1.0, 0)
    assert clipping_check(idle, 1.0).passed and "could not test it" in clipping_check(idle, 1.0).detail


def test_the_score_is_the_log_likelihood_ratio_of_in_against_out():
    observed = CanaryObservations(np.array([True, False]), sample_rate=0.1, noise_multiplier=2.0)
    observed.add_step(np.array([1.5, -0.5]))
    q, sigma = 0.1, 2.0

    def ratio(x: float) -> float:  # density of q N(1, s^2) + (1 - q) N(0, s^2) over that of N(0, s^2)
        return math.log(q * math.exp(-(x - 1) ** 2 / (2 * sigma ** 2)) / math.exp(-x ** 2 / (2 * sigma ** 2)) + 1 - q)

    assert observed.scores == pytest.approx([ratio(1.5), ratio(-0.5)])
    assert observed.noise_squares == pytest.approx(0.25) and observed.noise_count == 1  # the out canary only
