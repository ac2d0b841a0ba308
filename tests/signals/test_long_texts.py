"""A very long text is cut before it is tokenized (a 5,000,000-character text tokenized whole took 2.1 GB), and the cut
never changes a token that is used: the encoding equals tokenizing the whole text and truncating it."""

import pytest

from lmaudit.models.text import CHARS_PER_TOKEN
from lmaudit.signals.base import encode

MAX_LENGTH = 32


@pytest.fixture(scope="module")
def byte_level_tokenizer(notes):
    """A GPT-2-style byte-level BPE tokenizer (spaces belong to the next token), trained on the notes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(notes["text"].tolist(), trainers.BpeTrainer(vocab_size=400, special_tokens=["<eos>"]))
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>")


def whole_then_truncated(tokenizer, text: str) -> tuple[list[int], int]:
    """The obviously right reference: the whole text's tokens, then truncation; and the whole text's content length."""
    ids = tokenizer(text, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    return ids, len(tokenizer(text, add_special_tokens=False)["input_ids"])


def long_texts(notes) -> list[str]:
    """Texts of every length around the cut, with runs of spaces and line breaks where it may fall."""
    joined = "  \n".join(notes["text"].tolist())
    limit = MAX_LENGTH * CHARS_PER_TOKEN
    return [joined[:n] for n in (50, limit - 1, limit, limit + 1, limit + 7, 3 * limit)] + [joined]


@pytest.mark.parametrize("name", ["tiny_tokenizer", "byte_level_tokenizer"])
def test_cut_texts_encode_as_whole_texts_truncated(name, notes, request):
    tokenizer = request.getfixturevalue(name)
    texts = long_texts(notes)
    encoded = encode(tokenizer, texts, [str(i) for i in range(len(texts))], MAX_LENGTH)
    for text, sample in zip(texts, encoded, strict=True):
        ids, length = whole_then_truncated(tokenizer, text)
        assert sample.input_ids.tolist() == ids
        assert sample.truncated == (length > len(sample.content_positions))
        if not sample.truncated:
            assert sample.n_tokens == length
        else:  # counted in the kept part only
            assert MAX_LENGTH <= sample.n_tokens <= length


def test_tokens_longer_than_the_bound_fall_back_to_the_whole_text(tiny_tokenizer):
    """Words past WordPiece's 100-character limit are one [UNK] each: 151 characters per token, more than the cut
    allows for, so the text is tokenized whole rather than losing tokens."""
    text = " ".join(["x" * 150] * 3 * MAX_LENGTH)
    (sample,) = encode(tiny_tokenizer, [text], ["a"], MAX_LENGTH)
    ids, length = whole_then_truncated(tiny_tokenizer, text)
    assert sample.input_ids.tolist() == ids and sample.n_tokens == length == 3 * MAX_LENGTH and sample.truncated


def test_a_five_million_character_text_is_never_tokenized_whole(tiny_tokenizer):
    class Recording:
        """The tokenizer, noting the longest text it is given."""

        def __init__(self):
            self.longest = 0

        def __call__(self, texts, **options):
            self.longest = max(self.longest, *map(len, [texts] if isinstance(texts, str) else texts))
            return tiny_tokenizer(texts, **options)

    text = "patient stable overnight, bp 120/80. " * 135_136  # 5,000,032 characters
    recording = Recording()
    (sample,) = encode(recording, [text], ["a"], MAX_LENGTH)
    assert recording.longest <= MAX_LENGTH * CHARS_PER_TOKEN
    assert sample.truncated and len(sample.content_positions) == MAX_LENGTH - 2
    assert sample.input_ids.tolist() == tiny_tokenizer(text[:10_000], truncation=True, max_length=MAX_LENGTH)["input_ids"]


@pytest.mark.parametrize("name", ["tiny_tokenizer", "byte_level_tokenizer"])
def test_cuts_fall_between_words_and_keep_the_first_tokens(name, notes, request, monkeypatch):
    """With a bound of 3 characters per token the cut falls inside the used tokens' reach at every length: each head
    ends where the text has a space, and its first tokens are the whole text's."""
    from lmaudit.models import text as model_text

    tokenizer = request.getfixturevalue(name)
    monkeypatch.setattr(model_text, "CHARS_PER_TOKEN", 3)
    text = "  \n".join(notes["text"].tolist()[:20])
    whole = tokenizer(text, add_special_tokens=False)["input_ids"]
    for max_tokens in range(5, 80):
        (head,), (ids,) = model_text.text_heads(tokenizer, [text], max_tokens)
        assert text.startswith(head) and (head == text or text[len(head)].isspace())
        assert ids[:max_tokens] == whole[:max_tokens]
