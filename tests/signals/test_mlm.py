"""The batched MLM scorer equals a slow, obviously right one-masked-copy-at-a-time loop."""

import itertools

import numpy as np
import pytest
import torch

from lmaudit.signals.base import encode, unpack_token_values
from lmaudit.signals.masks import mask_size, random_masks
from lmaudit.signals.mlm import mlm_signal, mlm_token_values
from lmaudit.signals.settings import SignalSettings
from tests.families import MASKED_FAMILIES, tiny_family_model


def slow_masked_nll(model, tokenizer, text, positions_list):
    """Sum of -log p over masked positions, one masked copy per forward pass, full softmax."""
    ids = tokenizer(text, truncation=True, max_length=64, return_tensors="pt")["input_ids"][0]
    totals = []
    for positions in positions_list:
        masked = ids.clone()
        masked[list(positions)] = tokenizer.mask_token_id
        with torch.no_grad():
            log_probs = torch.log_softmax(model(input_ids=masked[None]).logits[0].double(), dim=-1)
        totals.append(sum(-log_probs[p, ids[p]].item() for p in positions))
    return np.array(totals)


def content_positions(tokenizer, text):
    ids = tokenizer(text, truncation=True, max_length=64)["input_ids"]
    return list(range(1, len(ids) - 1))  # [CLS] first, [SEP] last


@pytest.fixture(scope="module")
def texts(notes):
    return notes["text"].tolist()[:12], notes["sample_id"].tolist()[:12]


@pytest.mark.parametrize("normalize", ["sum", "mean"])
def test_energy_equals_slow_reference(tiny_bert, tiny_tokenizer, texts, normalize):
    batch_texts, ids = texts
    settings = SignalSettings(k=5, seed=11, normalize=normalize)
    fast, _ = mlm_signal(tiny_bert, tiny_tokenizer, batch_texts, ids, settings)
    for text, sample_id, value in zip(batch_texts, ids, fast, strict=True):
        content = content_positions(tiny_tokenizer, text)
        patterns = [[content[i] for i in row] for row in random_masks(sample_id, len(content), 5, 11)]
        per_mask = slow_masked_nll(tiny_bert, tiny_tokenizer, text, patterns)
        if normalize == "mean":
            per_mask = per_mask / mask_size(len(content))
        assert value == pytest.approx(per_mask.mean(), rel=1e-5, abs=1e-5)


def test_all_masks_equals_brute_force_over_every_subset(tiny_bert, tiny_tokenizer):
    text = "bp 120/80 hr 88 stable"
    fast, encoded = mlm_signal(tiny_bert, tiny_tokenizer, [text], ["s"], SignalSettings(masks="all"))
    content = content_positions(tiny_tokenizer, text)
    subsets = list(itertools.combinations(content, mask_size(len(content))))
    assert len(subsets) > 5
    expected = slow_masked_nll(tiny_bert, tiny_tokenizer, text, subsets).mean()
    assert fast[0] == pytest.approx(expected, rel=1e-5)


def test_pll_equals_mean_of_single_token_masks(tiny_bert, tiny_tokenizer, texts):
    batch_texts, ids = texts
    fast, _ = mlm_signal(tiny_bert, tiny_tokenizer, batch_texts[:4], ids[:4], SignalSettings(signal="mlm_pll"))
    for text, value in zip(batch_texts[:4], fast, strict=True):
        content = content_positions(tiny_tokenizer, text)
        expected = slow_masked_nll(tiny_bert, tiny_tokenizer, text, [[p] for p in content]).mean()
        assert value == pytest.approx(expected, rel=1e-5)


def test_energy_is_unchanged_by_batch_size_and_order(tiny_bert, tiny_tokenizer, texts):
    batch_texts, ids = texts
    settings = SignalSettings(k=4, seed=2)
    big, _ = mlm_signal(tiny_bert, tiny_tokenizer, batch_texts, ids, settings.model_copy(update={"batch_tokens": 100_000}))
    small, _ = mlm_signal(tiny_bert, tiny_tokenizer, batch_texts, ids, settings.model_copy(update={"batch_tokens": 64}))
    reversed_values, _ = mlm_signal(tiny_bert, tiny_tokenizer, batch_texts[::-1], ids[::-1],
                                    settings.model_copy(update={"batch_tokens": 300}))
    np.testing.assert_allclose(big, small, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(big, reversed_values[::-1], rtol=1e-5, atol=1e-6)


def test_target_and_reference_see_the_same_masks(tiny_tokenizer, texts):
    """Masks come from (seed, sample_id, k) and the tokenizer only, so two models are always paired."""
    from lmaudit.signals.mlm import mask_patterns
    from lmaudit.signals.registry import resolved

    batch_texts, ids = texts
    settings = resolved(SignalSettings(k=6, seed=9))
    first = [mask_patterns(s, settings) for s in encode(tiny_tokenizer, batch_texts, ids, 64)]
    second = [mask_patterns(s, settings) for s in encode(tiny_tokenizer, batch_texts[::-1], ids[::-1], 64)][::-1]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_truncation_is_recorded(tiny_bert, tiny_tokenizer):
    long_text = " ".join(["hypertension"] * 200)
    _, encoded = mlm_signal(tiny_bert, tiny_tokenizer, [long_text, "stable"], ["a", "b"], SignalSettings(k=1, max_length=32))
    assert [e.truncated for e in encoded] == [True, False]
    # Counted in the part of the text kept before tokenizing (tests/signals/test_long_texts.py): at least the limit.
    assert len(encoded[0].input_ids) == 32 and 32 <= encoded[0].n_tokens <= 200


@pytest.mark.parametrize("family", MASKED_FAMILIES)
def test_every_masked_lm_family_gives_the_slow_references_energy(tiny_tokenizer, texts, family):
    """The head-on-masked-positions path of every masked-LM family gives the full model's numbers."""
    model = tiny_family_model(family, "mlm", tiny_tokenizer)
    batch_texts, ids = texts
    fast, _ = mlm_signal(model, tiny_tokenizer, batch_texts[:6], ids[:6], SignalSettings(k=3, seed=1, max_length=64))
    for text, sample_id, value in zip(batch_texts[:6], ids[:6], fast, strict=True):
        content = content_positions(tiny_tokenizer, text)
        patterns = [[content[i] for i in row] for row in random_masks(sample_id, len(content), 3, 1)]
        assert value == pytest.approx(slow_masked_nll(model, tiny_tokenizer, text, patterns).mean(), rel=1e-5, abs=1e-5)


def test_bf16_energy_is_close_to_fp32(tiny_bert, tiny_tokenizer, texts):
    batch_texts, ids = texts
    fp32, _ = mlm_signal(tiny_bert, tiny_tokenizer, batch_texts, ids, SignalSettings(k=4))
    bf16, _ = mlm_signal(tiny_bert, tiny_tokenizer, batch_texts, ids, SignalSettings(k=4, precision="bf16"))
    assert not np.array_equal(fp32, bf16)  # bf16 really ran
    np.testing.assert_allclose(bf16, fp32, rtol=0.02)


def test_k1_mean_energy_is_jagannathas_mlm_loss(tiny_bert, tiny_tokenizer, texts):
    """Jagannatha's MLM loss (one random 15% mask, mean cross-entropy over the masked tokens, as the
    model's own `labels=` loss computes it) is the energy with k=1 and normalize=mean."""
    batch_texts, ids = texts
    energy, encoded = mlm_signal(tiny_bert, tiny_tokenizer, batch_texts, ids, SignalSettings(k=1, normalize="mean", seed=3))
    for sample, value in zip(encoded, energy, strict=True):
        positions = sample.content_positions[random_masks(sample.sample_id, len(sample.content_positions), 1, 3)[0]]
        input_ids = torch.from_numpy(sample.input_ids).clone()
        labels = torch.full_like(input_ids, -100)
        labels[positions] = input_ids[positions]
        input_ids[positions] = tiny_tokenizer.mask_token_id
        with torch.no_grad():
            model_loss = tiny_bert(input_ids=input_ids[None], labels=labels[None]).loss.item()
        assert value == pytest.approx(model_loss, abs=1e-5)


def test_mlm_tokens_are_the_pseudo_likelihoods_terms_one_mask_at_a_time(tiny_bert, tiny_tokenizer, texts):
    """Per content token, masked alone: its log p, the mean and sd of log p(z) under the predictive distribution, and
    whether it is the distribution's first choice; their mean NLL is mlm_pll's value."""
    batch_texts, ids = texts[0][:4], texts[1][:4]
    stored, _ = mlm_token_values(tiny_bert, tiny_tokenizer, batch_texts, ids, SignalSettings(signal="mlm_tokens"))
    table = unpack_token_values(stored)
    pll, _ = mlm_signal(tiny_bert, tiny_tokenizer, batch_texts, ids, SignalSettings(signal="mlm_pll"))
    np.testing.assert_allclose(-np.nanmean(table["log_prob"], axis=1), pll, rtol=0, atol=1e-9)
    for row, text in enumerate(batch_texts):
        input_ids = tiny_tokenizer(text, truncation=True, max_length=64, return_tensors="pt")["input_ids"][0]
        for t, position in enumerate(content_positions(tiny_tokenizer, text)):
            masked = input_ids.clone()
            masked[position] = tiny_tokenizer.mask_token_id
            with torch.no_grad():
                log_p = torch.log_softmax(tiny_bert(input_ids=masked[None]).logits[0, position], dim=-1).double()
            mean = float((log_p.exp() * log_p).sum())
            std = float((log_p.exp() * (log_p - mean) ** 2).sum()) ** 0.5
            expected = (float(log_p[input_ids[position]]), mean, std, int(log_p.argmax()), int(input_ids[position]))
            got = tuple(table[field][row, t] for field in ("log_prob", "mean", "std", "top1_id", "token_id"))
            assert got == pytest.approx(expected, abs=1e-5)


def test_padded_batches_give_the_exact_length_batches_values(tiny_bert, tiny_tokenizer, texts):
    """A GPU's batches mix lengths behind an attention mask: the same NLLs as the CPU's exact-length batches."""
    from lmaudit.signals.mlm import score_masked_copies_with_models

    batch_texts, ids = texts
    samples = encode(tiny_tokenizer, batch_texts, ids, 64)
    patterns = [s.content_positions[random_masks(s.sample_id, len(s.content_positions), 3, 0)] for s in samples]
    exact = score_masked_copies_with_models([tiny_bert], tiny_tokenizer.mask_token_id, samples, patterns, 4096)[0]
    padded = score_masked_copies_with_models([tiny_bert], tiny_tokenizer.mask_token_id, samples, patterns, 4096,
                                             padding_share=0.5)[0]
    assert len({len(s.input_ids) for s in samples}) > 1  # the padded batches do mix lengths
    for one, other in zip(exact, padded, strict=True):
        np.testing.assert_allclose(one, other, rtol=1e-5, atol=1e-5)


def test_without_padding_the_batches_are_the_exact_length_groups_in_sample_order(tiny_tokenizer, texts):
    """Padding share 0 (a CPU's) groups the copies as the exact-length grouping always did: by length, shortest first,
    then by sample and copy, up to the token budget."""
    from lmaudit.signals.mlm import _batches

    samples = encode(tiny_tokenizer, *texts, 64)
    patterns = [np.zeros((3, 1), dtype=int) for _ in samples]
    batches = [[(c.sample_index, c.slot) for c in batch] for batch in _batches(samples, patterns, 200)]
    expected = []
    for length in sorted({len(s.input_ids) for s in samples}):
        copies = [(i, slot) for i, s in enumerate(samples) if len(s.input_ids) == length for slot in range(3)]
        per_batch = max(1, 200 // length)
        expected += [copies[start : start + per_batch] for start in range(0, len(copies), per_batch)]
    assert batches == expected
