"""DP-SGD with Opacus: per-sample gradients for every parameter, the clipping bound, the accountant
against an independent RDP computation, the per-group cap, and a private training run end to end."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.special import gammaln, logsumexp

from lmaudit.models.dp import (
    cap_samples_per_group,
    make_private,
    per_sample_losses,
    privacy_spent,
)
from lmaudit.models.inputs import per_sample_position_inputs
from lmaudit.models.recipe import DPSettings, TrainingRecipe


def independent_rdp_epsilon(q, sigma, steps, delta, orders=range(2, 257)):
    """Mironov et al. 2019: RDP of the Poisson-subsampled Gaussian at integer orders, composed over steps,
    converted to (eps, delta) as Balle et al. 2020 (the conversion Opacus uses)."""
    best = math.inf
    for alpha in orders:
        k = np.arange(alpha + 1)
        log_terms = (gammaln(alpha + 1) - gammaln(k + 1) - gammaln(alpha - k + 1)
                     + (alpha - k) * math.log1p(-q) + k * math.log(q) + (k * k - k) / (2 * sigma**2))
        rdp = steps * logsumexp(log_terms) / (alpha - 1)
        eps = rdp - (math.log(delta) + math.log(alpha)) / (alpha - 1) + math.log((alpha - 1) / alpha)
        best = min(best, eps)
    return best


@pytest.mark.parametrize("q, sigma, steps", [(0.01, 1.0, 1000), (0.05, 2.0, 300), (0.1, 0.8, 50)])
def test_accountants_match_independent_computations(q, sigma, steps):
    """Opacus's RDP equals a from-scratch RDP computation at integer orders; the recorded RDP and PRV
    epsilons are within 1% of Google's dp_accounting (RDP, and the privacy-loss-distribution accountant)."""
    import logging

    import dp_accounting
    from dp_accounting import pld, rdp
    from opacus.accountants import RDPAccountant

    logging.getLogger("absl").setLevel(logging.ERROR)  # dp_accounting logs every fractional order it skips
    accountant = RDPAccountant()
    accountant.history = [(sigma, q, steps)]
    assert accountant.get_epsilon(1e-5, alphas=list(range(2, 257))) == pytest.approx(
        independent_rdp_epsilon(q, sigma, steps, 1e-5), rel=1e-6)
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    google_rdp = rdp.RdpAccountant()
    google_rdp.compose(event)
    google_pld = pld.PLDAccountant(value_discretization_interval=1e-3)
    google_pld.compose(event)
    spent = privacy_spent(q, sigma, steps, 1e-5)
    assert spent["epsilon_rdp"] == pytest.approx(google_rdp.get_epsilon(1e-5), rel=0.01)
    assert spent["epsilon_prv"] == pytest.approx(google_pld.get_epsilon(1e-5), rel=0.01)
    assert spent["epsilon_prv"] <= spent["epsilon_rdp"]  # the PRV accountant is the tighter one


def test_cap_samples_per_group_hand_made():
    groups = ["a", "a", "a", "b", None, "b", "a"]
    kept = cap_samples_per_group(groups, 2, seed=0)
    kept_groups = [groups[i] for i in kept]
    assert kept_groups.count("a") == 2 and kept_groups.count("b") == 2 and None in kept_groups
    assert list(cap_samples_per_group(groups, None, seed=0)) == list(range(7))
    assert list(kept) == list(cap_samples_per_group(groups, 2, seed=0))
    # a CSV's empty group cells read as NaN: each such sample is kept, not pooled into one group called 'nan'
    assert list(cap_samples_per_group(["a", float("nan"), float("nan"), float("nan")], 1, seed=0)) == [0, 1, 2, 3]


def test_per_sample_losses_do_not_depend_on_the_rest_of_the_batch():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7)
    labels = torch.tensor([[1, -100, 2, 3, -100], [4, 4, -100, -100, -100], [0, 1, 2, 3, 4]])
    together = per_sample_losses(logits, labels)
    alone = torch.cat([per_sample_losses(logits[i : i + 1], labels[i : i + 1]) for i in range(3)])
    torch.testing.assert_close(together, alone)
    expected = torch.nn.functional.cross_entropy(logits[0], labels[0], ignore_index=-100)
    torch.testing.assert_close(together[0], expected)


def tiny_models(tokenizer):
    from transformers import BertForMaskedLM, GPT2LMHeadModel

    from lmaudit.models.architectures import classifier_model, clm_config, mlm_config
    from lmaudit.models.lstm import swap_lstm

    torch.manual_seed(1)
    lstm = classifier_model("lstm", "tiny", tokenizer, ["a", "b"], 64, 0.1)
    swap_lstm(lstm, private=True)
    return {
        "mlm": BertForMaskedLM(mlm_config("tiny", len(tokenizer), 64, tokenizer.pad_token_id)),
        "clm": GPT2LMHeadModel(clm_config("tiny", len(tokenizer), 64, tokenizer)),
        "classifier": classifier_model("bert", "tiny", tokenizer, ["a", "b"], 64, 0.1),
        "lstm": lstm,
    }


def private_step(private, model, kind, ids, mask, scale=1.0):
    extra = per_sample_position_inputs(model, ids)
    logits = private.model(input_ids=ids, attention_mask=mask, **extra).logits
    labels = torch.zeros(len(ids), dtype=torch.long) if kind in ("classifier", "lstm") else ids.masked_fill(mask == 0, -100)
    (scale * per_sample_losses(logits, labels, causal=kind == "clm").mean()).backward()


@pytest.mark.parametrize("kind", ["mlm", "clm", "classifier", "lstm"])
def test_every_parameter_gets_per_sample_gradients_and_clipping_holds(tiny_tokenizer, notes, kind):
    model = tiny_models(tiny_tokenizer)[kind]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    private = make_private(model, optimizer, 40, 8, DPSettings(noise_multiplier=0.0, max_grad_norm=0.5), seed=0)
    encoded = tiny_tokenizer(notes["text"].tolist()[:5], truncation=True, max_length=64, padding=True, return_tensors="pt")
    private_step(private, model, kind, encoded["input_ids"], encoded["attention_mask"])
    trainable = [(n, p) for n, p in private.model.named_parameters() if p.requires_grad]
    assert trainable and all(p.grad_sample is not None and p.grad_sample.shape[0] == 5 for _, p in trainable)
    private.optimizer.zero_grad(set_to_none=True)
    # One sample with a huge gradient: after clipping its whole gradient has norm max_grad_norm.
    private_step(private, model, kind, encoded["input_ids"][:1], encoded["attention_mask"][:1], scale=1000.0)
    raw = math.sqrt(sum(float(p.grad_sample.pow(2).sum()) for _, p in trainable))
    private.optimizer.clip_and_accumulate()
    clipped = math.sqrt(sum(float(p.summed_grad.pow(2).sum()) for _, p in trainable))
    assert raw > 10 * 0.5 and clipped == pytest.approx(0.5, rel=1e-4)


def test_private_training_records_its_epsilon_and_saves_a_loadable_model(tmp_path, notes):
    from lmaudit.models.load import load_masked_lm
    from lmaudit.models.train import train_language_model

    settings = DPSettings(noise_multiplier=1.0, max_grad_norm=1.0, delta=1e-5, max_samples_per_group=5)
    summary = train_language_model("mlm", notes["text"].tolist(), tmp_path / "dp",
                                   TrainingRecipe(epochs=2, batch_size=8, dp=settings, vocab_size=600, max_length=64),
                                   notes["group_id"].tolist())
    assert summary.n_samples == sum(min(5, n) for n in notes.groupby("group_id").size())
    record = summary.dp
    # Opacus draws each sample at 1 / ceil(n / 8), its steps per epoch: the rate the accountant must be told (8 / n
    # only where 8 divides n)
    assert summary.n_samples % 8 and record["steps"] == 2 * math.ceil(summary.n_samples / 8)
    assert record["sample_rate"] == pytest.approx(1 / math.ceil(summary.n_samples / 8))
    assert record["epsilon_prv"] == pytest.approx(privacy_spent(record["sample_rate"], 1.0, record["steps"], 1e-5)["epsilon_prv"])
    loaded = load_masked_lm(tmp_path / "dp").model
    head = loaded.cls.predictions
    assert head.bias is head.decoder.bias  # the tensor hidden from Opacus is registered again


def test_private_checkpoints_carry_the_epsilon_of_their_epoch_and_leave_the_run_unchanged(tmp_path, notes):
    from lmaudit.models.load import load_masked_lm
    from lmaudit.models.train import train_language_model
    from lmaudit.models.trained import checkpoint_folder
    from lmaudit.models.training_file import read_training_summary

    settings = DPSettings(noise_multiplier=1.0, max_grad_norm=1.0, delta=1e-5, max_samples_per_group=5)
    recipe = TrainingRecipe(epochs=3, batch_size=8, dp=settings, vocab_size=600, max_length=64)
    texts, groups = notes["text"].tolist(), notes["group_id"].tolist()
    final = train_language_model("mlm", texts, tmp_path / "with", replace(recipe, checkpoints=(1, 2)), groups)
    plain = train_language_model("mlm", texts, tmp_path / "without", recipe, groups)
    with_checkpoints, without = load_masked_lm(tmp_path / "with").model, load_masked_lm(tmp_path / "without").model
    for (name, value), (_, other) in zip(with_checkpoints.state_dict().items(), without.state_dict().items(), strict=True):
        assert torch.equal(value, other), name  # saving mid-run draws no random number and changes no weight
    assert final.dp == plain.dp
    steps = []
    for epoch in (1, 2):
        folder = checkpoint_folder(tmp_path / "with", epoch)
        record = read_training_summary(folder).dp
        assert record.epsilon_prv == pytest.approx(
            privacy_spent(record.sample_rate, 1.0, record.steps, 1e-5)["epsilon_prv"])
        steps.append(record.steps)
        head = load_masked_lm(folder).model.cls.predictions
        assert head.bias is head.decoder.bias and torch.count_nonzero(head.bias) > 0  # saved, not left out
    assert 0 < steps[0] < steps[1] < final.dp["steps"]
    assert read_training_summary(checkpoint_folder(tmp_path / "with", 1)).dp.epsilon_prv < final.dp["epsilon_prv"]


def test_private_lstm_checkpoints_are_saved_as_the_plain_lstm(tmp_path):
    from lmaudit.data.users import generate_user_posts
    from lmaudit.models.classifier import ClassifierData, train_classifier
    from lmaudit.models.load import load_classifier
    from lmaudit.models.trained import checkpoint_folder
    from lmaudit.models.training_file import read_training_summary

    posts = generate_user_posts(12, seed=4)
    texts, labels = posts["text"].tolist(), posts["label"].tolist()
    train_classifier(ClassifierData(texts, labels, (texts, labels)), tmp_path / "lstm",
                     TrainingRecipe(architecture="lstm", epochs=2, patience=2, dp=DPSettings(noise_multiplier=1.0),
                                    checkpoints=(1,)))
    checkpoint = checkpoint_folder(tmp_path / "lstm", 1)
    assert type(load_classifier(checkpoint).model.lstm) is torch.nn.LSTM
    recorded = read_training_summary(checkpoint)
    assert recorded.epochs_run == 1 and 0 < recorded.dp.steps < read_training_summary(tmp_path / "lstm").dp.steps


def test_cli_trains_private_models_and_reports_epsilon(tmp_path):
    from click.testing import CliRunner

    from lmaudit.cli import main
    from lmaudit.data.users import generate_user_posts
    from lmaudit.models.training_file import read_training_summary

    posts = generate_user_posts(9, seed=1)
    posts.to_csv(tmp_path / "train.csv", index=False)
    # Validation only steers early stopping; topics the capped training data lacks would be refused.
    posts.groupby("group_id").head(2).to_csv(tmp_path / "validation.csv", index=False)
    runner = CliRunner()
    result = runner.invoke(main, ["train", "classifier", "--data", tmp_path / "train.csv", "--validation", tmp_path / "validation.csv",
                                  "--max-epochs", "2", "--dp", "--noise-multiplier", "0.8", "--max-samples-per-group", "4",
                                  "--out", tmp_path / "clf"])
    assert result.exit_code == 0, result.output
    assert "epsilon" in result.output and "Warning" not in result.output
    record = read_training_summary(tmp_path / "clf").dp
    assert record.noise_multiplier == 0.8 and record.max_samples_per_group == 4
    assert read_training_summary(tmp_path / "clf").n_samples == 9 * 4
    result = runner.invoke(main, ["train", "mlm", "--data", tmp_path / "train.csv", "--out", tmp_path / "m", "--dp"])
    assert result.exit_code == 2 and "--dp needs one of --noise-multiplier" in result.output
    result = runner.invoke(main, ["train", "mlm", "--data", tmp_path / "train.csv", "--out", tmp_path / "m", "--dp",
                                  "--noise-multiplier", "1", "--target-epsilon", "4"])
    assert result.exit_code == 2 and "--dp needs one of --noise-multiplier" in result.output
    # a target epsilon: the run spends it (within Opacus's search tolerance, 0.01, from below) at the recorded delta
    result = runner.invoke(main, ["train", "mlm", "--data", tmp_path / "train.csv", "--out", tmp_path / "m", "--dp",
                                  "--target-epsilon", "4", "--epochs", "2", "--batch-size", "8"])
    assert result.exit_code == 0 and "for target epsilon 4" in result.output, result.output
    record = read_training_summary(tmp_path / "m").dp
    assert record.target_epsilon == 4 and 3.95 <= record.epsilon_prv <= 4.0
    assert record.epsilon_prv == pytest.approx(privacy_spent(record.sample_rate, record.noise_multiplier,
                                                                 record.steps, 1e-5)["epsilon_prv"])
    result = runner.invoke(main, ["train", "classifier", "--data", tmp_path / "train.csv", "--validation",
                                  tmp_path / "validation.csv", "--architecture", "lstm", "--max-epochs", "2", "--dp",
                                  "--noise-multiplier", "1", "--out", tmp_path / "lstm"])
    assert result.exit_code == 0, result.output  # trained with Opacus's DPLSTM, saved as the plain LSTM
    from lmaudit.models.load import load_classifier

    assert type(load_classifier(tmp_path / "lstm").model.lstm) is torch.nn.LSTM


def test_tiny_noise_skips_the_prv_accountant_instead_of_exhausting_memory():
    spent = privacy_spent(0.05, 0.01, 500, 1e-5)
    assert spent["epsilon_prv"] is None and spent["epsilon_rdp"] > 64


def tiny_private_network(noise_multiplier: float, canaries: int = 0):
    """A 2-layer network made private: 40 samples, Poisson batches of expected size 4."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    settings = DPSettings(noise_multiplier, 1.0, 1e-5, gradient_canaries=canaries)
    return model, make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), 40, 4, settings, seed=0)


def moves(model, step) -> list[torch.Tensor]:
    start = [p.detach().clone() for p in model.parameters()]
    step()
    return [p.detach() - s for p, s in zip(model.parameters(), start, strict=True)]


def test_an_empty_draw_s_step_is_opacus_s_own_for_an_empty_batch_the_noise_alone():
    """`empty_step` moves the weights exactly as Opacus's optimizer does after an empty batch's backward pass through
    its GradSampleModule (the same noise, scaled by the expected batch size: standard deviation lr sigma C / 4), Opacus's
    accountant counts it as a step, and without noise it moves nothing (a zero sum of clipped gradients)."""
    model, private = tiny_private_network(1.0)

    def empty_batch() -> None:
        logits = private.model(torch.zeros(0, 10))
        torch.nn.functional.cross_entropy(logits, torch.zeros(0, dtype=torch.long)).backward()
        private.optimizer.step()

    opacus = moves(model, empty_batch)
    model, private = tiny_private_network(1.0)
    ours = moves(model, private.empty_step)
    assert all(torch.equal(a, b) for a, b in zip(opacus, ours, strict=True))
    assert float(torch.cat([m.flatten() for m in ours]).std()) == pytest.approx(0.1 * 1.0 / 4, rel=0.25)
    assert private.engine.accountant.history == [(1.0, 0.1, 1)]
    model, private = tiny_private_network(0.0)
    assert all(not m.any() for m in moves(model, private.empty_step))


def test_empty_poisson_draws_are_steps_accounted_and_checked(tmp_path, notes, monkeypatch):
    """20 texts in batches of expected size 1: about a third of the Poisson draws are empty. Each is a step of the
    training loop (the noise alone), the accountant counts every draw of every epoch, and the gradient canaries' Poisson
    check sees the empty ones' size 0 and passes."""
    from lmaudit.models.dp import PrivateTraining
    from lmaudit.models.dp_checks import OBSERVATIONS
    from lmaudit.models.train import train_language_model

    empty, empty_step = [], PrivateTraining.empty_step
    monkeypatch.setattr(PrivateTraining, "empty_step", lambda self: (empty.append(1), empty_step(self)))
    settings = DPSettings(noise_multiplier=1.0, max_grad_norm=1.0, delta=1e-5, gradient_canaries=50)
    record = train_language_model("clm", notes["text"].tolist()[:20], tmp_path / "m",
                                  TrainingRecipe(epochs=2, batch_size=1, dp=settings, vocab_size=300, max_length=32)).dp
    assert record["steps"] == 2 * 20 and len(empty) >= 5  # Opacus draws ceil(n / batch) batches an epoch
    assert record["epsilon_rdp"] == pytest.approx(privacy_spent(1 / 20, 1.0, 40, 1e-5)["epsilon_rdp"])
    poisson = record[OBSERVATIONS]["checks"][0]
    assert poisson["passed"] and f"40 batches ({len(empty)} empty)" in poisson["detail"]
    assert all(check["passed"] for check in record[OBSERVATIONS]["checks"])


def test_the_classifier_epoch_takes_an_empty_draw_s_step(tiny_tokenizer, notes):
    """The classifier's training epoch counts an empty Poisson draw as a step and takes it: the noise moves the weights."""
    from lmaudit.models.classifier import _train_epoch
    from lmaudit.models.setup import TrainingSetup

    model = tiny_models(tiny_tokenizer)["classifier"]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    private = make_private(model, optimizer, 40, 8, DPSettings(noise_multiplier=1.0), seed=0)
    encoded = tiny_tokenizer(notes["text"].tolist()[:2], truncation=True, max_length=64)["input_ids"]
    batches = [np.array([], dtype=np.int64)]
    setup = TrainingSetup(model=model, tokenizer=tiny_tokenizer, max_length=64, start={}, learning_rate=0.1,
                          optimizer=optimizer, private=private)
    taken = moves(model, lambda: _train_epoch(model, encoded, np.zeros(2, dtype=np.int64), tiny_tokenizer.pad_token_id,
                                              batches, optimizer, private, setup))
    assert all(m.any() for m in taken)
    loss, steps = _train_epoch(model, encoded, np.zeros(2, dtype=np.int64), tiny_tokenizer.pad_token_id,
                               [*batches, np.array([0, 1])], optimizer, private, setup)
    assert steps == 2 and math.isfinite(loss)
