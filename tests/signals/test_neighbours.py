"""Neighbour texts: a pure function of (seed, sample id, neighbour index) and the masked LM, each differing from its
text in at most the asked number of words, and only in words made of letters."""

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
