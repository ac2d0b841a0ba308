"""One record in one role: a text in two roles (or two non-member sets) is refused unless the ids show two writers of it
(two group ids, or for rows without one, two admissions), and an admission (subgroup_id) in two roles is refused, in
one line naming both files and rows, before any model runs."""

from __future__ import annotations

import pandas as pd
import pytest

from lmaudit.audit.corpus import load_audit_corpus
from lmaudit.config import RoleFile
from lmaudit.data.roles import NONMEMBER_SET, check_audit_roles, writers
from lmaudit.errors import InputError


def corpus(rows: list[dict]) -> pd.DataFrame:
    """A loaded corpus's columns from rows of role, text and optionally group_id and subgroup_id."""
    frame = pd.DataFrame(rows)
    for column in ("group_id", "subgroup_id"):
        frame[column] = frame[column] if column in frame else None
    return frame.assign(sample_id=[f"s{i}" for i in range(len(frame))], source=frame["role"] + ".csv",
                        row=frame.groupby("role").cumcount() + 1)


AUDITED = [{"role": "member", "text": "m one"}, {"role": "member", "text": "m two"},
           {"role": "nonmember", "text": "n one"}, {"role": "nonmember", "text": "n two"}]


@pytest.mark.parametrize("role", ["nonmember", "population", "calibration_member"])
def test_a_members_text_in_another_role_without_two_writers_is_refused(role):
    rows = [*AUDITED, {"role": role, "text": "m  two\n"}, {"role": role, "text": "other"}]  # whitespace aside, the same
    with pytest.raises(InputError) as error:
        check_audit_roles(corpus(rows), [role] if role != "nonmember" else [])
    message = str(error.value)
    row = 3 if role == "nonmember" else 1
    assert f"{role}.csv, row {row} ({role}) has the same text as member.csv, row 2 (member)" in message
    assert "meaningless" in message and "two writers" in message and "\n" not in message


def test_the_count_names_every_text_in_two_roles():
    rows = [*AUDITED, *({"role": "population", "text": text} for text in ("m one", "m two", "n one", "fresh"))]
    with pytest.raises(InputError, match=r"and so do 2 other texts \(3 in all\)"):
        check_audit_roles(corpus(rows), ["population"])


def test_boilerplate_two_patients_wrote_may_be_in_two_roles():
    """Two group ids (disjoint by role) behind a text: two people wrote it, as a template sentence; accepted."""
    rows = [{**row, "group_id": f"g{i}"} for i, row in enumerate(AUDITED)]
    rows += [{"role": "nonmember", "text": "m one", "group_id": "g3"}]
    check_audit_roles(corpus(rows))
    with pytest.raises(InputError, match="has the same text"):  # one writer only: the member's
        check_audit_roles(corpus([*rows[:-1], {"role": "nonmember", "text": "m one"}]))


def test_writers_are_groups_else_admissions_else_unknown():
    frame = corpus([{"role": "member", "text": "a", "group_id": "p1", "subgroup_id": "p1-a1"},
                    {"role": "member", "text": "b", "subgroup_id": "p1-a1"},  # its admission is p1's
                    {"role": "member", "text": "c", "subgroup_id": "x-a9"},
                    {"role": "member", "text": "d"}])
    assert writers(frame).tolist()[:3] == ["group:p1", "group:p1", "admission:x-a9"] and pd.isna(writers(frame)[3])


def test_two_admissions_without_group_ids_are_two_writers_but_one_admission_is_not():
    rows = [{**row, "subgroup_id": f"a{i}"} for i, row in enumerate(AUDITED)]
    check_audit_roles(corpus([*rows, {"role": "nonmember", "text": "m one", "subgroup_id": "a9"}]))
    with pytest.raises(InputError, match="admission \\(subgroup_id\\) 'a0' appears in roles member"):
        check_audit_roles(corpus([*rows, {"role": "nonmember", "text": "other", "subgroup_id": "a0"}]))


def test_two_nonmember_sets_may_not_share_a_text():
    rows = corpus([*AUDITED, {"role": "nonmember", "text": "n one"}, {"role": "nonmember", "text": "x"}])
    rows[NONMEMBER_SET] = [None, None, "here", "here", "there", "there"]
    with pytest.raises(InputError, match="non-member set 'there'\\) has the same text as .*non-member set 'here'"):
        check_audit_roles(rows)


def test_shadow_roles_are_compared_with_each_other_only():
    shadow = [{"role": "shadow_member", "text": "m one"}, {"role": "shadow_member", "text": "s"},
              {"role": "shadow_nonmember", "text": "t"}, {"role": "shadow_nonmember", "text": "u"}]
    check_audit_roles(corpus([*AUDITED, *shadow]))  # the shadow trained on a target member's text: not the audit's
    with pytest.raises(InputError, match="shadow_nonmember\\) has the same text as .*\\(shadow_member\\)"):
        check_audit_roles(corpus([*AUDITED, *shadow, {"role": "shadow_nonmember", "text": "s"}]))


def test_copies_of_one_file_are_refused_when_the_files_are_loaded(tmp_path):
    """The audit's first step (also `dataset-inference`'s, `extract`'s, `reconstruct`'s): two copies of a file without
    sample ids, and with admission ids, which the admission level used to merge across roles."""
    notes = pd.DataFrame({"text": [f"note {i}" for i in range(6)], "subgroup_id": ["a1", "a1", "a2", "a2", "a3", "a3"]})
    for name in ("a.csv", "b.csv"):
        notes.to_csv(tmp_path / name, index=False)
    with pytest.raises(InputError, match="b.csv, row 1 \\(nonmember\\) has the same text as .*a.csv, row 1 "
                                         "\\(member\\), and so do 5 other texts \\(6 in all\\)"):
        load_audit_corpus([RoleFile("member", tmp_path / "a.csv"), RoleFile("nonmember", tmp_path / "b.csv")])
