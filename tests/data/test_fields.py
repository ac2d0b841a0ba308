"""Sensitive fields: a pattern's first group (or whole match), a column's value that its text must hold (else a one-line
error naming the file and row), candidates by frequency, and substitution of every occurrence with its spans."""

from __future__ import annotations

import pandas as pd
import pytest

from lmaudit.data.fields import FieldRule, candidate_values, field_values, parse_field_rule, substituted
from lmaudit.errors import InputError


def corpus(texts, **columns):
    return pd.DataFrame({"text": texts, "source": "notes.csv", "row": range(1, len(texts) + 1), **columns})


def test_a_pattern_takes_its_first_group_or_the_whole_match():
    texts = ["Mary Smith 54 year old woman", "no age here", "John Lee 7 year old boy"]
    assert field_values(corpus(texts), FieldRule("age", pattern=r"(\d+) year old")).tolist() == ["54", None, "7"]
    assert field_values(corpus(texts), FieldRule("age", pattern=r"\d+ year")).tolist() == ["54 year", None, "7 year"]


def test_a_column_value_missing_from_its_text_names_the_file_and_row():
    frame = corpus(["Mary Smith was seen", "John Lee was seen"], name=["Mary Smith", "Mary Smith"])
    with pytest.raises(InputError, match=r"notes.csv, row 2: the 'name' column's value does not occur in the text"):
        field_values(frame, FieldRule("name", column="name"))
    frame = corpus(["Mary Smith was seen", "nobody"], name=["Mary Smith", None])
    assert field_values(frame, FieldRule("name", column="name")).tolist() == ["Mary Smith", None]


def test_rules_parse_or_refuse_in_one_line():
    assert parse_field_rule("age=(\\d+) year", "--field") == FieldRule("age", pattern="(\\d+) year")
    assert parse_field_rule("name=patient_name", "--field-column") == FieldRule("name", column="patient_name")
    with pytest.raises(InputError, match="not a regular expression"):
        parse_field_rule("age=(\\d+", "--field")
    with pytest.raises(InputError, match="write KIND=REGEX"):
        parse_field_rule("age", "--field")


def test_candidates_are_the_most_frequent_values_whatever_the_row_order():
    values = pd.Series(["b", "a", "c", "a", "b", "a", "d"])
    assert candidate_values(values, 3) == ["a", "b", "c"]  # c and d tie: by value
    assert candidate_values(values.iloc[::-1], 3) == ["a", "b", "c"]
    assert candidate_values(values, 3, ["x", "y", "x"]) == ["x", "y"]


def test_every_occurrence_is_substituted_and_its_spans_returned():
    text, spans = substituted("Ann saw Ann's doctor", "Ann", "Beatrice")
    assert text == "Beatrice saw Beatrice's doctor"
    assert [text[start:end] for start, end in spans] == ["Beatrice", "Beatrice"]
