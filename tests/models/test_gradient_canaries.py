"""The white-box audit of DP-SGD on a small network trained here with lmaudit's own DP-SGD: with no noise the
observations are exactly the canaries' counts; a correct run is consistent; a run whose noise is 10x smaller than
recorded, whose clipping is off, whose batches are not Poisson, or whose updates never reach the model saved is caught;
20 correct runs raise no alarm."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lmaudit.metrics.dp_audit import white_box_audit
from lmaudit.models.dp import dp_record, make_private, noise_for_epsilon, training_step
from lmaudit.models.recipe import DPSettings
from lmaudit.report.privacy_words import with_verdict
from tests.helpers import assert_document_round_trips

N, BATCH, DELTA = 200, 20, 1e-5


def train(epochs: int = 4, canaries: int = 1000, seed: int = 0, epsilon: float | None = 2.0, noise: float | None = None,
          sabotage: str | None = None) -> dict:
    """A 2-layer network on a separable task, DP-SGD with gradient canaries; the run's DP record."""
    torch.manual_seed(seed)
    inputs = torch.randn(N, 10)
    labels = (inputs[:, 0] > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(10, 128), torch.nn.ReLU(), torch.nn.Linear(128, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = epochs * N // BATCH
    sigma = noise if noise is not None else noise_for_epsilon(epsilon, DELTA, BATCH / N, steps)
    private = make_private(model, optimizer, N, BATCH, DPSettings(sigma, 1.0, DELTA, gradient_canaries=canaries), seed)
    head_at_start = {key: value.clone() for key, value in model[2].state_dict().items()}
    if sabotage == "noise":
        private.optimizer.noise_multiplier = sigma / 10  # adds a tenth of the noise recorded
    if sabotage == "clipping":
        private.optimizer.max_grad_norm = 1e6  # clips nothing (and scales the noise with it)
    done = 0
    for _ in range(epochs):
        batches = (np.arange(start, start + BATCH) for start in range(0, N, BATCH)) if sabotage == "fixed" \
            else private.batches()
        for indices in batches:
            loss = torch.nn.functional.cross_entropy(private.model(inputs[indices]), labels[indices])
            training_step(loss, model, private.optimizer, private)
            done += 1
    if sabotage == "lost":  # the head's updates never reach the model saved (as LoRA's after a device move)
        model[2].load_state_dict(head_at_start)
    record = dp_record(private, done)
    return {"white_box_audit": with_verdict(white_box_audit(record)), "observed": private.canaries.observed}


def test_without_noise_each_canary_observes_exactly_how_often_it_was_planted():
    record = train(epochs=2, noise=0.0)
    observed = record["observed"]
    # sigma 0: the score is the sum of the observations, the count of steps each 'in' canary joined
    assert np.allclose(observed.scores, np.round(observed.scores), atol=1e-4)
    assert np.all(observed.scores[~observed.included] == pytest.approx(0, abs=1e-4))
    planted = observed.scores[observed.included]
    steps = len(observed.batch_sizes)
    assert planted.mean() == pytest.approx(steps * BATCH / N, rel=0.1)  # Binomial(steps, q) on average
    assert {check["name"]: check["passed"] for check in record["white_box_audit"]["checks"]} == {
        "poisson sampling": True, "per-sample clipping": True, "noise scale": True, "weights updated": True}


def test_a_correct_run_is_consistent_with_a_positive_bound_below_the_accountant():
    audit = train(epsilon=4.0)["white_box_audit"]
    assert audit["verdict"].startswith("consistent") and all(check["passed"] for check in audit["checks"])
    assert 0 < audit["epsilon_lower_bound"] <= audit["accountant_epsilon"]


@pytest.mark.parametrize(("sabotage", "failed", "verdict"), [
    ("noise", "noise scale", "CONTRADICTION"),
    ("clipping", "per-sample clipping", "FAILED CHECK"),
    ("fixed", "poisson sampling", "FAILED CHECK"),
    ("lost", "weights updated", "FAILED CHECK"),
])
def test_a_broken_dp_sgd_is_caught(sabotage, failed, verdict):
    audit = train(sabotage=sabotage)["white_box_audit"]
    assert audit["verdict"].startswith(verdict)
    assert not {check["name"]: check["passed"] for check in audit["checks"]}[failed]


def test_twenty_correct_runs_at_epsilon_1_raise_no_alarm():
    sigma = noise_for_epsilon(1.0, DELTA, BATCH / N, 2 * N // BATCH)
    verdicts = [train(epochs=2, canaries=500, seed=seed, noise=sigma)["white_box_audit"]["verdict"]
                for seed in range(20)]
    assert all(verdict.startswith("consistent") for verdict in verdicts), verdicts


def test_the_command_line_audits_dp_sgd_and_refuses_the_audit_without_dp(tmp_path):
    from lmaudit.canaries.make import make_canaries
    from lmaudit.data.synth import generate_notes
    from lmaudit.models.training_file import read_training_summary
    from tests.helpers import run_cli

    generate_notes(6, seed=0).to_csv(tmp_path / "notes.csv", index=False)
    make_canaries(tmp_path / "canaries", "new_token", 20, seed=0)
    code, output = run_cli("train", "clm", "--data", tmp_path / "notes.csv", "--out", tmp_path / "model", "--epochs", "1",
                           "--dp", "--noise-multiplier", "1", "--audit-dp", "--gradient-canaries", "300",
                           "--canaries", tmp_path / "canaries")
    assert code == 0 and "white-box audit of DP-SGD (300 gradient canaries): epsilon >= " in output
    audit = with_verdict(white_box_audit(read_training_summary(tmp_path / "model").dp.model_dump()))
    assert audit["gradient_canaries"] == 300 and audit["verdict"].startswith("consistent")
    # the canary audit of that model shows the white-box audit beside its own bounds and the accountant's, with a figure
    code, output = run_cli("canaries", "audit", "--target", tmp_path / "model", "--canaries", tmp_path / "canaries",
                           "--out", tmp_path / "audit")
    assert code == 0 and "white-box audit of DP-SGD (300 gradient canaries)" in output
    report = json.loads((tmp_path / "audit" / "canary_report.json").read_text())
    assert_document_round_trips(tmp_path / "audit" / "canary_report.json")
    assert report["white_box"]["epsilon_lower_bound"] == audit["epsilon_lower_bound"] and "checks" not in report["white_box"]
    page = (tmp_path / "audit" / "canary_report.html").read_text()
    assert "White-box audit of the DP-SGD training itself" in page and page.count("data:image/png;base64,") == 1
    code, output = run_cli("train", "clm", "--data", tmp_path / "notes.csv", "--out", tmp_path / "other", "--audit-dp")
    assert code == 2 and "add --dp" in output and len(output.strip().splitlines()) == 1
