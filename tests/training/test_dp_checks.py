"""The DP-SGD checks of a user's own Opacus loop: each Opacus failure reproduced on a tiny model and caught, and twenty
correct runs (other sizes, batch sizes, seeds) with no fatal finding."""

import copy
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

from lmaudit.training.dp_checks import (
    frozen_weights,
    invalid_epsilon,
    opacus_findings,
    stale_optimizer,
    trainable_values,
    unshared_divisor,
)


def private_run(size: int, batch: int, seed: int = 0, sampler=None, steps: int = 3):
    """A linear classifier made private by Opacus over `size` samples in batches of `batch` (the user's `sampler` if
    given), trained `steps` steps; (engine, optimizer, model)."""
    from opacus import PrivacyEngine

    torch.manual_seed(seed)
    data = TensorDataset(torch.randn(size, 4), torch.randint(0, 2, (size,)))
    loader = DataLoader(data, batch_size=batch, sampler=sampler)
    model = torch.nn.Linear(4, 2)
    engine = PrivacyEngine(accountant="rdp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns about its secure random generator
        private, optimizer, private_loader = engine.make_private(module=model, optimizer=torch.optim.SGD(
            model.parameters(), lr=0.1), data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0)
    for step, (inputs, labels) in enumerate(private_loader):
        if step == steps:
            break
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(private(inputs), labels).backward()
        optimizer.step()
    return engine, optimizer, private


def test_a_replaced_sampler_makes_the_accounted_rate_wrong_and_is_caught():
    """Opacus #813: a WeightedRandomSampler drawing 100 of 1,000 samples a pass makes Opacus account 1/len(loader) =
    0.5 where batches of 50 from 1,000 give 0.05."""
    engine, optimizer, model = private_run(1000, 50, sampler=WeightedRandomSampler(torch.ones(1000), num_samples=100))
    (finding,) = [f for f in opacus_findings(engine, optimizer, model, 50, 1000, 1e-5) if f.fatal]
    assert finding.check == "sampling rate" and "0.5 but batches of 50 from 1000 samples give 0.05 (10x)" in finding.message


def test_twenty_correct_runs_raise_no_fatal_finding():
    for run in range(20):
        size, batch = 200 + 37 * run, 10 + 3 * run
        engine, optimizer, model = private_run(size, batch, seed=run, steps=1)
        assert [f for f in opacus_findings(engine, optimizer, model, batch, size, 1e-5) if f.fatal] == [], (size, batch)


def test_an_optimizer_over_other_tensors_and_weights_that_never_move_are_caught():
    """Opacus #820: an adapter added after make_private (here: the model replaced by a copy) leaves the optimizer
    stepping stale tensors, and the live weights never change."""
    engine, optimizer, model = private_run(300, 30)
    live = copy.deepcopy(model)
    assert stale_optimizer(optimizer, model) is None
    assert stale_optimizer(optimizer, live).check == "optimizer parameters"
    before = trainable_values(live)
    assert frozen_weights(before, live).message.startswith("2 trainable tensors never changed")
    with torch.no_grad():
        next(live.parameters()).add_(1e-3)
    assert frozen_weights(before, live).message.startswith("1 trainable tensors never changed")


def test_the_divisor_and_the_epsilon_checks():
    """Opacus #819: 100 samples at q = 0.25 divide by floor(25) = 25, and by floor(24.75) = 24 with one sample fewer;
    #844: a negative or infinite epsilon is not a privacy loss."""
    assert unshared_divisor([(1.0, 0.25, 10)], 100).check == "divisor"
    assert unshared_divisor([(1.0, 0.05, 10)], 1010) is None  # 50.5: one sample fewer still divides by 50
    assert unshared_divisor([(1.0, 1 / 21, 10)], 610) is None  # 29 + 1/21 (below 1/21 in floats): 609 / 21 is 29 too
    assert invalid_epsilon(1.3) is None
    for bad in (-0.2, float("inf"), float("nan")):
        assert invalid_epsilon(bad).fatal

