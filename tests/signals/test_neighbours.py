"""Neighbour texts: a pure function of (seed, sample id, neighbour index) and the masked LM, each differing from its
text in at most the asked number of words, and only in words made of letters."""

import string

from lmaudit.signals.neighbours import neighbour_texts


def changed_words(text: str, neighbour: str) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(text.split(" "), neighbour.split(" "), strict=True)) if a != b]


def test_neighbours_are_seeded_and_change_at_most_the_asked_words(tiny_bert, tiny_tokenizer, notes):
    texts, ids = notes["text"].tolist()[:6], notes["sample_id"].tolist()[:6]
    first = neighbour_texts(tiny_bert, tiny_tokenizer, texts, ids, neighbours=4, words=2, seed=0, batch_size=5)
    again = neighbour_texts(tiny_bert, tiny_tokenizer, texts[::-1], ids[::-1], neighbours=4, words=2, seed=0)
    assert first == again[::-1]  # independent of batching and of the other samples
    other_seed = neighbour_texts(tiny_bert, tiny_tokenizer, texts, ids, neighbours=4, words=2, seed=1)
    assert other_seed != first
    changed = 0
    for text, neighbours in zip(texts, first, strict=True):
        assert len(neighbours) == 4
        for neighbour in neighbours:
            positions = changed_words(text, neighbour)
            assert len(positions) <= 2
            assert all(any(c.isalpha() for c in text.split(" ")[i]) for i in positions)
            changed += bool(positions)
    assert changed > 0


def test_a_causal_lm_proposes_its_most_likely_next_whole_word(tiny_tokenizer, notes):
    """A causal LM's neighbour word at a place is, of its 20 most likely next tokens after the words before (one
    unpadded forward pass here), the first that starts a new word of letters other than the original; never the
    first word (no words before it)."""
    import torch
    from transformers import GPT2LMHeadModel

    from lmaudit.models.architectures import clm_config

    torch.manual_seed(4)
    model = GPT2LMHeadModel(clm_config("tiny", len(tiny_tokenizer), 64, tiny_tokenizer)).eval()
    texts, ids = notes["text"].tolist()[:5], notes["sample_id"].tolist()[:5]
    first = neighbour_texts(model, tiny_tokenizer, texts, ids, neighbours=3, words=2, seed=0, batch_size=2)
    assert first == neighbour_texts(model, tiny_tokenizer, texts[::-1], ids[::-1], neighbours=3, words=2, seed=0)[::-1]
    checked = 0
    for text, neighbours in zip(texts, first, strict=True):
        words = text.split(" ")
        for neighbour in neighbours:
            for position in changed_words(text, neighbour):
                assert position > 0
                context = tiny_tokenizer(" ".join(words[:position]))["input_ids"][:-1]  # less the end token
                with torch.no_grad():
                    ranked = model(input_ids=torch.tensor([context])).logits[0, -1].topk(20).indices.tolist()
                start = tiny_tokenizer.decode(context, skip_special_tokens=True)
                proposed = neighbour.split(" ")[position]
                for token in ranked:
                    added = tiny_tokenizer.decode([*context, token], skip_special_tokens=True)[len(start):]
                    original = words[position].rstrip(string.punctuation)  # punctuation after a word stays
                    if added.startswith(" ") and added[1:].isalpha() and added[1:].lower() != original.lower():
                        assert added[1:] + words[position][len(original):] == proposed
                        break
                else:
                    raise AssertionError(f"no proposal expected at word {position} of {text!r}")
                checked += 1
    assert checked > 0
