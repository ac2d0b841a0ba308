"""No silent overwrite: an audit or a training run refuses, in one line, a folder that holds another run's results
unless --overwrite; the same run again goes on. An interrupted training says that it kept nothing."""

import json

import pytest

from tests.helpers import assert_one_line_error, run_cli


@pytest.fixture
def roles(tmp_path, notes):
    """Members, non-members and population files of the small notes, by patient."""
    patients = sorted(notes["group_id"].unique())
    files = {}
    for role, chosen in (("members", patients[:4]), ("nonmembers", patients[4:8]), ("population", patients[8:])):
        files[role] = tmp_path / f"{role}.csv"
        notes[notes["group_id"].isin(chosen)].to_csv(files[role], index=False)
    return files


def audit(model, roles, out, *extra):
    args = ["audit", "--target", model, "--out", out, "--k", "2", "--bootstrap", "20", *extra]
    for role, path in roles.items():
        args += [f"--{role}", path]
    return run_cli(*args)


def test_an_audit_refuses_another_audits_folder_unless_overwrite(tiny_model_dirs, roles, tmp_path):
    out = tmp_path / "audit"
    assert audit(tiny_model_dirs[0], roles, out)[0] == 0
    first = (out / "report.json").read_text()
    assert audit(tiny_model_dirs[0], roles, out)[0] == 0  # the same audit again: goes on, reusing its signals
    code, output = audit(tiny_model_dirs[1], roles, out)
    assert_one_line_error(code, output, str(out), "holds an audit's report configured otherwise (its target differs)", "--overwrite")
    assert json.loads((out / "report.json").read_text())["config"] == json.loads(first)["config"]  # untouched
    assert audit(tiny_model_dirs[1], roles, out, "--overwrite")[0] == 0
    assert json.loads((out / "report.json").read_text())["config"]["target"] == str(tiny_model_dirs[1])
    code, output = audit(tiny_model_dirs[0], roles, tiny_model_dirs[1])  # a model's folder
    assert_one_line_error(code, output, "holds a model, not an audit's report")


def test_a_training_refuses_a_model_trained_otherwise_unless_overwrite(notes, tmp_path):
    data = tmp_path / "notes.csv"
    notes.head(12).to_csv(data, index=False)
    out = tmp_path / "model"
    train = ["train", "mlm", "--data", data, "--out", out, "--epochs", "1", "--batch-size", "4"]
    assert run_cli(*train)[0] == 0
    assert run_cli(*train)[0] == 0  # the same training again
    code, output = run_cli(*train[:-1], "8")
    assert_one_line_error(code, output, str(out), "holds a model trained otherwise (its batch_size differs)", "--overwrite")
    assert json.loads((out / "lmaudit_training.json").read_text())["batch_size"] == 4
    assert run_cli(*train[:-1], "8", "--overwrite")[0] == 0
    assert json.loads((out / "lmaudit_training.json").read_text())["batch_size"] == 8


def test_an_interrupted_training_does_not_claim_to_resume(notes, tmp_path, monkeypatch):
    import lmaudit.models.train

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lmaudit.models.train, "train_language_model", interrupted)
    notes.head(4).to_csv(tmp_path / "notes.csv", index=False)
    code, output = run_cli("train", "mlm", "--data", tmp_path / "notes.csv", "--out", tmp_path / "model")
    assert code == 130 and "nothing of the training was saved" in output and "resumes" not in output


def test_figures_are_drawn_unless_asked_not_and_a_rerun_may_change_that(tiny_model_dirs, roles, tmp_path):
    """--no-figures: the page holds no image and says why, report.json's results are those of the audit with figures;
    figures are how the page is drawn, not what the audit is, so the rerun that draws them is not refused."""
    out = tmp_path / "audit"
    assert audit(tiny_model_dirs[0], roles, out, "--no-figures")[0] == 0
    page = (out / "report.html").read_text()
    assert "data:image/png" not in page and "No figures on this page" in page
    without = json.loads((out / "report.json").read_text())
    assert audit(tiny_model_dirs[0], roles, out)[0] == 0
    assert "data:image/png" in (out / "report.html").read_text()
    drawn = json.loads((out / "report.json").read_text())
    assert (without["config"]["figures"], drawn["config"]["figures"]) == (False, True)
    assert without["results"] == drawn["results"]
