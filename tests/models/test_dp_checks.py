"""The DP-SGD implementation checks against samples drawn here with known answers (the Poisson check's false-alarm rate
and power over simulated runs), and the canaries' score against its hand-computed log-likelihood ratio."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from lmaudit.models.dp_checks import (
    ALARM,
    DISPERSION_UNIT,
    CanaryObservations,
    ClippingRecord,
    _step_dispersion,
    _sum_distribution,
    clipping_check,
    noise_check,
    poisson_check,
    sampling_tails,
)

N_SAMPLES, RUNS = 2000, 20_000


def within_level(alarms: int, runs: int, level: float) -> bool:
    """`alarms` in `runs` is what a rate of at most `level` gives, but for a one-in-a-million excess."""
    return alarms <= binom.ppf(1 - 1e-6, runs, level)


@pytest.mark.parametrize(("batch", "steps"), [(1, 50), (1, 1000), (2, 200), (4, 500), (8, 500), (32, 500)])
def test_correct_poisson_batches_raise_alarms_no_more_often_than_stated(batch, steps):
    """20,000 runs of correct Poisson sampling (Binomial(n, q) batch sizes, empty ones kept) at expected batch 1 to 32:
    each of the four one-sided tests is valid at 1% and 0.1% (a chi-square scaled to the dispersion's mean and variance
    is not at batch 1: 2.6x at 0.1%), and the whole check alarms at most at ALARM, so in at most 12 runs; the check
    itself agrees with its tails."""
    q = batch / N_SAMPLES
    runs = np.random.default_rng(steps * 100 + batch).binomial(N_SAMPLES, q, size=(RUNS, steps))
    tails = sampling_tails(runs, N_SAMPLES, q)
    for level in (1e-2, 1e-3):
        assert all(within_level(int(alarms), RUNS, level) for alarms in (tails < level).sum(axis=1))
    alarmed = tails.min(axis=0) < ALARM / 4
    assert within_level(int(alarmed.sum()), RUNS, ALARM)
    for run in [*np.flatnonzero(alarmed), *range(20)]:
        assert poisson_check(runs[run], N_SAMPLES, q).passed == (not alarmed[run])


@pytest.mark.parametrize(("batch", "steps"), [(1, 200), (2, 200), (4, 50), (8, 50), (32, 50)])
def test_a_wrong_rate_or_a_fixed_batch_size_is_caught(batch, steps):
    """Batches drawn at twice or half the accounted rate fail in 99% of 2,000 runs, with a message saying the epsilon
    is wrong; shuffled batches of the fixed size (DataLoader's, the last one short) fail as varying less."""
    q, rng = batch / N_SAMPLES, np.random.default_rng(batch)
    for rate in (2 * q, q / 2):
        tails = sampling_tails(rng.binomial(N_SAMPLES, rate, size=(2000, steps)), N_SAMPLES, q)
        assert np.mean(tails.min(axis=0) < ALARM / 4) >= 0.99
    misdrawn = poisson_check(rng.binomial(N_SAMPLES, 2 * q, size=steps), N_SAMPLES, q)
    assert not misdrawn.passed and "another rate than the accounted" in misdrawn.detail
    epoch = np.full(-(-N_SAMPLES // batch), batch)
    epoch[-1] = N_SAMPLES - batch * (len(epoch) - 1)
    fixed = poisson_check(np.resize(epoch, steps), N_SAMPLES, q)
    assert not fixed.passed and "vary less than Poisson" in fixed.detail


def test_poisson_check_edge_cases_and_its_message():
    rng = np.random.default_rng(0)
    sizes = rng.binomial(2000, 1 / 2000, size=300)
    passed = poisson_check(sizes, 2000, 1 / 2000)
    assert passed.passed and f"300 batches ({np.sum(sizes == 0)} empty)" in passed.detail
    # the false alarm: empty draws dropped, the rest tested against Binomial(n, q)
    assert not poisson_check(sizes[sizes > 0], 2000, 1 / 2000).passed
    over = poisson_check(rng.poisson(30, size=300) * 2 - 30, 600, 0.05)  # mean 30, four times the variance
    assert not over.passed and "vary more than Poisson" in over.detail
    assert poisson_check(np.full(20, 600), 600, 1.0).passed  # full batches: every sample in every step
    assert not poisson_check(np.array([600, 599]), 600, 1.0).passed


@pytest.mark.parametrize(("n", "q", "steps"), [(2000, 1 / 2000, 50), (2000, 0.016, 2000), (40, 0.975, 100)])
def test_the_dispersion_null_has_the_binomial_mean_and_variance(n, q, steps):
    """The exact null of the dispersion sum((X_t - n q)^2) / (n q (1 - q)) holds all the mass of T steps' terms (its
    mean is T times a term's), and has the binomial's mean T and variance T (kurtosis - 1), kurtosis = 3 + (1 - 6 q (1 -
    q)) / (n q (1 - q)), to within its rounding (at most 1/32 of a term's mean)."""
    terms, probabilities = _step_dispersion(n, q)
    start, pmf = _sum_distribution(terms, probabilities, steps)
    sums = start + np.arange(len(pmf))
    assert pmf.sum() == pytest.approx(1, abs=1e-9) and pmf.min() > -1e-12
    assert float(sums @ pmf) == pytest.approx(steps * float(terms @ probabilities), rel=1e-9)
    variance = n * q * (1 - q)
    dispersions = sums * DISPERSION_UNIT * max(variance, 1) / variance  # in units of the variance
    mean = float(dispersions @ pmf)
    assert mean == pytest.approx(steps, rel=1 / 32)
    kurtosis = 3 + (1 - 6 * q * (1 - q)) / variance
    assert float(np.square(dispersions - mean) @ pmf) == pytest.approx(steps * (kurtosis - 1), rel=1 / 32)


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


def test_a_difference_within_the_rounding_allowance_is_not_held_against_the_clipping():
    within = ClippingRecord()
    within.add(0.0, 2e-7, 1e-8, 1, rounding=1e-6)  # a one-sample batch nearly orthogonal to the direction
    assert within.worst == 0.0 and clipping_check(within, 1.0).passed
    beyond = ClippingRecord()
    beyond.add(0.0, 2e-6, 1e-8, 1, rounding=1e-6)
    assert beyond.worst == pytest.approx(1e-6 / (1e-8 + 1e-12)) and not clipping_check(beyond, 1.0).passed
