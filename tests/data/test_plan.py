"""`lmaudit split`: every sample in exactly one of the three files, each group whole in one, the fractions of the
groups drawn by the seed, a manifest without text, and one-line refusals (an existing folder, bad fractions, too few
groups, a file without text, rows without a group id among rows with one) that write nothing. Rows without a group id
are drawn with their admission and their text, so that the audit accepts every split it writes."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from lmaudit.audit.corpus import load_audit_corpus
from lmaudit.cli import main
from lmaudit.config import RoleFile
from lmaudit.data.corpus import load_corpus
from lmaudit.data.plan import MANIFEST, PLAN_FILES, plan_split
from lmaudit.data.synth import generate_notes
from lmaudit.data.units import drawn_units
from lmaudit.errors import InputError
from tests.helpers import assert_one_line_error, run_cli


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    path = tmp_path_factory.mktemp("split") / "notes.csv"
    generate_notes(40, seed=3).to_csv(path, index=False)
    return path


def test_every_sample_lands_in_one_file_with_its_whole_group_in_the_drawn_fractions(notes, tmp_path):
    manifest = plan_split(notes, tmp_path / "plan", nonmembers=0.2, population=0.1, seed=5)
    source = pd.read_csv(notes)
    parts = {role: pd.read_parquet(tmp_path / "plan" / name) for role, name in PLAN_FILES.items()}
    combined = pd.concat(parts.values())
    assert sorted(combined["sample_id"]) == sorted(source["sample_id"])  # each sample once
    owners = pd.concat([part[["group_id"]].assign(role=role) for role, part in parts.items()]).drop_duplicates()
    assert owners["group_id"].is_unique  # a patient in one file only
    groups = {role: part["group_id"].nunique() for role, part in parts.items()}
    assert (groups["member"], groups["nonmember"], groups["population"]) == (28, 8, 4)  # 70% / 20% / 10% of 40
    assert manifest["counts"]["nonmember"] == {"samples": len(parts["nonmember"]), "groups": 8, "rows_without_group_id": 0}
    assert manifest["ungrouped"] == {"rows": 0, "drawn_as": None, "joined": 0} and manifest["warnings"] == []
    assert plan_split(notes, tmp_path / "again", 0.2, 0.1, seed=5)["counts"] == manifest["counts"]
    assert pd.read_parquet(tmp_path / "again" / "train.parquet").equals(parts["member"])  # the seed decides the draw
    saved = json.loads((tmp_path / "plan" / MANIFEST).read_text())
    assert saved["seed"] == 5 and saved["source"] == "notes.csv" and len(saved["source_sha256"]) == 64
    assert not any(text in (tmp_path / "plan" / MANIFEST).read_text() for text in source["text"])
    for name in PLAN_FILES.values():  # the audit reads the files as they are
        assert len(load_corpus(tmp_path / "plan" / name))


def test_the_command_prints_what_to_train_on_and_the_audit_to_run(notes, tmp_path):
    code, output = run_cli("split", "--data", notes, "--out", tmp_path / "plan")
    assert code == 0 and "train on" in output and "lmaudit audit --target MODEL --members" in output
    assert json.loads((tmp_path / "plan" / MANIFEST).read_text())["fractions"]["nonmember"] == 0.15


@pytest.mark.parametrize(("args", "message"), [
    (["--nonmembers", "0.6", "--population", "0.5"], "together below 1"),
    (["--population", "0"], "--population"),
])
def test_bad_fractions_are_one_line(notes, tmp_path, args, message):
    code, output = run_cli("split", "--data", notes, "--out", tmp_path / "plan", *args)
    assert code == 2 and message in output and len(output.strip().splitlines()) == 1
    assert not (tmp_path / "plan").exists()


def test_refusals_write_nothing(notes, tmp_path):
    (tmp_path / "taken").mkdir()
    code, output = run_cli("split", "--data", notes, "--out", tmp_path / "taken")
    assert code == 2 and "never overwrites" in output
    pd.DataFrame({"text": ["one note", "another"], "group_id": ["a", "a"]}).to_csv(tmp_path / "few.csv", index=False)
    code, output = run_cli("split", "--data", tmp_path / "few.csv", "--out", tmp_path / "few")
    assert code == 2 and "1 groups" in output and "at least 6" in output and not (tmp_path / "few").exists()
    with pytest.raises(InputError, match="--ungrouped drop: use one of refuse, own-group"):  # from Python, unguarded by click
        plan_split(notes, tmp_path / "drop", ungrouped="drop")
    assert not (tmp_path / "drop").exists()
    pd.DataFrame({"note": ["x"]}).to_csv(tmp_path / "bad.csv", index=False)
    code, output = run_cli("split", "--data", tmp_path / "bad.csv", "--out", tmp_path / "bad")
    assert code == 2 and "text" in output and len(output.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()


def split_files(folder) -> dict[str, pd.DataFrame]:
    """The plan's three files, loaded as the audit loads them (every check of data/roles.py applied)."""
    corpus = load_audit_corpus([RoleFile(role, folder / name) for role, name in PLAN_FILES.items()])
    return {role: corpus[corpus["role"] == role] for role in PLAN_FILES}


@pytest.fixture(scope="module")
def orphans(tmp_path_factory, notes):
    """The notes with every 7th row's group_id blanked: the trial's file, whose orphan rows each became a patient."""
    table = pd.read_csv(notes)
    table.loc[::7, "group_id"] = None
    path = tmp_path_factory.mktemp("orphans") / "orphans.csv"
    table.to_csv(path, index=False)
    return path


def test_rows_without_a_group_id_among_rows_with_one_are_refused_in_one_line(orphans, tmp_path):
    code, output = run_cli("split", "--data", orphans, "--out", tmp_path / "plan")
    missing = int(pd.read_csv(orphans)["group_id"].isna().sum())
    assert_one_line_error(code, output, "orphans.csv, row 1: no group_id", f"{missing} of the", "fill in the group_id",
                          "--ungrouped own-group")
    assert not (tmp_path / "plan").exists()


def test_own_group_keeps_every_patient_and_admission_in_one_file_and_warns(orphans, tmp_path):
    """The orphans carry their admission's id, so each is drawn with its patient: no patient lands in two files (the
    trial's split put 110 patients in both train and nonmembers), the audit accepts the files, and the warning is shown
    without -v and kept in split.json."""
    result = CliRunner().invoke(main, ["split", "--data", str(orphans), "--out", str(tmp_path / "plan"),
                                       "--ungrouped", "own-group"])
    assert result.exit_code == 0, result.output
    assert "warning: " in result.output and "drawn as groups of their own (--ungrouped own-group)" in result.output
    parts = split_files(tmp_path / "plan")
    source = pd.read_csv(orphans)
    patients = source.groupby("subgroup_id")["group_id"].first()  # every admission has a row with the patient's id
    owners = pd.concat([part.assign(patient=part["subgroup_id"].map(patients))[["patient", "role"]]
                        for part in parts.values()]).drop_duplicates()
    assert owners["patient"].is_unique
    manifest = json.loads((tmp_path / "plan" / MANIFEST).read_text())
    missing = int(source["group_id"].isna().sum())
    assert manifest["ungrouped"] == {"rows": missing, "drawn_as": "own-group", "joined": missing}
    assert sum(count["rows_without_group_id"] for count in manifest["counts"].values()) == missing
    assert manifest["warnings"] == [line.split("warning: ", 1)[1] for line in result.output.splitlines() if "warning" in line]


def test_a_file_without_group_ids_splits_by_row_with_a_warning(notes, tmp_path):
    table = pd.read_csv(notes).drop(columns=["group_id", "subgroup_id"])
    table.loc[len(table)] = {**table.iloc[0], "sample_id": "copy-of-first"}  # one text twice: drawn together
    table.to_csv(tmp_path / "rows.csv", index=False)
    manifest = plan_split(tmp_path / "rows.csv", tmp_path / "plan")
    assert manifest["ungrouped"]["drawn_as"] == "rows" and "no row of" in manifest["warnings"][0]
    assert "every row was drawn alone, or with the rows of its exact text" in manifest["warnings"][0]
    parts = split_files(tmp_path / "plan")  # the audit would refuse a text in two roles without a writer behind it
    assert sum(len(part) for part in parts.values()) == len(table)
    assert sum(table["text"].iloc[0] in set(part["text"]) for part in parts.values()) == 1


def test_units_join_a_row_to_its_admission_and_its_text_unless_two_writers_hold_it():
    table = pd.DataFrame({
        "sample_id": ["p1a", "p1b", "p2a", "p3a", "o1", "o2", "o3", "p2"],
        "group_id": ["p1", "p1", "p2", "p3", None, None, None, None],
        "subgroup_id": ["p1-A1", "p1-A1", "p2-A1", "p3-A1", "p1-A1", None, None, None],
        "text": ["one", "two", "boiler", "boiler", "three", "two", "boiler", "lonely"]})
    assert drawn_units(table).tolist() == [
        "group:p1", "group:p1", "group:p2", "group:p3",
        "group:p1",  # its admission is p1's
        "group:p1",  # its text is p1's alone
        "row:o3",    # two patients wrote its text: boilerplate, drawn alone
        "row:p2"]    # a sample id equal to a group id is still its own unit


def test_an_admission_given_to_two_patients_is_refused():
    table = pd.DataFrame({"sample_id": ["a", "b"], "group_id": ["p1", "p2"], "subgroup_id": ["A1", "A1"],
                          "text": ["x", "y"], "source": "notes.csv", "row": [1, 2]})
    with pytest.raises(InputError, match="notes.csv, row 2: admission \\(subgroup_id\\) 'A1' is of group 'p2', but "
                                         "notes.csv, row 1 gives it to 'p1'"):
        drawn_units(table)
