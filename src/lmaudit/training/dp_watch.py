"""`watch_dp_sgd`: the white-box audit of DP-SGD (`models/gradient_canaries.py`) and the checks of `training/dp_checks.py`
in a user's own Opacus loop, in two lines:

    model, optimizer, loader = privacy_engine.make_private(module=..., optimizer=..., data_loader=..., ...)
    watch = watch_dp_sgd(privacy_engine, optimizer, model, loader, delta=1e-5, batch_size=64)
    ...  # the user's loop: optimizer.step() once per Poisson batch, empty ones included
    audit = watch.finish(model_folder)  # after saving the model there

The canaries are read at the values the run states (the loader's sampling rate, the optimizer's noise multiplier and
clipping norm, what the accountant is told), and each one adds the clipping norm to its coordinate of the clipped sum
when sampled, as one more sample would: the model trains on them. `finish` writes the run's record under "dp" in the
model folder's lmaudit_training.json, as `lmaudit train --dp --audit-dp` does, so `lmaudit canaries audit` shows the
verdict too.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from lmaudit.errors import InputError
from lmaudit.metrics.dp_audit import white_box_audit
from lmaudit.models.dp import privacy_spent
from lmaudit.models.dp_checks import OBSERVATIONS
from lmaudit.models.gradient_canaries import GradientCanaries, plant_gradient_canaries, weight_fingerprints
from lmaudit.models.recipe import DEFAULT_GRADIENT_CANARIES, DPSettings
from lmaudit.models.training_file import update_training_summary
from lmaudit.report.privacy_words import white_box_line, with_verdict
from lmaudit.training.callback import stop_on
from lmaudit.training.dp_checks import opacus_findings, stale_optimizer
from lmaudit.training.preflight import Finding

log = logging.getLogger(__name__)

HOOKS = ("clip_and_accumulate", "add_noise")  # the DPOptimizer methods the canaries wrap (Opacus >= 1.0)


def refuse_unwatchable(optimizer, loader) -> None:
    """InputError unless `optimizer` is Opacus's flat-clipping DPOptimizer with the methods the canaries wrap and
    `loader` its Poisson DPDataLoader."""
    from opacus import __version__
    from opacus.data_loader import DPDataLoader
    from opacus.optimizers import DPOptimizer
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    if not isinstance(optimizer, DPOptimizer):
        raise InputError(f"watch_dp_sgd: the optimizer is a {type(optimizer).__name__}, not Opacus's DPOptimizer, so "
                         "it adds no noise to watch; pass the optimizer that privacy_engine.make_private returned")
    if not all(callable(getattr(optimizer, hook, None)) for hook in HOOKS):
        raise InputError(f"watch_dp_sgd cannot hook this Opacus ({__version__}): its DPOptimizer lacks "
                         f"{' or '.join(HOOKS)}; install opacus>=1.4")
    if type(optimizer) is not DPOptimizer:
        # Per-layer or adaptive clipping, ghost clipping (no per-sample gradients) and DDP (noise on one rank) clip or
        # add noise otherwise than the canaries' probe computes.
        raise InputError(f"watch_dp_sgd audits flat per-sample clipping in one process, but this run's optimizer is "
                         f"{type(optimizer).__name__}; make it private with clipping='flat' and grad_sample_mode="
                         "'hooks', without DDP, to watch it")
    if not (isinstance(loader, DPDataLoader) and isinstance(loader.batch_sampler, UniformWithReplacementSampler)):
        raise InputError(f"watch_dp_sgd: the data loader is a {type(loader).__name__}, not Opacus's Poisson "
                         "DPDataLoader, but the accountant assumes Poisson sampling (make_private(poisson_sampling="
                         "False) keeps fixed batches); make it private with poisson_sampling=True and pass the loader "
                         "it returns")


def accounted_steps(history: list[tuple[float, float, int]]) -> int:
    """The steps the accountant counted (Opacus `accountant.history`: noise, q, steps)."""
    return sum(steps for _, _, steps in history)


def unwatched_steps(accounted: int, observed: int) -> Finding | None:
    """The canaries saw one clipping pass per accounted step, and at least one."""
    if accounted == observed and observed > 0:
        return None
    return Finding("steps watched", True, f"the accountant counted {accounted} steps and the gradient canaries saw "
                   f"{observed} clipping passes: steps before watch_dp_sgd, virtual steps (BatchMemoryManager) or no "
                   "DP step at all (an optimizer left with no trainable tensor, Opacus #820) escape the audit; call "
                   "watch_dp_sgd right after make_private and step once per Poisson batch")


def changed_accounting(history: list[tuple[float, float, int]], noise_multiplier: float,
                       sample_rate: float) -> Finding | None:
    """Every step was accounted at the noise multiplier and sampling rate the canaries were planted with."""
    other = [(sigma, q) for sigma, q, _ in history if (sigma, q) != (noise_multiplier, sample_rate)]
    if not other:
        return None
    return Finding("accounted noise", True, f"the accountant recorded noise {other[0][0]:g} at rate {other[0][1]:.4g} "
                   f"but the run was watched at noise {noise_multiplier:g}, rate {sample_rate:.4g}: the optimizer's "
                   "noise_multiplier or its accumulation changed after watch_dp_sgd; keep them fixed, or watch after "
                   "the last change")


def failed(findings: list[Finding]) -> list[dict]:
    """The fatal findings as failed checks of a white-box audit (`metrics/dp_audit.py`'s)."""
    return [{"name": f.check, "passed": False, "detail": f.message} for f in findings if f.fatal]


def merge_record(model_folder: Path, record: dict) -> None:
    """Write `record` under "dp" in the folder's lmaudit_training.json, keeping its other keys (created if absent)."""
    update_training_summary(model_folder, {"dp": record},
                            created={"trained_by": "a user's script, with lmaudit.training.watch_dp_sgd"})


@dataclass
class DPWatch:
    """A user's Opacus run under watch: its engine, optimizer and model, the stated values (sampling rate q, noise
    multiplier sigma, clipping norm C), the training set size N, the batch size meant (None: not given) and the
    canaries."""

    engine: object
    optimizer: torch.optim.Optimizer
    model: torch.nn.Module
    sample_rate: float
    noise_multiplier: float
    max_grad_norm: float
    dataset_size: int
    batch_size: int | None
    delta: float
    canaries: GradientCanaries

    def record(self, findings: list[Finding]) -> dict:
        """The run's "dp" record (`models/dp.py:dp_record`'s keys), the fatal findings among its checks."""
        observed = self.canaries.observed
        steps = len(observed.batch_sizes)
        settings = DPSettings(self.noise_multiplier, self.max_grad_norm, self.delta,
                              gradient_canaries=len(observed.included))
        canaries = observed.record(self.dataset_size, self.max_grad_norm, self.canaries.unmoved(self.model),
                                   len(self.canaries.start))
        canaries["checks"] += failed(findings)
        return {**asdict(settings), "sample_rate": self.sample_rate, "steps": steps, "poisson_sampling": True,
                **privacy_spent(self.sample_rate, self.noise_multiplier, steps, self.delta), OBSERVATIONS: canaries}

    def findings(self) -> list[Finding]:
        """Every check of the run that reads Opacus's state: `opacus_findings`, the steps watched, the accounting."""
        history = self.engine.accountant.history
        found = [unwatched_steps(accounted_steps(history), len(self.canaries.observed.batch_sizes)),
                 changed_accounting(history, self.noise_multiplier, self.sample_rate)]
        return [*opacus_findings(self.engine, self.optimizer, self.model, self.batch_size, self.dataset_size,
                                 self.delta), *(f for f in found if f is not None)]

    def finish(self, model_folder: str | Path) -> dict:
        """After training (and saving the model in `model_folder`): record the run under "dp" in the folder's
        lmaudit_training.json and return the white-box audit with its verdict and the findings (a fatal one fails the
        verdict, FAILED CHECK, rather than raising: the model is trained, its verdict is what is left to see)."""
        findings = self.findings()
        for finding in findings:
            if not finding.fatal:
                log.warning("DP-SGD check '%s': %s", finding.check, finding.message)
        record = self.record(findings)
        model_folder = Path(model_folder)
        model_folder.mkdir(parents=True, exist_ok=True)
        merge_record(model_folder, record)
        audit = with_verdict(white_box_audit(record))
        log.info(white_box_line(audit))
        return {"findings": [asdict(f) for f in findings], **audit}


def watch_dp_sgd(privacy_engine, optimizer, model: torch.nn.Module, loader, delta: float,
                 batch_size: int | None = None, gradient_canaries: int = DEFAULT_GRADIENT_CANARIES,
                 seed: int = 0) -> DPWatch:
    """Watch a run that `privacy_engine.make_private` returned (`optimizer`, `model`, `loader`) before its first step:
    refuse what cannot be audited, stop on an optimizer that does not step the model's tensors, and plant
    `gradient_canaries` (seeded by `seed`). `batch_size`: that of the DataLoader made private, which Opacus does not
    keep; without it a replaced sampler (Opacus #813) goes unseen. `delta`: that of the epsilon reported."""
    refuse_unwatchable(optimizer, loader)
    stop_on([stale_optimizer(optimizer, model)])
    if batch_size is None:
        log.warning("watch_dp_sgd: no batch_size given, so the sampling rate Opacus accounts (%.4g) cannot be checked "
                    "against the batches meant (a replaced sampler, Opacus #813); pass the DataLoader's batch_size",
                    loader.sample_rate)
    # Stated, as the accountant is told them: the loader's rate (1/len of the loader made private) and the optimizer's.
    rate, noise, norm = loader.sample_rate, optimizer.noise_multiplier, optimizer.max_grad_norm
    canaries = plant_gradient_canaries(optimizer, gradient_canaries, rate, noise, norm, seed)
    canaries.start = weight_fingerprints(model)
    return DPWatch(privacy_engine, optimizer, model, rate, noise, norm, len(loader.dataset), batch_size, delta, canaries)
