"""Checks of a user's own Opacus DP-SGD loop for the failures that are silent there (wave4-methods.md section 4): an
accounted sampling rate that is not the batches' (a replaced sampler, Opacus #813), a divisor that neighbouring
datasets do not share (#819), an epsilon that is negative or not a number (#844), an optimizer holding other tensors
than the model's trainable ones, and trainable weights that never move (LoRA under DP, #820). Each is a `Finding`."""

from __future__ import annotations

import math

import torch

from lmaudit.training.preflight import Finding

RATE_TOLERANCE = 0.01  # relative, for float rounding


def sampling_rate_mismatch(history: list[tuple[float, float, int]], batch_size: int, dataset_size: int) -> Finding | None:
    """The accountant's sampling rate of every phase (Opacus `accountant.history`: noise, q, steps) is the batches'
    B/N, as a plain loader gives it (1/ceil(N/B), between B/(N+B) and B/N): a replaced sampler makes Opacus sample and
    account 1/len(loader) instead, batches of another size than meant, and drop the sampler's weights (Opacus #813)."""
    expected, lowest = batch_size / dataset_size, batch_size / (dataset_size + batch_size)
    wrong = [q for _, q, _ in history
             if q < lowest * (1 - RATE_TOLERANCE) or q > expected * (1 + RATE_TOLERANCE)]
    if not wrong:
        return None
    return Finding("sampling rate", True, f"the accountant's sampling rate is {wrong[0]:.3g} but batches of "
                   f"{batch_size} from {dataset_size} samples give {expected:.3g} ({wrong[0] / expected:.3g}x): a "
                   "replaced sampler (WeightedRandomSampler, a custom batch sampler) makes Opacus draw and account "
                   "batches of about q x N instead and drop the sampler's weights, so the epsilon is not that of the run "
                   "you meant; use a plain DataLoader over the training set")


def unshared_divisor(history: list[tuple[float, float, int]], dataset_size: int) -> Finding | None:
    """Opacus up to 1.6 divides each step's sum by floor(N q) but accounts plain Poisson sampling; where frac(N q) < q,
    a dataset with one sample fewer gets another divisor, which the accounting does not cover."""
    # Opacus's own float product, int(N q): frac(N q) < q in floats misjudges N q = k + q (rounded below q: 610 / 21).
    rates = [q for _, q, _ in history if int(dataset_size * q) != int((dataset_size - 1) * q)]
    if not rates:
        return None
    return Finding("divisor", False, f"{dataset_size} samples at sampling rate {rates[0]:.3g}: the expected batch size "
                   "Opacus divides by changes with one sample fewer, which the accountant does not account for "
                   "(Opacus #819); divide by a fixed public constant, or treat the epsilon as approximate")


def invalid_epsilon(epsilon: float) -> Finding | None:
    """The accountant's epsilon is a finite number, at least 0 (RDP and PRV can return negative ones, Opacus #844)."""
    if math.isfinite(epsilon) and epsilon >= 0:
        return None
    return Finding("epsilon", True, f"the accountant returned epsilon {epsilon!r}: not a valid privacy loss; recompute "
                   "it from the noise, sampling rate and steps with another accountant before reporting it")


def stale_optimizer(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> Finding | None:
    """The optimizer steps exactly the model's trainable tensors (an adapter added, or the model moved, after the
    optimizer or Opacus took its parameters leaves them stepping stale copies)."""
    stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    if trainable <= stepped:
        return None
    return Finding("optimizer parameters", True, f"{len(trainable - stepped)} trainable tensors of the model are not "
                   "among the optimizer's: they never train (Opacus #820: get_peft_model or .to(device) after "
                   "make_private); build the model completely, move it, then make it private")


def frozen_weights(before: dict[str, torch.Tensor], model: torch.nn.Module) -> Finding | None:
    """Every trainable tensor moved since `before` (its values by name, taken before the first step)."""
    still = [name for name, parameter in model.named_parameters()
             if parameter.requires_grad and name in before and torch.equal(before[name], parameter.detach().cpu())]
    if not still:
        return None
    return Finding("weights updated", True, f"{len(still)} trainable tensors never changed (first: {still[0]}): the "
                   "loss falls and epsilon accrues, but these weights do not train (Opacus #820); rebuild the private "
                   "model after the adapters and the device move")


def trainable_values(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trainable tensors' values by name, on the CPU: what `frozen_weights` compares after training."""
    return {name: p.detach().cpu().clone() for name, p in model.named_parameters() if p.requires_grad}


def opacus_findings(privacy_engine, optimizer: torch.optim.Optimizer, model: torch.nn.Module, batch_size: int | None,
                    dataset_size: int, delta: float) -> list[Finding]:
    """Every check above that reads a user's Opacus run: its privacy engine (accountant), optimizer and model, the
    batch size (None: unknown, the sampling rate is not checked) and training set size the user meant, and the delta
    of the epsilon reported (not checked before the first step: Opacus's PRV accountant fails on no step)."""
    history = privacy_engine.accountant.history
    found = [sampling_rate_mismatch(history, batch_size, dataset_size) if batch_size is not None else None,
             unshared_divisor(history, dataset_size),
             invalid_epsilon(privacy_engine.get_epsilon(delta)) if history else None, stale_optimizer(optimizer, model)]
    return [finding for finding in found if finding is not None]
