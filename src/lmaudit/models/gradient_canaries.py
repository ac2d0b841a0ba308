"""A white-box audit of DP-SGD itself: Dirac gradient canaries planted in the clipped-gradient sum (Steinke, Nasr and
Jagielski 2023; Nasr et al. 2023), observed in every noisy update, plus checks of what the accounting assumes.

Each of m canaries owns one coordinate of the model's trainable parameters and is "in" with probability 1/2 (a seeded
key). At every step, an "in" canary joins the batch with the batch's own Poisson rate q and then adds exactly the
clipping norm C to its coordinate of the sum of clipped per-sample gradients, before Opacus adds the noise N(0,
sigma^2 C^2): the most a single sample may move the sum. The auditor sees every noisy sum; like the adversary of the DP
definition, it knows the rest of the batch's clipped sum, so its observation at a canary's coordinate is x_t = (noisy
sum - clipped sum of the real samples) / C, which is the canary's 1 (when sampled) plus Gaussian noise of standard
deviation sigma. A canary's score is the log-likelihood ratio of its observations, sum_t log(1 - q + q exp((2 x_t - 1) /
(2 sigma^2))) at the stated q and sigma (the most powerful test of "in" against "out" for a correct implementation, and
increasing in each x_t whatever the implementation does); with sigma 0, the sum of the x_t. An empty Poisson draw's step
is observed as any other: its clipped sum is zero, the canaries join it at rate q, and its batch size 0 is recorded.

The same hooks check the implementation: the batch sizes against Poisson sampling at rate q, the clipped sum against
one computed here from the per-sample gradients (on a random direction), and the noise's scale from the "out"
canaries' observations, which are pure noise; and the model's trained tensors are compared with their start. `models/dp_checks.py` judges them, `metrics/dp_audit.py` gives the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from lmaudit.errors import InputError
from lmaudit.models.dp_checks import CanaryObservations

ROUNDING_SIGMAS = 6.0  # a correct float32 sum strays beyond this allowance with probability 2e-9 a step


@dataclass
class GradientCanaries:
    """The canaries of one DP-SGD run: each one's coordinate (parameter index, flat index), the generator of the
    canaries' sampling and the clipping probe's directions, and what the hooks observed (with the key)."""

    parameters: np.ndarray
    offsets: np.ndarray
    generator: torch.Generator
    observed: CanaryObservations
    start: dict[str, tuple[float, float]] = field(default_factory=dict)

    def unmoved(self, model: torch.nn.Module) -> list[str]:
        """The names of the model's trained tensors that are where they started (`start`, taken by `remember_start`)."""
        now = weight_fingerprints(model)
        return [name for name, fingerprint in self.start.items() if now.get(name, fingerprint) == fingerprint]


def weight_fingerprints(model: torch.nn.Module) -> dict[str, tuple[float, float]]:
    """Each trained tensor's sum and sum of squares (float64): a tensor that moves changes them (a change that keeps
    both is of measure zero), and they cost no copy of the weights."""
    with torch.no_grad():
        return {name: (float(p.double().sum()), float(p.double().square().sum()))
                for name, p in model.named_parameters() if p.requires_grad}


def plant_gradient_canaries(optimizer, count: int, sample_rate: float, noise_multiplier: float, max_grad_norm: float,
                            seed: int) -> GradientCanaries:
    """Choose `count` distinct coordinates of the optimizer's parameters (seeded; each parameter in proportion to its
    size), flip each canary's coin, and wrap the optimizer's clipping and noise steps to plant and observe them. The
    rate, noise multiplier and clipping norm are those stated (recorded and accounted), never read from the optimizer:
    what it really does is what is audited."""
    sizes = np.array([p.numel() for p in optimizer.params])
    if count > sizes.sum():
        raise InputError(f"{count} gradient canaries (--gradient-canaries): the model has only {sizes.sum()} trainable "
                         "coordinates; give fewer")
    rng = np.random.default_rng([seed, 31])
    flat = np.sort(rng.choice(sizes.sum(), size=count, replace=False))
    parameters = np.searchsorted(np.cumsum(sizes), flat, side="right")
    offsets = flat - np.concatenate([[0], np.cumsum(sizes)])[parameters]
    observed = CanaryObservations(rng.random(count) < 0.5, sample_rate, noise_multiplier)
    canaries = GradientCanaries(parameters, offsets, torch.Generator().manual_seed(int(rng.integers(2 ** 62))), observed)
    _wrap(optimizer, canaries, max_grad_norm)
    return canaries


def _values(optimizer, canaries: GradientCanaries, attribute: str) -> torch.Tensor:
    """Each canary's coordinate of `attribute` (summed_grad or grad) of its parameter, float64."""
    values = torch.empty(len(canaries.offsets), dtype=torch.float64)
    for index, parameter in enumerate(optimizer.params):
        mine = np.flatnonzero(canaries.parameters == index)
        if len(mine):
            tensor = getattr(parameter, attribute).reshape(-1)
            values[mine] = tensor[torch.as_tensor(canaries.offsets[mine], device=tensor.device)].double().cpu()
    return values


def summing_error(samples: list[torch.Tensor], factors: torch.Tensor) -> float:
    """How far the optimizer's sum of the batch's clipped gradients may stray from the exact sum by rounding, on a
    random Gaussian direction: ROUNDING_SIGMAS standard deviations of it (`ClippingRecord.add`'s allowance)."""
    if not samples or not len(samples[0]):
        return 0.0
    # Each coordinate of a sum of B products errs by at most (B + 1) eps times the sum of the products' magnitudes;
    # on a Gaussian direction drawn apart from it, the error is Gaussian with that vector's norm at most.
    bound = (len(samples[0]) + 1) * torch.finfo(samples[0].dtype).eps
    magnitudes = sum(float(torch.einsum("i,i...->...", factors.to(g.dtype), g.abs()).double().square().sum())
                     for g in samples)
    return ROUNDING_SIGMAS * bound * math.sqrt(magnitudes)


def _wrap(optimizer, canaries: GradientCanaries, max_grad_norm: float) -> None:
    clip_and_accumulate, add_noise = optimizer.clip_and_accumulate, optimizer.add_noise
    probe: dict[str, torch.Tensor] = {}

    def clip_and_accumulate_checked() -> None:
        samples = optimizer.grad_samples
        canaries.observed.batch_sizes.append(len(samples[0]))
        # Drawn on the CPU (the generator's device, so a run's directions do not depend on where it trains), then moved.
        directions = [torch.randn(p.shape, generator=canaries.generator).to(p.device) for p in optimizer.params]
        # Every dimension named: an empty Poisson draw's step has no per-sample gradient, and no -1 fits 0 rows.
        norms = torch.stack([g.reshape(len(g), math.prod(g.shape[1:])).norm(dim=1) for g in samples], dim=1).norm(dim=1)
        factors = (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)  # as Opacus computes them, at the stated norm
        # Both sides' products on the direction in float64, so that only the optimizer's own sum is rounded.
        projections = sum(torch.einsum("i...,...->i", g.double(), d.double())
                          for g, d in zip(samples, directions, strict=True))
        clip_and_accumulate()
        clipped = sum((p.summed_grad.double() * d.double()).sum() for p, d in zip(optimizer.params, directions, strict=True))
        canaries.observed.clipping.add(float((factors * projections).sum()), float(clipped),
                                       float((factors * projections).abs().sum()), int((norms > max_grad_norm).sum()),
                                       summing_error(samples, factors))
        probe["real"] = _values(optimizer, canaries, "summed_grad")

    def add_noise_with_canaries() -> None:
        included = canaries.observed.included
        # Each 'in' canary joins this step's batch as a sample would: with the Poisson rate q.
        planted = included & (torch.rand(len(included), generator=canaries.generator).numpy()
                              < canaries.observed.sample_rate)
        bump = max_grad_norm
        for index, parameter in enumerate(optimizer.params):
            mine = np.flatnonzero((canaries.parameters == index) & planted)
            if len(mine):
                parameter.summed_grad.view(-1)[torch.as_tensor(canaries.offsets[mine], device=parameter.device)] += bump
        add_noise()
        observed = (_values(optimizer, canaries, "grad") - probe.pop("real")) / bump
        canaries.observed.add_step(observed.numpy())

    optimizer.clip_and_accumulate, optimizer.add_noise = clip_and_accumulate_checked, add_noise_with_canaries
