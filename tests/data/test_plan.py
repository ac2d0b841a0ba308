"""`lmaudit split`: every sample in exactly one of the three files, each group whole in one, the fractions of the
groups drawn by the seed, a manifest without text, and one-line refusals (an existing folder, bad fractions, too few
groups, a file without text) that write nothing."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lmaudit.data.corpus import load_corpus
from lmaudit.data.plan import MANIFEST, PLAN_FILES, plan_split
from lmaudit.data.synth import generate_notes
from tests.helpers import run_cli


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
    assert manifest["counts"]["nonmember"] == {"samples": len(parts["nonmember"]), "groups": 8}
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
    pd.DataFrame({"note": ["x"]}).to_csv(tmp_path / "bad.csv", index=False)
    code, output = run_cli("split", "--data", tmp_path / "bad.csv", "--out", tmp_path / "bad")
    assert code == 2 and "text" in output and len(output.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()
