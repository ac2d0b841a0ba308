"""Differentially private training with Opacus: settings, per-group caps, accounting, private batches.

DP-SGD (Abadi et al.): batches drawn by Poisson sampling, each sample's gradient clipped to
`max_grad_norm`, Gaussian noise of standard deviation `noise_multiplier * max_grad_norm` added to
the sum. The epsilon spent comes from Opacus's PRV accountant; the RDP accountant's value is
recorded too. Capping each group's (patient's, user's) samples bounds what one person contributes,
as Jagannatha et al. do with 50 samples per patient.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from lmaudit.errors import InputError
from lmaudit.models.dp_checks import OBSERVATIONS
from lmaudit.models.recipe import DPSettings

if TYPE_CHECKING:
    from lmaudit.models.gradient_canaries import GradientCanaries


def cap_samples_per_group(groups: Sequence[str | None], cap: int | None, seed: int) -> np.ndarray:
    """Positions kept when each group keeps at most `cap` samples (a seeded random choice); samples
    without a group (None or NaN, as a CSV's empty cell reads) are kept, never pooled into one group."""
    positions = np.arange(len(groups))
    if cap is None:
        return positions
    rng = np.random.default_rng(seed)
    by_group: dict[str, list[int]] = {}
    for position, group in zip(positions, groups, strict=True):
        if not pd.isna(group):
            by_group.setdefault(str(group), []).append(position)
    dropped = set()
    for members in by_group.values():
        if len(members) > cap:
            dropped.update(rng.permutation(members)[cap:].tolist())
    return np.array([p for p in positions if p not in dropped], dtype=np.int64)


# Above this RDP epsilon the guarantee is void anyway, and Opacus's PRV accountant would discretise a
# privacy-loss domain of billions of points (measured: a 98 GiB array at sigma = 0.01).
PRV_LIMIT = 64.0


def privacy_spent(sample_rate: float, noise_multiplier: float, steps: int, delta: float) -> dict[str, float | None]:
    """Epsilon of `steps` Poisson-sampled Gaussian steps at `delta`: the RDP accountant's, and the (tighter)
    PRV accountant's where the RDP epsilon is at most PRV_LIMIT (else None)."""
    from opacus.accountants import PRVAccountant, RDPAccountant

    if noise_multiplier <= 0 or steps == 0:
        return {"epsilon_prv": float("inf") if steps else 0.0, "epsilon_rdp": float("inf") if steps else 0.0}
    values: dict[str, float | None] = {}
    for name, accountant in (("epsilon_rdp", RDPAccountant()), ("epsilon_prv", PRVAccountant())):
        if name == "epsilon_prv" and values["epsilon_rdp"] > PRV_LIMIT:
            values[name] = None
            continue
        accountant.history = [(noise_multiplier, sample_rate, steps)]
        with warnings.catch_warnings():  # Opacus warns when the best RDP order is at the end of its list
            warnings.simplefilter("ignore")
            values[name] = float(accountant.get_epsilon(delta))
    return {"epsilon_prv": values["epsilon_prv"], "epsilon_rdp": values["epsilon_rdp"]}


def noise_for_epsilon(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """The noise multiplier (sigma) at which `steps` Poisson-sampled steps at `sample_rate` spend `epsilon` at `delta`
    by the PRV accountant (within 0.01 of it, from below: Opacus's search)."""
    from opacus.accountants.utils import get_noise_multiplier

    with warnings.catch_warnings():  # Opacus warns when the best RDP order is at the end of its list
        warnings.simplefilter("ignore")
        return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=sample_rate,
                                          steps=steps, accountant="prv", epsilon_tolerance=0.01))


def poisson_rate(n_samples: int, batch_size: int) -> float:
    """The rate at which Opacus's Poisson loader draws each sample: 1 / ceil(n_samples / batch_size), its steps per
    epoch's inverse, which is batch_size / n_samples only where batch_size divides n_samples."""
    return 1 / math.ceil(n_samples / batch_size)


def resolve_noise(settings: DPSettings, n_samples: int, batch_size: int, epochs: int) -> DPSettings:
    """The settings with the noise multiplier that spends `target_epsilon` at `delta` over `epochs` epochs of Poisson
    batches at `poisson_rate` (ceil(n_samples / batch_size) steps each: Opacus's), where one is targeted. A run that
    stops early (a classifier's early stopping) spends less."""
    if settings.target_epsilon is None:
        return settings
    steps = epochs * math.ceil(n_samples / batch_size)
    return replace(settings, noise_multiplier=noise_for_epsilon(settings.target_epsilon, settings.delta,
                                                                poisson_rate(n_samples, batch_size), steps))


def per_sample_losses(logits: torch.Tensor, labels: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """Each sample's mean loss over its labelled positions (-100 = none), or its cross-entropy for (B, labels) logits.

    DP-SGD needs the batch loss to be a mean of per-sample losses: transformers' token-mean over the
    whole batch would make one sample's gradient depend on the other samples' lengths, and removing
    a sample would then move the others' clipped gradients too.
    """
    if logits.dim() == 2:
        return torch.nn.functional.cross_entropy(logits.float(), labels, reduction="none")
    if causal:
        logits, labels = logits[:, :-1], labels[:, 1:]
    nll = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=-100, reduction="none")
    return nll.sum(1) / (labels != -100).sum(1).clamp(min=1)


@dataclass
class PrivateTraining:
    """A model and optimizer made private, the Poisson batches of each epoch, and the accounting."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    loader: torch.utils.data.DataLoader
    engine: object
    sample_rate: float
    settings: DPSettings
    unregistered: list[tuple[torch.nn.Module, str, torch.nn.Parameter]]
    n_samples: int = 0
    canaries: GradientCanaries | None = None

    def batches(self) -> Iterator[np.ndarray]:
        """One epoch of Poisson-sampled batches (sample positions), empty draws included: each is a step
        (`empty_step`), accounted as any other, and the Poisson check tests the sizes with their zeros."""
        for (indices,) in self.loader:
            yield indices.numpy()

    def empty_step(self) -> None:
        """DP-SGD's step for an empty Poisson draw: a zero sum of clipped gradients plus the noise, scaled and applied
        as any step's, by Opacus's own path for an empty batch (DPOptimizer.clip_and_accumulate's zero clip factors)."""
        # What Opacus's GradSampleModule leaves after the backward pass of an empty batch, without the forward pass that
        # a model may refuse on no input (and whose mean loss would be NaN).
        for parameter in self.optimizer.params:
            parameter.grad_sample = parameter.new_zeros((0, *parameter.shape))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def described(self) -> str:
        """', DP-SGD noise sigma' for a training log line (the sigma found for a target epsilon says so)."""
        target = self.settings.target_epsilon
        return (f", DP-SGD noise {self.settings.noise_multiplier:.4g}"
                + (f" (for target epsilon {target:g})" if target is not None else ""))

    def spent(self, steps: int) -> dict[str, float]:
        """Epsilon after `steps` optimizer steps."""
        return privacy_spent(self.sample_rate, self.settings.noise_multiplier, steps, self.settings.delta)

    @contextmanager
    def saveable(self) -> Iterator[torch.nn.Module]:
        """The model in training, with the tensors hidden from Opacus registered again while the block runs (to save a
        checkpoint: a model after e epochs of DP-SGD is (epsilon after e epochs)-DP, a post-processing of those steps)."""
        # Some come back on their own in the forward pass (Opacus's DPLSTM re-adds its LSTM-named aliases): only those
        # absent now are hidden again after.
        absent = [(module, name) for module, name, _ in self.unregistered if name not in module._parameters]
        self._register()
        try:
            yield self.model._module
        finally:
            for module, name in absent:
                del module._parameters[name]

    def finished_model(self) -> torch.nn.Module:
        """The trained model, unwrapped, with the tensors hidden from Opacus registered again."""
        model = self.model._module
        self.model.remove_hooks()
        self._register()
        return model

    def _register(self) -> None:
        for module, name, parameter in self.unregistered:
            module.register_parameter(name, parameter)


def training_step(loss: torch.Tensor, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                  private: PrivateTraining | None) -> None:
    """Backward pass and one optimizer step: DP-SGD's (per-sample clipping and noise) when private, else
    with the gradient's global norm clipped to 1."""
    loss.backward()
    step_optimizer = private.optimizer if private else optimizer
    if private is None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    step_optimizer.step()
    step_optimizer.zero_grad(set_to_none=True)


def dp_record(private: PrivateTraining, steps: int) -> dict:
    """What a DP training run records next to the model: its settings, sampling rate, steps and epsilon."""
    from dataclasses import asdict

    record = {**asdict(private.settings), "sample_rate": private.sample_rate, "steps": steps, "poisson_sampling": True,
              **private.spent(steps)}
    if private.canaries is not None:
        model = private.model._module
        record[OBSERVATIONS] = private.canaries.observed.record(
            private.n_samples, private.settings.max_grad_norm, private.canaries.unmoved(model),
            len(private.canaries.start))
    return record


def make_private(model: torch.nn.Module, optimizer: torch.optim.Optimizer, n_samples: int, batch_size: int,
                 settings: DPSettings, seed: int) -> PrivateTraining:
    """Wrap model and optimizer for DP-SGD with Poisson batches of expected size `batch_size`.

    A container that holds a tensor also held by one of its layers (BERT's MLM head keeps the
    decoder's bias) would make Opacus treat it as a layer of its own; it is unregistered during
    training and registered again by `finished_model`.
    """
    from opacus import PrivacyEngine
    from opacus.validators import ModuleValidator

    if settings.noise_multiplier < 0 or settings.max_grad_norm <= 0:
        raise InputError("--noise-multiplier must be >= 0 and --max-grad-norm > 0")
    # Opacus's hooks fire on module outputs when no module input needs a gradient (token ids): expected, not a problem.
    warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed with respect to module outputs")
    errors = ModuleValidator.validate(model, strict=False)
    if errors:
        raise InputError(f"this model cannot be trained with DP-SGD by Opacus: {str(errors[0]).splitlines()[0]}")
    owned_by_layers = {id(p) for m in model.modules() if not list(m.children()) for p in m.parameters(recurse=False)}
    unregistered = []
    for module in model.modules():
        if list(module.children()):
            for name, parameter in list(module.named_parameters(recurse=False)):
                if id(parameter) in owned_by_layers:
                    del module._parameters[name]
                    unregistered.append((module, name, parameter))
    dataset = torch.utils.data.TensorDataset(torch.arange(n_samples))
    generator = torch.Generator().manual_seed(seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, generator=generator)
    with warnings.catch_warnings():
        # Opacus warns that secure_mode is off: the noise is seeded, so runs are reproducible (see the README).
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant="prv", secure_mode=False)
        private_model, private_optimizer, private_loader = engine.make_private(
            module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=settings.noise_multiplier,
            max_grad_norm=settings.max_grad_norm, poisson_sampling=True, noise_generator=torch.Generator().manual_seed(seed),
        )
    # The rate the loader draws at, which the accountant and the Poisson check must both be told.
    rate = private_loader.sample_rate
    canaries = None
    if settings.gradient_canaries:
        from lmaudit.models.gradient_canaries import plant_gradient_canaries, weight_fingerprints

        canaries = plant_gradient_canaries(private_optimizer, settings.gradient_canaries, rate,
                                           settings.noise_multiplier, settings.max_grad_norm, seed)
        canaries.start = weight_fingerprints(model)
    return PrivateTraining(private_model, private_optimizer, private_loader, engine, rate, settings, unregistered,
                           n_samples, canaries)
