"""White-box features: attention concentration against a hand computation and a one-sample numpy
reference; batched per-sample gradient norms against one backward pass per sample (fp32, 1e-5)."""

import math

import numpy as np
import pytest
import torch

from lmaudit.signals.masks import random_masks
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.whitebox import (
    attention_concentration,
    attention_features,
    concentration_summary,
    gradient_feature_names,
    gradient_features,
)


def test_concentration_equals_hand_computation():
    attention = torch.tensor([[0.5, 0.25, 0.25, 0.0], [1.0, 0.0, 0.0, 0.0]])
    expected = [0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25), 0.0]  # 0 log 0 counts as 0
    assert attention_concentration(attention).tolist() == pytest.approx(expected)
    summary = concentration_summary(torch.tensor([1.0, 2.0, 3.0, 4.0, 100.0]))
    # mean 22; median 3; 5th percentile 1 + 0.2 * (2 - 1); 95th percentile 4 + 0.8 * (100 - 4).
    assert summary.tolist() == pytest.approx([22.0, 3.0, 1.2, 80.8])


@pytest.fixture(scope="module")
def models(tiny_tokenizer):
    from transformers import BertForMaskedLM, GPT2LMHeadModel

    from lmaudit.models.architectures import clm_config, mlm_config

    torch.manual_seed(5)
    bert = BertForMaskedLM(mlm_config("tiny", len(tiny_tokenizer), 64, tiny_tokenizer.pad_token_id)).eval()
    gpt2 = GPT2LMHeadModel(clm_config("tiny", len(tiny_tokenizer), 64, tiny_tokenizer)).eval()
    return {"mlm": bert, "clm": gpt2}


@pytest.fixture(scope="module")
def texts(notes):
    return notes["text"].tolist()[:16], notes["sample_id"].tolist()[:16]


SETTINGS = SignalSettings(max_length=64, seed=4)


@pytest.mark.parametrize("family", ["mlm", "clm"])
def test_feature_shapes(models, tiny_tokenizer, texts, family):
    model = models[family]
    attention, encoded = attention_features(model, tiny_tokenizer, *texts, SETTINGS)
    gradients, _ = gradient_features(model, tiny_tokenizer, *texts, SETTINGS)
    assert attention.shape == (16, 2 * 2 * 4)  # tiny: 2 layers x 2 heads x 4 statistics
    names = gradient_feature_names(model)
    assert gradients.shape == (16, len(names)) and len(names) == len(list(model.parameters()))
    assert np.isfinite(attention).all() and (attention <= 1e-9).all()  # C(a) <= 0
    assert np.isfinite(gradients).all() and (gradients >= 0).all() and (gradients.sum(1) > 0).all()
    assert len(encoded) == 16


@pytest.mark.parametrize("family", ["mlm", "clm"])
def test_attention_features_equal_one_sample_reference(models, tiny_tokenizer, texts, family):
    model = models[family]
    features, _ = attention_features(model, tiny_tokenizer, *texts, SETTINGS.model_copy(update={"batch_tokens": 100}))
    for row, text in enumerate(texts[0]):
        ids = tiny_tokenizer(text, truncation=True, max_length=64, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            attentions = model(input_ids=ids, output_attentions=True).attentions
        expected = []
        for layer in attentions:
            a = layer[0].double().numpy()  # heads x T x T
            concentration = np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0).sum(-1)
            for head in concentration:
                expected += [head.mean(), np.median(head), np.percentile(head, 5), np.percentile(head, 95)]
        np.testing.assert_allclose(features[row], expected, rtol=1e-5, atol=1e-6)


def reference_gradient_norms(model, tokenizer, text, sample_id, family):
    """One forward and backward pass per sample with the model's own `labels=` loss."""
    ids = tokenizer(text, truncation=True, max_length=64, return_tensors="pt")["input_ids"]
    if family == "mlm":
        content = np.arange(1, ids.shape[1] - 1)  # [CLS] ... [SEP]
        positions = torch.from_numpy(content[random_masks(sample_id, len(content), 1, SETTINGS.seed)[0]])
        labels = torch.full_like(ids, -100)
        labels[0, positions] = ids[0, positions]
        inputs = ids.clone()
        inputs[0, positions] = tokenizer.mask_token_id
    else:
        inputs, labels = ids, ids
    model.zero_grad(set_to_none=True)
    model(input_ids=inputs, labels=labels).loss.backward()
    return np.array([p.grad.double().pow(2).sum().item() if p.grad is not None else 0.0
                     for _, p in model.named_parameters()])


@pytest.mark.parametrize("family", ["mlm", "clm"])
@pytest.mark.parametrize("memory_bytes", [1, 1 << 30])  # one sample per vmap call, or the whole length group
def test_batched_gradient_norms_equal_one_backward_per_sample(models, tiny_tokenizer, texts, family, memory_bytes, monkeypatch):
    from lmaudit.signals import whitebox

    def no_fallback(*args, **kwargs):
        raise AssertionError("the batched rule fell back to one backward pass per sample")

    monkeypatch.setattr(whitebox, "_one_backward_per_sample", no_fallback)
    model = models[family]
    batched, _ = gradient_features(model, tiny_tokenizer, *texts, SETTINGS, memory_bytes=memory_bytes)
    for row, (text, sample_id) in enumerate(zip(*texts, strict=True)):
        expected = reference_gradient_norms(model, tiny_tokenizer, text, sample_id, family)
        np.testing.assert_allclose(batched[row], expected, rtol=1e-5, atol=1e-10)
    model.zero_grad(set_to_none=True)


def test_whitebox_signals_are_stored_and_reused(tiny_model_dirs, notes, tmp_path, monkeypatch):
    from lmaudit.signals import whitebox
    from lmaudit.signals.compute import Scoring, model_signal

    texts, ids = notes["text"].tolist()[:12], notes["sample_id"].tolist()[:12]
    settings = SignalSettings(signal="gradient_norms", max_length=64)
    first = model_signal(tiny_model_dirs[0], ids, texts, settings, Scoring(tmp_path))

    def fail(*args, **kwargs):
        raise AssertionError("recomputed a stored feature")

    monkeypatch.setattr(whitebox, "gradient_features", fail)  # the registry looks the scorer up when it scores
    second = model_signal(tiny_model_dirs[0], ids, texts, settings, Scoring(tmp_path))
    np.testing.assert_array_equal(np.stack(first["value"].to_numpy()), np.stack(second["value"].to_numpy()))


def test_fallback_for_unsupported_layers_equals_reference(models, tiny_tokenizer, texts, monkeypatch):
    """A model with a layer the batched rule does not know (e.g. an LSTM) gets one backward per sample: same numbers."""
    from lmaudit.signals import gradnorms, whitebox

    def unsupported(*args, **kwargs):
        raise gradnorms.UnsupportedLayer("test")

    monkeypatch.setattr(whitebox, "per_sample_squared_norms", unsupported)
    batched, _ = gradient_features(models["clm"], tiny_tokenizer, *texts, SETTINGS)
    for row, (text, sample_id) in enumerate(zip(*texts, strict=True)):
        expected = reference_gradient_norms(models["clm"], tiny_tokenizer, text, sample_id, "clm")
        np.testing.assert_allclose(batched[row], expected, rtol=1e-5, atol=1e-10)


def test_batch_shared_layer_outputs_are_refused(models, tiny_tokenizer):
    """GPT-2 called without position ids embeds positions once for the whole batch: its gradient there
    is the batch's sum, so the batched rule must refuse rather than report mixed norms."""
    from lmaudit.signals.gradnorms import UnsupportedLayer, per_sample_squared_norms

    model = models["clm"]
    ids = torch.tensor([[2, 7, 8, 9, 3], [2, 10, 11, 12, 3]])
    with pytest.raises(UnsupportedLayer):
        per_sample_squared_norms(model, lambda: model(input_ids=ids, labels=ids, use_cache=False).loss.expand(2),
                                 gradient_feature_names(model))


@pytest.mark.parametrize("kind", ["roberta", "distilbert"])
def test_gradient_norms_of_other_mlm_families(tiny_tokenizer, texts, kind):
    """RoBERTa (positions offset by the padding index) and DistilBERT give the reference numbers too."""
    from tests.families import tiny_family_model

    model = tiny_family_model(kind, "mlm", tiny_tokenizer)
    batched, _ = gradient_features(model, tiny_tokenizer, texts[0][:6], texts[1][:6], SETTINGS)
    for row, (text, sample_id) in enumerate(zip(texts[0][:6], texts[1][:6], strict=True)):
        expected = reference_gradient_norms(model, tiny_tokenizer, text, sample_id, "mlm")
        np.testing.assert_allclose(batched[row], expected, rtol=1e-5, atol=1e-10)


class TiedToy(torch.nn.Module):
    """Embedding, layer norm, linear layer, and an output layer tied to the embedding: every rule of gradnorms."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(11, 4, padding_idx=0)
        self.norm = torch.nn.LayerNorm(4)
        self.hidden = torch.nn.Linear(4, 5)
        self.back = torch.nn.Linear(5, 4)
        self.out = torch.nn.Linear(4, 11)
        self.out.weight = self.embed.weight

    def forward(self, ids):
        return self.out(self.back(torch.tanh(self.hidden(self.norm(self.embed(ids))))))


@pytest.mark.parametrize("length", [3, 7])  # shorter and longer than the width: the Linear rule switches
def test_gradient_norm_rules_on_a_tied_toy_model(length):
    from lmaudit.signals.gradnorms import per_sample_squared_norms

    model = TiedToy()
    ids = torch.randint(0, 11, (5, length), generator=torch.Generator().manual_seed(length))
    ids[0, 1] = ids[0, 2]  # a repeated token
    ids[1, 0] = 0  # the padding index, whose row never gets a gradient

    def losses(rows=slice(None)):
        return torch.log_softmax(model(ids[rows]), -1)[..., 3].mean(-1) * -1

    names = [n for n, _ in model.named_parameters()]
    batched = per_sample_squared_norms(model, losses, names)
    for row in range(5):
        grads = torch.autograd.grad(losses([row]).sum(), list(model.parameters()))
        expected = torch.stack([g.double().pow(2).sum() for g in grads])
        torch.testing.assert_close(batched[row], expected, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("architecture", ["bert", "lstm"])  # the LSTM takes the one-backward-per-sample fallback
def test_classifier_gradient_norms_equal_reference(tiny_tokenizer, texts, architecture):
    from lmaudit.models.architectures import classifier_model

    torch.manual_seed(2)
    model = classifier_model(architecture, "tiny", tiny_tokenizer, ["a", "b", "c"], 64, 0.1).eval()
    labels = np.arange(len(texts[0])) % 3
    batched, _ = gradient_features(model, tiny_tokenizer, *texts, SETTINGS, labels=labels)
    for row, text in enumerate(texts[0]):
        ids = tiny_tokenizer(text, truncation=True, max_length=64, return_tensors="pt")["input_ids"]
        model.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(input_ids=ids).logits, torch.tensor([labels[row]])).backward()
        expected = [p.grad.double().pow(2).sum().item() if p.grad is not None else 0.0 for p in model.parameters()]
        np.testing.assert_allclose(batched[row], expected, rtol=1e-5, atol=1e-10)


def test_classifier_gradient_is_stored_under_its_label(tiny_tokenizer, notes, tmp_path):
    """The cross-entropy gradient depends on the label: another label is another stored value, not a reuse."""
    from lmaudit.models.architectures import classifier_model
    from lmaudit.signals.compute import Scoring, model_signal

    torch.manual_seed(3)
    folder = tmp_path / "classifier"
    classifier_model("bert", "tiny", tiny_tokenizer, ["a", "b"], 64, 0.1).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    texts, ids = notes["text"].tolist()[:6], notes["sample_id"].tolist()[:6]
    settings = SignalSettings(signal="gradient_norms", max_length=64)
    first = model_signal(folder, ids, texts, settings, Scoring(tmp_path / "store"), class_labels=[0] * 6)
    other = model_signal(folder, ids, texts, settings, Scoring(tmp_path / "store"), class_labels=[1] * 6)
    again = model_signal(folder, ids, texts, settings, Scoring(tmp_path / "store"), class_labels=[0] * 6)
    assert not np.allclose(np.stack(first["value"].to_numpy()), np.stack(other["value"].to_numpy()))
    np.testing.assert_array_equal(np.stack(first["value"].to_numpy()), np.stack(again["value"].to_numpy()))


def test_wrong_explicit_positions_are_detected_and_avoided(models, tiny_tokenizer, texts, monkeypatch):
    """If the per-sample position ids would change what the model computes (a family numbering positions
    its own way), they are not used, and the numbers still equal the reference."""
    from lmaudit.signals import whitebox

    original = whitebox.per_sample_position_inputs

    def shifted(model, input_ids):
        extra = original(model, input_ids)
        return {**extra, "position_ids": extra["position_ids"] + 3}

    monkeypatch.setattr(whitebox, "per_sample_position_inputs", shifted)
    model = models["mlm"]
    batched, _ = gradient_features(model, tiny_tokenizer, texts[0][:6], texts[1][:6], SETTINGS)
    for row, (text, sample_id) in enumerate(zip(texts[0][:6], texts[1][:6], strict=True)):
        expected = reference_gradient_norms(model, tiny_tokenizer, text, sample_id, "mlm")
        np.testing.assert_allclose(batched[row], expected, rtol=1e-5, atol=1e-10)


def test_one_token_causal_sample_is_refused(models, tiny_tokenizer):
    from lmaudit.errors import InputError
    from lmaudit.signals.base import EncodedSample
    from lmaudit.signals.whitebox import gradient_features_of

    sample = EncodedSample("s1", np.array([7]), np.array([0]), 1, False)
    with pytest.raises(InputError, match="one token only"):
        gradient_features_of(models["clm"], [sample], SETTINGS)
