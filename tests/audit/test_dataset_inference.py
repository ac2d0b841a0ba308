"""audit/dataset_inference.py's warning about validation samples that repeat a suspect sample's very text: counted,
located, and limited to that case (the test itself is tests/metrics/test_dataset_inference.py's; a whole run,
tests/e2e's)."""

import pandas as pd

from lmaudit.audit.dataset_inference import shared_text_warnings
from lmaudit.data.roles import MEMBER, NONMEMBER, POPULATION


def corpus(rows: list[tuple[str, str]]) -> pd.DataFrame:
    """A corpus of (role, text) rows, each located as row N of suspect.csv or validation.csv."""
    source = {MEMBER: "suspect.csv", NONMEMBER: "validation.csv", POPULATION: "population.csv"}
    counters: dict[str, int] = {}
    records = []
    for role, text in rows:
        counters[role] = counters.get(role, 0) + 1
        records.append({"role": role, "text": text, "source": source[role], "row": counters[role] + 1})
    return pd.DataFrame(records)


def test_no_shared_text_gives_no_warning():
    """Texts repeated within the suspect set, within the validation set, or shared with the population are no warning:
    only a validation sample with a suspect sample's text looks like a member if the suspect set was trained on."""
    assert shared_text_warnings(corpus([
        (MEMBER, "BP 120/80."), (MEMBER, "BP 120/80."), (MEMBER, "Na 134."),
        (NONMEMBER, "HR 88."), (NONMEMBER, "HR 88."), (NONMEMBER, "K 3.1."),
        (POPULATION, "Na 134."), (POPULATION, "HR 88.")])) == []


def test_validation_samples_with_a_suspect_text_are_counted_and_the_first_located():
    """Two of the four validation samples repeat a suspect text (one repeats it twice over in the suspect set: counted
    once per validation sample); the warning counts them against all validation samples, names the first by file and
    row, and says what it costs (power, never the false-positive rate). Text that differs only in case is not the very
    text."""
    [warning] = shared_text_warnings(corpus([
        (MEMBER, "Patient stable."), (MEMBER, "Patient stable."), (MEMBER, "Na 134."),
        (NONMEMBER, "HR 88."), (NONMEMBER, "Na 134."), (NONMEMBER, "patient stable."), (NONMEMBER, "Patient stable.")]))
    assert warning.startswith("2 of 4 validation samples have the very text of a suspect sample")
    assert "(the first: validation.csv, row 3)" in warning
    assert "the test loses power, never its false-positive rate" in warning
