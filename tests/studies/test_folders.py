"""A demo, a study or a DP sweep writes only into its own folder: absent, empty or an earlier run of the same command;
a model, another command's result or the user's files are refused unless --overwrite, with nothing written."""

from __future__ import annotations

import json

import pytest

from lmaudit.errors import InputError
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.studies.folders import refuse_foreign_folder
from tests.helpers import assert_one_line_error, run_cli

DEMO = ("report.json",)


def test_an_absent_empty_or_own_folder_goes_on(tmp_path):
    refuse_foreign_folder(tmp_path / "absent", "demo", DEMO)
    refuse_foreign_folder(tmp_path, "demo", DEMO)
    (tmp_path / "data").mkdir()  # an interrupted run: its data written, no report yet
    refuse_foreign_folder(tmp_path, "demo", DEMO)
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / "report.html").write_text("")
    refuse_foreign_folder(tmp_path, "demo", DEMO)


@pytest.mark.parametrize("name, fragment", [(SUMMARY_FILE, "holds a model"), ("config.json", "holds a model"),
                                            ("canary_report.json", "holds a canary audit's report"),
                                            ("sweep.json", "holds a DP sweep's table")])
def test_a_model_or_another_commands_result_is_refused(tmp_path, name, fragment):
    (tmp_path / "data").mkdir()
    (tmp_path / name).write_text("{}")
    with pytest.raises(InputError, match=fragment):
        refuse_foreign_folder(tmp_path, "demo", DEMO)
    refuse_foreign_folder(tmp_path, "demo", DEMO, overwrite=True)


def test_the_users_own_files_are_refused_and_named(tmp_path):
    for name in ("notes.csv", "a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("x")
    with pytest.raises(InputError, match=r"did not write \(a.txt, b.txt, c.txt and 1 more\)"):
        refuse_foreign_folder(tmp_path, "study", ("study.json",))


@pytest.mark.parametrize("command", [["demo", "--size", "smoke"], ["study", "epochs"], ["dp-sweep"]])
def test_the_commands_refuse_a_model_folder_before_writing(tmp_path, command):
    """One line, exit 2, and the folder as it was: no data, no models, no lock left."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    before = sorted(path.name for path in tmp_path.iterdir())
    assert_one_line_error(*run_cli(*command, "--out", tmp_path), "holds a model", "--overwrite")
    assert sorted(path.name for path in tmp_path.iterdir()) == before
