"""audit/corpus.py: the corpus every audit reads. Each non-member carries its set's name (given, else its file's stem)
and members none; the checks refuse too few members or non-members, a near-empty other role, and a patient in two
roles or two non-member sets; results are split per set only where there are two or more."""

import re

import pandas as pd
import pytest

from lmaudit.audit.corpus import audited_set_column, checked_audit_corpus, load_audit_corpus
from lmaudit.config import RoleFile
from lmaudit.data.roles import MEMBER, NONMEMBER, NONMEMBER_SET, POPULATION
from lmaudit.errors import InputError


def write(path, groups: list[str]) -> str:
    """A corpus file of one note per group id given."""
    pd.DataFrame({"sample_id": [f"{path.stem}-{i}" for i in range(len(groups))], "group_id": groups,
                  "text": [f"note {i} of {path.stem}" for i in range(len(groups))]}).to_csv(path, index=False)
    return str(path)


def test_each_non_member_carries_its_sets_name_and_members_none(tmp_path):
    """Sets named as given (--nonmembers NAME=FILE), else by the file's stem; members and the population have no set."""
    files = [RoleFile(MEMBER, write(tmp_path / "train.csv", ["p1", "p2"])),
             RoleFile(NONMEMBER, write(tmp_path / "heldout.csv", ["q1", "q2"])),
             RoleFile(NONMEMBER, write(tmp_path / "other.csv", ["r1", "r2"]), "mimic"),
             RoleFile(POPULATION, write(tmp_path / "public.csv", ["s1", "s2"]))]
    loaded = load_audit_corpus(files)
    sets = dict(zip(loaded["sample_id"], loaded[NONMEMBER_SET].fillna("-"), strict=True))
    assert sets == {"train-0": "-", "train-1": "-", "heldout-0": "heldout", "heldout-1": "heldout",
                    "other-0": "mimic", "other-1": "mimic", "public-0": "-", "public-1": "-"}
    assert audited_set_column(loaded) == [NONMEMBER_SET]


def frame(rows: list[tuple[str, str, str | None]]) -> pd.DataFrame:
    """A loaded corpus of (role, group, non-member set) rows, located in roles.csv."""
    return pd.DataFrame([{"sample_id": f"s{i}", "role": role, "group_id": group, NONMEMBER_SET: set_name,
                          "text": f"note {i}", "source": "roles.csv", "row": i + 2}
                         for i, (role, group, set_name) in enumerate(rows)])


GOOD = [(MEMBER, "p1", None), (MEMBER, "p2", None), (NONMEMBER, "q1", "a"), (NONMEMBER, "q2", "a")]


@pytest.mark.parametrize(("rows", "refusal"), [
    (GOOD[1:], "role 'member' has 1 sample(s); an audit needs at least 2"),
    (GOOD[:3], "role 'nonmember' has 1 sample(s)"),
    ([*GOOD, (POPULATION, "z1", None)], "role 'population' has 1 sample(s)"),
    ([*GOOD, (NONMEMBER, "p1", "a")], "group 'p1' appears in roles member (roles.csv, row 2) and nonmember (roles.csv, row 6)"),
    ([*GOOD, (NONMEMBER, "q1", "b")], "group 'q1' appears in non-member sets a (roles.csv, row 4) and b (roles.csv, row 6)"),
])
def test_a_corpus_no_audit_can_use_is_refused_naming_the_first_problem(rows, refusal):
    """Too few members or non-members, a role given with one sample, a patient in two roles (its member notes would
    make its non-member notes look seen) or in two non-member sets: refused, naming the rows."""
    with pytest.raises(InputError, match=re.escape(refusal)):
        checked_audit_corpus(frame(rows))


def test_a_usable_corpus_is_returned_as_it_is():
    """Disjoint roles and sets, and two or more of each role present: the same table back, nothing dropped."""
    corpus = frame([*GOOD, (NONMEMBER, "r1", "b"), (NONMEMBER, "r2", "b"), (POPULATION, "z1", None),
                    (POPULATION, "z2", None)])
    pd.testing.assert_frame_equal(checked_audit_corpus(corpus), corpus)


def test_results_are_split_per_set_only_with_two_sets_or_more():
    """One set (or no set column) gives one comparison; two sets give one per set."""
    assert audited_set_column(frame(GOOD)) == []
    assert audited_set_column(frame(GOOD).drop(columns=NONMEMBER_SET)) == []
    assert audited_set_column(frame([*GOOD, (NONMEMBER, "r1", "b")])) == [NONMEMBER_SET]
