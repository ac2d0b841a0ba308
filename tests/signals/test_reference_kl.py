"""The reference KL (signals/reference_kl.py): against each text's two full next-token distributions summed by hand in
float64, chunked or not; 0 for a model against itself; logits padded beyond the tokenizer clipped; the positions of the
target's clm_tokens pass; stored under both models and read back on a rerun; a vocabulary it cannot compare, or an
audit that did not ask, leaves it missing with the reason in one line."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from lmaudit.attacks.base import REFERENCE_KL, REFERENCE_TOKEN_LOG_PROBS, TARGET_LOSS, TOKEN_LOG_PROBS, AttackInput
from lmaudit.attacks.informia import TOKEN_SPEC
from lmaudit.attacks.registry import run_attacks
from lmaudit.signals.base import encode, unpack_token_values
from lmaudit.signals.causal import causal_token_values
from lmaudit.signals.reference_kl import reference_kl_passes, shared_vocabulary
from lmaudit.signals.settings import SignalSettings
from tests.families import family_config

SETTINGS = SignalSettings(signal="clm_tokens", max_length=64, batch_tokens=128)


def tiny_gpt2(tokenizer, seed: int, extra_logits: int = 0):
    """A random tiny GPT-2 of the tokenizer, its logits `extra_logits` wider than the tokenizer (as Pythia pads them)."""
    from transformers import GPT2LMHeadModel

    torch.manual_seed(seed)
    config = family_config("gpt2", tokenizer)
    config.vocab_size = len(tokenizer) + extra_logits
    return GPT2LMHeadModel(config).eval()


def slow_kl(target, reference, tokenizer, text: str, vocabulary: int) -> np.ndarray:
    """sum_v p_r(v) (log p_r(v) - log p_t(v)) at each position but the last, one text, each model's own forward pass."""
    ids = tokenizer(text, truncation=True, max_length=64, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        target_lp, reference_lp = (torch.log_softmax(model(input_ids=ids).logits[0, :-1, :vocabulary].double(), -1)
                                   for model in (target, reference))
    return (reference_lp.exp() * (reference_lp - target_lp)).sum(-1).numpy()


@pytest.fixture(scope="module")
def texts(notes):
    return notes["text"].tolist()[:6], notes["sample_id"].tolist()[:6]


@pytest.mark.parametrize("position_chunk, tile", [(50, 256), (None, 2048)])
def test_kl_equals_the_full_distributions_summed_by_hand(tiny_tokenizer, texts, position_chunk, tile, monkeypatch):
    """Chunks of 50 positions (a text's end in one chunk, its start in the next) and vocabulary tiles of 256 rows (three,
    the last one short), or one chunk and tile: the same KL as each text's two whole distributions, to 1e-5 relative; on
    the clm_tokens pass's positions."""
    monkeypatch.setattr("lmaudit.models.heads.VOCABULARY_TILE", tile)
    monkeypatch.setattr("lmaudit.signals.reference_kl.VOCABULARY_TILE", tile)
    target, reference = tiny_gpt2(tiny_tokenizer, 0), tiny_gpt2(tiny_tokenizer, 1)
    samples = encode(tiny_tokenizer, *texts, 64)
    kl = reference_kl_passes(target, reference, tiny_tokenizer, samples, SETTINGS, len(tiny_tokenizer),
                             position_chunk=position_chunk)
    packed, _ = causal_token_values(target, tiny_tokenizer, *texts, SETTINGS)
    lengths = np.sum(~np.isnan(unpack_token_values(packed)["log_prob"]), axis=1)
    assert [len(values) for values in kl] == lengths.tolist()
    for text, values in zip(texts[0], kl, strict=True):
        expected = slow_kl(target, reference, tiny_tokenizer, text, len(tiny_tokenizer))
        assert values.dtype == np.float64 and np.all(values >= 0) and np.all(expected > 0)
        np.testing.assert_allclose(values, expected, rtol=1e-5, atol=0)


def test_a_model_against_itself_has_no_divergence(tiny_tokenizer, texts):
    model = tiny_gpt2(tiny_tokenizer, 0)
    kl = reference_kl_passes(model, model, tiny_tokenizer, encode(tiny_tokenizer, *texts, 64), SETTINGS,
                             len(tiny_tokenizer))
    assert all(len(values) and np.all(np.abs(values) <= 1e-12) for values in kl)


def test_logits_padded_beyond_the_tokenizer_are_clipped_to_it(tiny_tokenizer, texts):
    """A reference whose logits are 5 wider than the tokenizer (and than the target's) is compared over the
    tokenizer's tokens, each distribution renormalised over them, as the authors' code clips Pythia's."""
    size = len(tiny_tokenizer)
    assert (shared_vocabulary(size, size, size), shared_vocabulary(size, size + 5, size)) == (size, size)
    assert shared_vocabulary(size + 5, size + 5, size) == size + 5  # widths that agree are compared whole
    assert shared_vocabulary(size, size - 1, size) is None and shared_vocabulary(size - 2, size - 1, size) is None
    target, reference = tiny_gpt2(tiny_tokenizer, 0), tiny_gpt2(tiny_tokenizer, 1, extra_logits=5)
    kl = reference_kl_passes(target, reference, tiny_tokenizer, encode(tiny_tokenizer, *texts, 64), SETTINGS, size)
    for text, values in zip(texts[0], kl, strict=True):
        np.testing.assert_allclose(values, slow_kl(target, reference, tiny_tokenizer, text, size), rtol=1e-5, atol=0)


@pytest.fixture(scope="module")
def saved_pair(tiny_tokenizer, tmp_path_factory):
    """A saved target, a reference with the same vocabulary and one with fewer logits than the tokenizer has tokens."""
    folder = tmp_path_factory.mktemp("kl-models")
    for name, seed, extra in (("target", 0, 0), ("reference", 1, 0), ("narrow", 2, -3)):
        config = family_config("gpt2", tiny_tokenizer)
        config.vocab_size = len(tiny_tokenizer) + extra
        config.save_pretrained(folder / name)  # the check reads config.json only; the models are built below
        tiny_tokenizer.save_pretrained(folder / name)
        if extra == 0:
            tiny_gpt2(tiny_tokenizer, seed).save_pretrained(folder / name)
    return folder


def test_the_stored_kl_is_read_back_on_a_rerun(saved_pair, tiny_tokenizer, texts, tmp_path, monkeypatch):
    """Through the signal store (ReferenceKLJob): the values of the pass, stored under both models' fingerprints, read
    back without computing on a rerun; the other model order is another store."""
    from lmaudit.models.source import ModelSource
    from lmaudit.signals.compute import Scoring
    from lmaudit.signals.reference_kl import ReferenceKLJob, reference_kl_signal

    target, reference = ModelSource(str(saved_pair / "target")), ModelSource(str(saved_pair / "reference"))
    scoring = Scoring(tmp_path / "cache")
    first = reference_kl_signal(target, reference, texts[1], texts[0], SETTINGS, scoring, len(tiny_tokenizer))
    expected = reference_kl_passes(tiny_gpt2(tiny_tokenizer, 0), tiny_gpt2(tiny_tokenizer, 1), tiny_tokenizer,
                                   encode(tiny_tokenizer, *texts, 64), SETTINGS, len(tiny_tokenizer))
    for stored, values in zip(first["value"], expected, strict=True):
        np.testing.assert_allclose(stored, values, rtol=1e-6, atol=0)  # loaded as the audit loads it: fp32 rounding

    def refuse(*_):
        raise AssertionError("computed again")

    monkeypatch.setattr(ReferenceKLJob, "__call__", refuse)
    again = reference_kl_signal(target, reference, texts[1], texts[0], SETTINGS, scoring, len(tiny_tokenizer))
    assert all(np.array_equal(a, b) for a, b in zip(first["value"], again["value"], strict=True))
    with pytest.raises(AssertionError, match="computed again"):
        reference_kl_signal(reference, target, texts[1], texts[0], SETTINGS, scoring, len(tiny_tokenizer))


def kl_audit(saved_pair, reference: str, asked: bool = True):
    """What reference_kl_values reads of a ResolvedAudit."""
    from lmaudit.models.source import DEFAULT_PLACEMENT, ModelSource

    return SimpleNamespace(tokens=SimpleNamespace(reference_kl=asked), target=ModelSource(str(saved_pair / "target")),
                           references={"reference_1": ModelSource(str(saved_pair / reference))},
                           placement=DEFAULT_PLACEMENT)


@pytest.mark.parametrize("reference, asked, kind, fragment", [
    ("narrow", True, "clm", "the reference's vocabulary differs from the target's"),
    ("reference", False, "clm", "not asked for: give --reference-kl"),
    ("reference", True, "mlm", "a masked LM"),
])
def test_without_a_comparable_reference_or_the_option_the_kl_is_missing_with_the_reason(
        saved_pair, reference, asked, kind, fragment):
    """Decided before any model loads: a reference with fewer logits than the tokenizer has tokens (not clippable), an
    audit without --reference-kl, a masked LM; the reason in one line, no value."""
    from lmaudit.audit.tokens import reference_kl_values

    values = {TOKEN_LOG_PROBS: np.zeros((2, 3)), REFERENCE_TOKEN_LOG_PROBS: np.zeros((2, 3))}
    missing: dict[str, str] = {}
    assert reference_kl_values(kl_audit(saved_pair, reference, asked), None, values, missing, kind) == {}
    assert fragment in missing[REFERENCE_KL] and "\n" not in missing[REFERENCE_KL]
    if reference == "narrow":  # and informia_tokens is skipped with it
        samples = pd.DataFrame({"sample_id": ["a", "b"], "role": ["member", "nonmember"], "group_id": ["p", "q"]})
        data = AttackInput("clm_tokens", samples, {TARGET_LOSS: np.zeros(2), **values}, missing=missing)
        scores, skipped = run_attacks([data], [TOKEN_SPEC])
        assert not scores and [(s.attack, s.reason) for s in skipped] == [("informia_tokens", missing[REFERENCE_KL])]


def test_without_the_references_token_values_the_kl_gives_their_reason(saved_pair):
    from lmaudit.audit.tokens import reference_kl_values

    missing = {REFERENCE_TOKEN_LOG_PROBS: "the first reference scored other tokens than the target"}
    assert reference_kl_values(kl_audit(saved_pair, "reference"), None, {TOKEN_LOG_PROBS: np.zeros((1, 2))}, missing,
                               "clm") == {}
    assert missing[REFERENCE_KL] == missing[REFERENCE_TOKEN_LOG_PROBS]
