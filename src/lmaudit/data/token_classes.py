"""What kind of text each token covers, for localisation: a declared sensitive field (`--field KIND=REGEX`, data/fields.py)
where the token's characters overlap one of the field's matches, else a word class read from the characters themselves.
Field classes take precedence (the first declared field, where two overlap); a token that covers no character (a special
token) has no class."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

from lmaudit.data.fields import FieldRule, parse_field_rule
from lmaudit.errors import InputError

# The word classes, after the fields: digits only (among its letters and digits), a token of a word whose first letter
# is a capital (every piece of "Smith", and a sentence's first word too), any other word, and the rest (punctuation,
# symbols, spacing).
NUMBER, CAPITALISED, OTHER_WORD, PUNCTUATION = "number", "capitalised word", "other word", "punctuation"
WORD_CLASSES = (NUMBER, CAPITALISED, OTHER_WORD, PUNCTUATION)
WORD = re.compile(r"\w+")


def field_rules(values: Sequence[str]) -> tuple[FieldRule, ...]:
    """Each `--field KIND=REGEX` as a FieldRule; InputError for a bad one, a kind declared twice, or a kind named as a
    word class (the two would be counted as one)."""
    rules = tuple(parse_field_rule(value, "--field") for value in values)
    kinds = [rule.kind for rule in rules]
    for kind in kinds:
        if kind in WORD_CLASSES:
            raise InputError(f"--field {kind}=...: '{kind}' names a word class of the localisation; call the field "
                             "otherwise")
        if kinds.count(kind) > 1:
            raise InputError(f"--field {kind}=...: the kind is declared twice; give each kind one pattern")
    return rules


def field_spans(text: str, rule: FieldRule) -> list[tuple[int, int]]:
    """Every character span (start, end) of the field in `text`: each match's first group, or the whole match when the
    pattern has no group (as data/fields.py reads a field), empty matches left out."""
    pattern = re.compile(rule.pattern or "")
    spans = [found.span(1) if pattern.groups else found.span(0) for found in pattern.finditer(text)]
    return [(start, end) for start, end in spans if end > start]


def word_class(text: str, start: int, end: int, word_starts: Sequence[int]) -> str:
    """The word class of the characters text[start:end], `word_starts` being where the text's \\w+ runs start, in
    order (a letter's word is the run it lies in)."""
    piece = text[start:end]
    letter = next((start + i for i, character in enumerate(piece) if character.isalpha()), None)
    if letter is None:
        return NUMBER if any(character.isdigit() for character in piece) else PUNCTUATION
    word_start = word_starts[bisect_right(word_starts, letter) - 1]  # every letter lies in a \w+ run
    return CAPITALISED if text[word_start].isupper() else OTHER_WORD


def token_classes(text: str, offsets: Sequence[tuple[int, int]], rules: Sequence[FieldRule]) -> list[str | None]:
    """The class of each token of `text`, given its character span (start, end) from a fast tokenizer's offsets: the
    first field whose match it overlaps, else its word class; None for a token of no character."""
    fields = [(rule.kind, field_spans(text, rule)) for rule in rules]
    word_starts = [found.start() for found in WORD.finditer(text)]
    classes: list[str | None] = []
    for start, end in offsets:
        if end <= start:
            classes.append(None)
            continue
        kind = next((kind for kind, spans in fields if any(a < end and start < b for a, b in spans)), None)
        classes.append(kind or word_class(text, start, end, word_starts))
    return classes
