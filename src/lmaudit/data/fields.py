"""Sensitive fields of the audited texts (names, diagnoses, drugs, numbers): where each text holds one, declared by a
pattern (`KIND=REGEX`: its first group, or the whole match when it has none) or by a column of the data file
(`KIND=COLUMN`: the value, which the text must contain), and the candidate values each kind is reconstructed among."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lmaudit.errors import InputError


@dataclass(frozen=True)
class FieldRule:
    """One kind of sensitive field and how to find it: a regular expression or a column (exactly one)."""

    kind: str
    pattern: str | None = None
    column: str | None = None


def parse_field_rule(value: str, option: str) -> FieldRule:
    """'KIND=REGEX' (option --field) or 'KIND=COLUMN' (option --field-column) as a FieldRule; InputError otherwise."""
    kind, separator, rest = value.partition("=")
    if not separator or not kind.strip() or not rest:
        raise InputError(f"{option} {value!r}: write KIND=" + ("COLUMN" if option == "--field-column" else "REGEX")
                         + " (e.g. name=^(\\w+ \\w+) )")
    if option == "--field-column":
        return FieldRule(kind.strip(), column=rest)
    try:
        re.compile(rest)
    except re.error as error:
        raise InputError(f"{option} {value!r}: not a regular expression ({error})") from None
    return FieldRule(kind.strip(), pattern=rest)


def _pattern_value(pattern: re.Pattern, text: str) -> str | None:
    found = pattern.search(text)
    if found is None:
        return None
    return found.group(1) if pattern.groups else found.group(0)


def field_values(corpus: pd.DataFrame, rule: FieldRule) -> pd.Series:
    """Each text's value of the field (None where it has none), by the corpus's row order. A column value its text does
    not contain is an InputError naming the file and row."""
    if rule.pattern is not None:
        pattern = re.compile(rule.pattern)
        values = [_pattern_value(pattern, text) for text in corpus["text"]]
    else:
        values = [None if pd.isna(value) or str(value) == "" else str(value) for value in corpus[rule.column]]
        for value, text, source, row in zip(values, corpus["text"], corpus["source"], corpus["row"], strict=True):
            if value is not None and value not in text:
                raise InputError(f"{Path(source).name}, row {row}: the {rule.column!r} column's value does not occur "
                                 "in the text; fix the value or leave the cell empty")
    return pd.Series([value or None for value in values], index=corpus.index, dtype=object)


def candidate_values(values: pd.Series, max_candidates: int, listed: list[str] | None = None) -> list[str]:
    """The values a field is reconstructed among: `listed` when given, else the kind's distinct values in the audited
    texts, the `max_candidates` most frequent (ties by value, so the set does not depend on row order)."""
    if listed is not None:
        return list(dict.fromkeys(listed))
    counts = Counter(values.dropna())
    return sorted(counts, key=lambda value: (-counts[value], value))[:max_candidates]


def substituted(text: str, value: str, candidate: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` with every occurrence of `value` replaced by `candidate` (a value shown elsewhere in the text would give
    the answer away), and the character spans the candidate fills."""
    spans, pieces, position = [], [], 0
    for found in re.finditer(re.escape(value), text):
        pieces.append(text[position:found.start()])
        start = sum(map(len, pieces))
        pieces.append(candidate)
        spans.append((start, start + len(candidate)))
        position = found.end()
    pieces.append(text[position:])
    return "".join(pieces), spans
