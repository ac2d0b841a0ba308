"""Checks of a DP-SGD run against what its accounting assumes, from what the gradient canaries' hooks recorded
(`models/gradient_canaries.py`); no torch. Each check says in plain words what failed (the bounds and the verdict are
`metrics/dp_audit.py`'s).

- Poisson sampling at rate q: the batch sizes, empty draws included (each is a step), against Binomial(n, q): their
  total and their dispersion, by exact tests (a fixed batch size, or a sampler that draws at another rate, fails; Opacus
  issue 813's WeightedRandomSampler drew ~780x too often);
- per-sample clipping at the stated norm: the clipped sum, projected on a random direction, against the same sum
  computed from the per-sample gradients and the stated norm;
- noise of the stated scale: the standard deviation of the "out" canaries' observations, which are pure noise in units
  of the clipping norm, against the noise multiplier;
- weights updated: every trained tensor of the model (LoRA's adapters under LoRA) moved from its start, so the model
  saved is the one DP-SGD trained (Opacus users have lost LoRA updates after a device move).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binom

ALARM = 1e-4  # a correct run fails a statistical check this rarely
DISPERSION_UNIT = 1 / 16  # of the batch sizes' variance: the dispersion's rounding, far below its spread (no power lost)
TAIL = 1e-20  # a batch size this improbable is left out of the dispersion's null: it moves a tail by T x 1e-20 at most
CLIPPING_TOLERANCE = 1e-3  # relative: float32 sums of the same terms in another order differ far less
NOISE_TOLERANCE = 0.05  # relative, at least: a stated scale 5% off is a misstatement worth a line
OBSERVATIONS = "gradient_canary_observations"  # their key in a DP-SGD run's record (`models/dp.py:dp_record`)


@dataclass
class ClippingRecord:
    """Sums over the steps: the clipped sum on a random direction computed here (expected) and by the optimizer
    (actual), the scale of the terms, and the per-sample gradients above the clipping norm."""

    expected: float = 0.0
    actual: float = 0.0
    scale: float = 0.0
    above_norm: int = 0
    worst: float = 0.0

    def add(self, expected: float, actual: float, scale: float, above_norm: int, rounding: float = 0.0) -> None:
        """One step's projections (the same direction for both), the count of per-sample gradients clipped, and how far
        the optimizer's float sum may stray by rounding alone (not counted against it: a one-sample batch nearly
        orthogonal to the direction has a scale below its rounding)."""
        self.expected += expected
        self.actual += actual
        self.scale += scale
        self.above_norm += above_norm
        self.worst = max(self.worst, max(0.0, abs(expected - actual) - rounding) / (scale + 1e-12))


@dataclass
class CanaryObservations:
    """What the gradient canaries' hooks recorded over a run: each canary's key and score (log-likelihood ratio of its
    observations, higher = guessed in), the batch sizes, the out-canaries' observations' sum of squares and count
    (units of the clipping norm), and the clipping record."""

    included: np.ndarray
    sample_rate: float
    noise_multiplier: float
    scores: np.ndarray = field(init=False)
    batch_sizes: list[int] = field(default_factory=list)
    noise_squares: float = 0.0
    noise_count: int = 0
    clipping: ClippingRecord = field(default_factory=ClippingRecord)

    def __post_init__(self) -> None:
        self.scores = np.zeros(len(self.included))

    def add_step(self, observations: np.ndarray) -> None:
        """One step's observations at the canaries' coordinates (units of the clipping norm): the score adds the
        log-likelihood ratio of 'in' (present with probability q) against 'out' at the stated noise (the sum of the
        observations where there is no noise, or full batches, q = 1: there the ratio is increasing and affine in it)."""
        sigma, q = self.noise_multiplier, self.sample_rate
        if sigma > 0 and q < 1:
            self.scores += np.logaddexp(np.log1p(-q), np.log(q) + (2 * observations - 1) / (2 * sigma ** 2))
        else:
            self.scores += observations
        out = observations[~self.included]
        self.noise_squares += float(np.square(out).sum())
        self.noise_count += len(out)

    def record(self, n_samples: int, max_grad_norm: float, unmoved: list[str], trained: int) -> dict:
        """What the training summary keeps: each canary's score and key (synthetic coordinates: no secret) and the
        implementation checks (`unmoved`: the names of the model's `trained` tensors that never moved), from which
        `metrics/dp_audit.py` makes the verdict."""
        checks = [poisson_check(np.asarray(self.batch_sizes), n_samples, self.sample_rate),
                  clipping_check(self.clipping, max_grad_norm),
                  noise_check(self.noise_squares, self.noise_count, self.noise_multiplier),
                  weights_check(unmoved, trained)]
        return {"scores": self.scores.tolist(), "included": self.included.tolist(),
                "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in checks]}


@dataclass(frozen=True)
class Check:
    """One implementation check: its name, whether it held, and what was measured, in words."""

    name: str
    passed: bool
    detail: str


def poisson_check(batch_sizes: np.ndarray, n_samples: int, sample_rate: float) -> Check:
    """Batch sizes, empty ones included, against Binomial(n, q), by two exact tests that share ALARM: their total and
    their dispersion (`sampling_tails`), each two-sided at ALARM/4 a tail, so a correct run fails at most ALARM of the
    time (the four tails' sum; exact tests of discrete statistics hold their level or less)."""
    sizes = np.asarray(batch_sizes, dtype=np.int64)
    mean, variance = n_samples * sample_rate, n_samples * sample_rate * (1 - sample_rate)
    if variance == 0:  # q = 1 (full batches) or 0: every batch is exactly n q
        held = bool(np.all(sizes == mean))
        return Check("poisson sampling", held, f"{len(sizes)} batches, {'all' if held else 'not all'} of the {mean:.0f} "
                                               f"samples that rate {sample_rate:g} draws")
    total_below, total_above, spread_below, spread_above = sampling_tails(sizes, n_samples, sample_rate)
    detail = (f"{len(sizes)} batches ({int(np.sum(sizes == 0))} empty) of mean size {sizes.mean():.1f} (Poisson: "
              f"{mean:.1f}) and variance {sizes.var():.1f} (Poisson: {variance:.1f})")
    if min(total_below, total_above) < ALARM / 4:
        return Check("poisson sampling", False, f"{detail}: batches are drawn at another rate than the accounted "
                                                f"q = {sample_rate:.4g}, so the accountant's epsilon is wrong")
    if min(spread_below, spread_above) < ALARM / 4:
        return Check("poisson sampling", False, f"{detail}: batch sizes vary {'less' if spread_below < spread_above else 'more'} "
                                                "than Poisson sampling's, which the accountant assumes")
    return Check("poisson sampling", True, detail)


def sampling_tails(sizes: np.ndarray, n_samples: int, sample_rate: float) -> np.ndarray:
    """Under Poisson sampling (T Binomial(n, q) batch sizes, the last axis of `sizes`; 0 < q < 1), the probabilities of
    a total at most and at least the observed one (Binomial(n T, q)), and of a dispersion at most and at least the
    observed one, exactly: shape (4, *runs).

    The dispersion is the sum over steps of (X_t - n q)^2, each term rounded to DISPERSION_UNIT of the variance n q (1 -
    q) (`_dispersion_terms`). The chi-square of one degree per step is not its null: each term's variance is the
    kurtosis less 1, 2 + (1 - 6 q (1 - q)) / (n q (1 - q)), not 2, and its upper tail is heavier than any chi-square's
    at small n q (one scaled to the mean and variance false-alarms 8.6x its level 2.5e-5 over 50 steps of expected
    batch 1). The exact null is cheap: the T-fold convolution of one step's distribution (milliseconds)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    steps = sizes.shape[-1]
    start, pmf = _sum_distribution(*_step_dispersion(n_samples, sample_rate), steps)
    at_most = np.concatenate([[0.0], np.cumsum(pmf)])  # [i]: below start + i
    at_least = np.concatenate([np.cumsum(pmf[::-1])[::-1], [0.0]])  # [i]: start + i or more
    index = _dispersion_terms(sizes, n_samples, sample_rate).sum(-1) - start
    totals = sizes.sum(-1)
    return np.stack([binom.cdf(totals, n_samples * steps, sample_rate), binom.sf(totals - 1, n_samples * steps, sample_rate),
                     at_most[np.clip(index + 1, 0, len(pmf))], at_least[np.clip(index, 0, len(pmf))]])


def _dispersion_terms(sizes: np.ndarray, n_samples: int, sample_rate: float) -> np.ndarray:
    """Each batch size's term of the dispersion: (X - n q)^2 in DISPERSION_UNIT's of the variance n q (1 - q), or of one
    squared sample where that variance is below 1 (finer units would widen the null's window as 1 / variance), rounded
    to an integer."""
    unit = max(n_samples * sample_rate * (1 - sample_rate), 1.0) * DISPERSION_UNIT
    return np.rint(np.square(sizes - n_samples * sample_rate) / unit).astype(np.int64)


def _step_dispersion(n_samples: int, sample_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """One Binomial(n, q) batch size's dispersion term: its values and their probabilities, where above TAIL."""
    mean, deviation = n_samples * sample_rate, math.sqrt(n_samples * sample_rate * (1 - sample_rate))
    reach = 40 * deviation + 40  # Bernstein: a batch size beyond this reach of n q has probability below 1e-26
    sizes = np.arange(max(0, math.floor(mean - reach)), min(n_samples, math.ceil(mean + reach)) + 1)
    probabilities = binom.pmf(sizes, n_samples, sample_rate)
    kept = probabilities > TAIL
    return _dispersion_terms(sizes[kept], n_samples, sample_rate), probabilities[kept]


def _sum_distribution(values: np.ndarray, probabilities: np.ndarray, steps: int) -> tuple[int, np.ndarray]:
    """The distribution of the sum of `steps` independent draws of the integer `values` at these probabilities: the
    first integer of its window and the probabilities from there (FFT, cyclic over a window that holds all but a
    negligible mass: 40 standard deviations and the largest step's range either side of the mean)."""
    mean = steps * float(values @ probabilities)
    spread = math.sqrt(steps * float(np.square(values - values @ probabilities) @ probabilities))
    size = 1 << math.ceil(math.log2(2 * (40 * spread + values.max() - values.min()) + 2))
    start = math.floor(mean) - size // 2
    step = np.zeros(size)
    np.add.at(step, values % size, probabilities)
    total = np.fft.irfft(np.fft.rfft(step) ** steps, size)
    return start, np.roll(total, -(start % size))


def clipping_check(record: ClippingRecord, max_grad_norm: float) -> Check:
    """The optimizer's clipped sums against those computed here at the stated norm."""
    detail = f"{record.above_norm} per-sample gradients were above the norm {max_grad_norm:g}"
    if record.worst > CLIPPING_TOLERANCE:
        return Check("per-sample clipping", False, f"{detail}, and the clipped sum differs from one clipped at "
                                                   f"{max_grad_norm:g} by {record.worst:.1%} of its scale: the "
                                                   "gradients are not clipped at the stated norm")
    if record.above_norm == 0:
        return Check("per-sample clipping", True, f"{detail}: clipping never acted, so this run could not test it")
    return Check("per-sample clipping", True, f"{detail}; every clipped sum agrees with one clipped at {max_grad_norm:g}")


def noise_check(noise_squares: float, noise_count: int, noise_multiplier: float) -> Check:
    """The out-canaries' observed noise (units of the clipping norm) against the noise multiplier."""
    observed = math.sqrt(noise_squares / noise_count) if noise_count else float("nan")
    tolerance = max(NOISE_TOLERANCE, 5 / math.sqrt(2 * max(noise_count, 1)))
    detail = f"noise of standard deviation {observed:.4g} x the clipping norm observed (stated: {noise_multiplier:g})"
    if noise_multiplier == 0:
        return Check("noise scale", observed < 1e-3, detail)
    if abs(observed / noise_multiplier - 1) > tolerance:
        return Check("noise scale", False, f"{detail}: the noise added is not the noise accounted")
    return Check("noise scale", True, detail)


def weights_check(unmoved: list[str], trained: int) -> Check:
    """The model's trained tensors against their start: DP-SGD's noise reaches every one, so a tensor that never moved
    lost its updates (Opacus's LoRA adapters after a device move), and the model saved is not the one accounted."""
    if not unmoved:
        return Check("weights updated", True, f"all {trained} trained tensors of the model moved from their start")
    return Check("weights updated", False, f"{len(unmoved)} of {trained} trained tensors never moved from their start "
                                           f"(first: {unmoved[0]}): their updates were lost, so the model saved is not "
                                           "the one DP-SGD trained")
