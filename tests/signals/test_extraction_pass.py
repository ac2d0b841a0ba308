"""Probabilistic extraction's pass: at T = 1 with no top-k or top-p it is the plain log-likelihood of the suffix; under
a scheme, Monte Carlo sampling with transformers' `generate` reproduces the suffix as often as p_z says (within an
exact binomial interval); a true token the scheme removes gives p_z = 0; bad schemes are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmaudit.metrics.uncertainty import clopper_pearson
from lmaudit.signals.extraction import suffix_log_probabilities
from lmaudit.signals.sampling import SamplingScheme
from tests.families import tiny_family_model


@pytest.fixture(scope="module")
def model_and_ids(tiny_tokenizer, notes):
    ids = [tiny_tokenizer(text, add_special_tokens=False)["input_ids"] for text in notes["text"].tolist()[:6]]
    return tiny_family_model("gpt2", "clm", tiny_tokenizer, seed=4), ids, tiny_tokenizer.pad_token_id


def test_at_temperature_one_it_is_the_suffixs_log_likelihood(model_and_ids):
    model, ids, pad = model_and_ids
    prefixes, suffixes = [row[:4 + i] for i, row in enumerate(ids)], [row[4 + i:9 + i] for i, row in enumerate(ids)]
    log_p = suffix_log_probabilities(model, prefixes, suffixes, [SamplingScheme()], pad, batch_size=4)[:, 0]
    for value, prefix, suffix in zip(log_p, prefixes, suffixes, strict=True):
        with torch.inference_mode():
            logits = model(torch.tensor([prefix + suffix])).logits[0]
        expected = sum(float(torch.log_softmax(logits[len(prefix) - 1 + t], -1)[token]) for t, token in enumerate(suffix))
        assert value == pytest.approx(expected, abs=1e-4)


def test_sampling_reproduces_the_suffix_as_often_as_p_z_says(model_and_ids):
    model, ids, pad = model_and_ids
    prefix = ids[0][:5]
    scheme = SamplingScheme(temperature=0.7, top_k=4, top_p=0.95)
    with torch.inference_mode():
        target = model.generate(torch.tensor([prefix]), max_new_tokens=2, do_sample=False, pad_token_id=pad)[0, 5:].tolist()
    [[log_p]] = suffix_log_probabilities(model, [prefix], [target], [scheme], pad)
    torch.manual_seed(0)
    draws = 4000
    with torch.inference_mode():
        samples = model.generate(torch.tensor([prefix]), max_new_tokens=2, do_sample=True, temperature=0.7, top_k=4,
                                 top_p=0.95, num_return_sequences=draws, pad_token_id=pad)[:, 5:]
    hits = int((samples == torch.tensor(target)).all(dim=1).sum())
    low, high = clopper_pearson(hits, draws, level=0.999)
    assert 0.05 < np.exp(log_p) and low <= np.exp(log_p) <= high


def test_a_token_outside_the_top_k_has_no_chance_and_bad_schemes_are_refused(model_and_ids):
    model, ids, pad = model_and_ids
    prefix = ids[1][:5]
    with torch.inference_mode():
        unlikely = int(model(torch.tensor([prefix])).logits[0, -1].argmin())
    log_p = suffix_log_probabilities(model, [prefix], [[unlikely]], [SamplingScheme(top_k=5), SamplingScheme()], pad)
    assert np.isneginf(log_p[0, 0]) and np.isfinite(log_p[0, 1])
    for bad in ({"temperature": 0.0}, {"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5}):
        with pytest.raises(ValueError):
            SamplingScheme(**bad)
    assert SamplingScheme(top_k=40).name == "T=1, top-k 40, top-p 1"
