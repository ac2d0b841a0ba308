"""Candidate scores for reconstruction equal a slow reference, one text and one candidate at a time with plain
transformers calls: a causal LM's log-likelihood of the whole substituted text, a masked LM's sum of log p of the
candidate's tokens masked together (every occurrence replaced); a candidate cut off by truncation scores NaN."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmaudit.signals.reconstruction import candidate_log_likelihoods
from lmaudit.signals.settings import SignalSettings
from tests.families import tiny_family_model

TEXTS = ["Mary Smith 54 year old woman with sepsis, Mary Smith was seen", "John Lee 61 year old man with anemia"]
VALUES = ["Mary Smith", "John Lee"]
CANDIDATES = ["Mary Smith", "John Lee", "Ann Okafor Brandt", "Lee"]


def slow_causal(model, tokenizer, text):
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        log_probs = torch.log_softmax(model(ids).logits[0, :-1].double(), -1)
    return float(log_probs.gather(1, ids[0, 1:, None]).sum())


def slow_masked(model, tokenizer, text, candidate):
    encoded = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
    ids, offsets = encoded["input_ids"][0], encoded["offset_mapping"][0].tolist()
    spans, start = [], text.find(candidate)
    while start >= 0:
        spans.append((start, start + len(candidate)))
        start = text.find(candidate, start + len(candidate))
    positions = [i for i, (a, b) in enumerate(offsets) if b > a and any(a < end and b > begin for begin, end in spans)]
    masked = ids.clone()
    masked[positions] = tokenizer.mask_token_id
    with torch.inference_mode():
        log_probs = torch.log_softmax(model(masked[None]).logits[0].double(), -1)
    return float(sum(log_probs[p, ids[p]] for p in positions))


@pytest.mark.parametrize("family,kind", [("gpt2", "clm"), ("bert", "mlm")])
def test_scores_equal_a_slow_reference(tiny_tokenizer, family, kind):
    model = tiny_family_model(family, kind, tiny_tokenizer, seed=3)
    settings = SignalSettings(signal=f"{kind}_tokens", batch_tokens=64)
    scores = candidate_log_likelihoods(model, tiny_tokenizer, kind, TEXTS, VALUES, CANDIDATES, settings)
    assert scores.shape == (2, 4)
    for row, (text, value) in enumerate(zip(TEXTS, VALUES, strict=True)):
        for column, candidate in enumerate(CANDIDATES):
            filled = text.replace(value, candidate)
            expected = (slow_causal(model, tiny_tokenizer, filled) if kind == "clm"
                        else slow_masked(model, tiny_tokenizer, filled, candidate))
            assert scores[row, column] == pytest.approx(expected, abs=1e-4), (row, column)


@pytest.mark.parametrize("family,kind", [("gpt2", "clm"), ("bert", "mlm")])
def test_a_candidate_cut_off_by_truncation_scores_nan(tiny_tokenizer, family, kind):
    model = tiny_family_model(family, kind, tiny_tokenizer, seed=3)
    text = "word " * 20 + "Mary Smith"
    scores = candidate_log_likelihoods(model, tiny_tokenizer, kind, [text], ["Mary Smith"], ["Mary Smith", "John Lee"],
                                       SignalSettings(signal=f"{kind}_tokens", max_length=12))
    assert np.isnan(scores).all()
