"""Token classes (data/token_classes.py) on a hand-built text through the tests' fast tokenizer: a capitalised name in
pieces, other words, a number, punctuation and a declared field that takes precedence over the word classes; and the
`--field` rules refused in one line."""

import pytest

from lmaudit.data.token_classes import CAPITALISED, NUMBER, OTHER_WORD, PUNCTUATION, field_rules, token_classes
from lmaudit.errors import InputError

TEXT = "Mr Smith took aspirin 12.5 mg, for 9 days."


def test_each_token_of_a_hand_built_text_gets_its_class(tiny_tokenizer):
    encoded = tiny_tokenizer(TEXT, return_offsets_mapping=True)
    pieces = [TEXT[start:end] for start, end in encoded["offset_mapping"]]
    classes = token_classes(TEXT, encoded["offset_mapping"], field_rules([r"dose=(\d+(?:\.\d+)? mg)"]))
    by_piece = list(zip(pieces, classes, strict=True))
    assert by_piece == [
        ("", None),  # [CLS] covers no character
        ("M", CAPITALISED), ("r", CAPITALISED), *[(c, CAPITALISED) for c in "Smith"],  # every piece of a capitalised word
        ("to", OTHER_WORD), ("o", OTHER_WORD), ("k", OTHER_WORD), ("aspirin", OTHER_WORD),
        ("12", "dose"), (".", "dose"), ("5", "dose"), ("mg", "dose"),  # the field's match, whatever the characters
        (",", PUNCTUATION), ("for", OTHER_WORD), ("9", NUMBER), ("days", OTHER_WORD), (".", PUNCTUATION),
        ("", None),  # [SEP]
    ]


def test_a_token_overlapping_two_fields_takes_the_first_declared():
    rules = field_rules([r"drug=aspirin \d+", r"amount=\d+"])
    assert token_classes("aspirin 12 mg", [(0, 7), (8, 10), (11, 13)], rules) == ["drug", "drug", OTHER_WORD]
    assert token_classes("x 12", [(1, 4)], field_rules([r"amount=\d+"])) == ["amount"]  # a leading space overlaps


@pytest.mark.parametrize("values, message", [
    (["number=\\d+"], "names a word class"), (["a=x", "a=y"], "declared twice"), (["dose"], "write KIND=REGEX"),
    (["dose=("], "not a regular expression")])
def test_bad_field_rules_are_one_line_errors(values, message):
    with pytest.raises(InputError, match=message) as error:
        field_rules(values)
    assert "\n" not in str(error.value)
