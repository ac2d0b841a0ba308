"""Tokenizers: trained for the models lmaudit trains, loaded from a model folder, compared between two models."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.models.folders import resolve_model_folder, warn_remote_code
from lmaudit.models.source import ModelSource, as_source

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TOKENIZATIONS = ("wordpiece", "word")


def train_tokenizer(texts: Sequence[str], vocab_size: int = 4000, max_length: int = 128, tokenization: str = "wordpiece",
                    reserved: Sequence[str] = ()):
    """A lower-casing tokenizer for `texts`, wrapped for transformers; the same texts give the same tokenizer.
    `reserved` words are left out of the counts and added after the vocabulary (`reserve_tokens`).

    WordPiece: the vocabulary is the special tokens, every character (alone and as a ## continuation) and then
    the most frequent words, ties broken alphabetically; other words split into known pieces. Word-level ("word"):
    the special tokens and the most frequent words; every other word is [UNK] (Shejwalkar et al., Figure 4).
    tokenizers' WordPieceTrainer is not used because it breaks ties in hash-map order, so two runs
    on the same texts give different vocabularies (measured: 52 tokens apart on 30 patients' notes),
    and then different models and a different report for the same seed.
    """
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from transformers import PreTrainedTokenizerFast

    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    left_out = set(reserved)
    words = Counter(
        word for text in texts for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))
        if word not in left_out
    )
    if tokenization not in TOKENIZATIONS:
        raise InputError(f"unknown tokenization '{tokenization}'; use one of {', '.join(TOKENIZATIONS)}")
    characters = sorted({character for word in words for character in word})
    vocabulary = SPECIAL_TOKENS + (characters + [f"##{c}" for c in characters] if tokenization == "wordpiece" else [])
    known = set(vocabulary)
    by_frequency = sorted(words.items(), key=lambda item: (-item[1], item[0]))
    vocabulary += [word for word, _ in by_frequency if word not in known][: max(0, vocab_size - len(vocabulary))]
    ids = {token: index for index, token in enumerate(vocabulary)}
    core = Tokenizer(models.WordPiece(ids, unk_token="[UNK]") if tokenization == "wordpiece" else
                     models.WordLevel(ids, unk_token="[UNK]"))
    core.normalizer = normalizer
    core.pre_tokenizer = pre_tokenizer
    if tokenization == "wordpiece":
        core.decoder = decoders.WordPiece()
    cls_id, sep_id = core.token_to_id("[CLS]"), core.token_to_id("[SEP]")
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=max_length,
    )
    return reserve_tokens(tokenizer, reserved)


def reserve_tokens(tokenizer, tokens: Sequence[str]):
    """The tokenizer with `tokens` added to its vocabulary, each one id, in the order given (new-token canaries: every
    canary's, planted or not, so that the vocabulary does not tell which were planted); InputError if one is a word of
    the trained vocabulary. Tokens added before (a reference or base model made for the same canaries) are kept."""
    added = tokenizer.get_added_vocab()
    known = [token for token in tokens if token in tokenizer.get_vocab() and token not in added]
    if known:
        raise InputError(f"the token '{known[0]}' is already in the tokenizer's vocabulary: new-token canaries need "
                         "tokens that occur nowhere else; make the canaries again")
    tokenizer.add_tokens(list(tokens))
    return tokenizer


# What a tokenizer saved from a plain `tokenizers` object calls its class: it is exactly its tokenizer.json.
GENERIC_TOKENIZER_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


def _saved_tokenizer_class(folder: Path) -> str | None:
    try:
        return json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        return None


def load_tokenizer(path: str | Path | ModelSource, trust_remote_code: bool = False):
    """A model folder's tokenizer, or InputError saying why not."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = resolve_model_folder(as_source(path).folder)
    if trust_remote_code:
        warn_remote_code(folder)
    try:
        if _saved_tokenizer_class(folder) in GENERIC_TOKENIZER_CLASSES and (folder / "tokenizer.json").is_file():
            # AutoTokenizer would pick the model type's own tokenizer class (a Qwen2 folder gets Qwen2's
            # pre-tokenizer), not the tokenizer that was saved and trained with.
            return PreTrainedTokenizerFast.from_pretrained(folder, local_files_only=True)
        return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}: no usable tokenizer files ({str(err).splitlines()[0]}); save the tokenizer with the model") from None


# Text that exercises a tokenizer's normalisation: case, accents, digits, punctuation, spacing.
TOKENIZER_PROBE = "Patient ÉMILE Dupont, 47 y/o: BP 142/91 mmHg;  no café-au-lait spots. naïve"


def tokenizer_difference(first: str | Path | ModelSource, second: str | Path | ModelSource,
                         trust_remote_code: bool = False) -> str | None:
    """How two models' tokenizers differ (vocabulary, special tokens aside, or how they normalise and split a probe text),
    or None."""
    one, two = load_tokenizer(first, trust_remote_code), load_tokenizer(second, trust_remote_code)
    vocabulary, other = one.get_vocab(), two.get_vocab()
    # A special token added to one (a padding token, say) never appears in a text's tokens: it does not unpair masks.
    special = {*one.all_special_tokens, *two.all_special_tokens}
    only = (set(vocabulary) ^ set(other)) - special
    renumbered = sum(vocabulary[t] != other[t] for t in set(vocabulary) & set(other))
    if only or renumbered:
        return f"vocabularies of {len(vocabulary)} and {len(other)} tokens, {len(only)} in one only, {renumbered} renumbered"
    if one(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"] != two(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"]:
        return "the same vocabulary, but they normalise or split text differently (case, accents or pre-tokenisation)"
    return None

