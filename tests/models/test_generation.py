"""Batched greedy continuations: the same tokens as one `generate` call per prefix and as a plain argmax loop with no
cache, whatever the batch and the prefixes' lengths; stopped at the end-of-text token; bad lengths refused."""

from __future__ import annotations

import pytest
import torch

from lmaudit.models.generation import cut_at_end, greedy_continuations, left_padded
from tests.families import tiny_family_model


@pytest.fixture(scope="module")
def prefixes(tiny_tokenizer, notes):
    encoded = [tiny_tokenizer(text, add_special_tokens=False)["input_ids"] for text in notes["text"].tolist()[:12]]
    return [ids[: 3 + (i * 5) % 17] for i, ids in enumerate(encoded)]  # lengths from 3 to 19


def argmax_loop(model, prefix, length):
    """Greedy decoding spelt out: the whole sequence through the model at each step, no cache, no padding."""
    ids = list(prefix)
    with torch.inference_mode():
        for _ in range(length):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prefix):]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_batched_continuations_equal_one_generate_per_prefix_and_a_plain_loop(family, tiny_tokenizer, prefixes):
    model = tiny_family_model(family, "clm", tiny_tokenizer, seed=2)
    pad = tiny_tokenizer.pad_token_id
    batched = greedy_continuations(model, prefixes, 8, pad, end_token_id=None, batch_size=5)
    for prefix, continuation in zip(prefixes, batched, strict=True):
        with torch.inference_mode():
            alone = model.generate(input_ids=torch.tensor([prefix]), max_new_tokens=8, do_sample=False, pad_token_id=pad,
                                   eos_token_id=None)[0, len(prefix):].tolist()
        assert continuation == alone == argmax_loop(model, prefix, 8)


def test_a_continuation_stops_at_the_end_token_and_bad_requests_are_refused(tiny_tokenizer, prefixes):
    model = tiny_family_model("gpt2", "clm", tiny_tokenizer, seed=2)
    pad = tiny_tokenizer.pad_token_id
    full = greedy_continuations(model, prefixes[:3], 8, pad, end_token_id=None)
    end = full[0][3]  # pretend the fourth token generated for the first prefix ends the text
    cut = greedy_continuations(model, prefixes[:3], 8, pad, end_token_id=end)
    assert cut[0] == full[0][: full[0].index(end)] and all(end not in c for c in cut)
    assert cut_at_end([5, 6, 7], 6) == [5] and cut_at_end([5, 6, 7], None) == [5, 6, 7]
    ids, mask = left_padded([[4, 5], [7]], pad_token_id=0)
    assert ids.tolist() == [[4, 5], [0, 7]] and mask.tolist() == [[1, 1], [0, 1]]
    with pytest.raises(ValueError, match="at least one"):
        greedy_continuations(model, prefixes[:2], 0, pad, None)
    with pytest.raises(ValueError, match="empty prefix"):
        greedy_continuations(model, [[]], 4, pad, None)
