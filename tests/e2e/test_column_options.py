"""Every command that reads corpus files takes their own column names (--text-column, --id-column, --group-column,
--label-column; the config's `columns:`), and a CSV separated by semicolons or tabs is refused in one line."""

import pandas as pd
import pytest

from tests.helpers import assert_one_line_error, invoke, run_cli

OWN_NAMES = {"text": "note", "sample_id": "note_id", "group_id": "patient", "label": "y"}
OPTIONS = ["--text-column", "note", "--id-column", "note_id", "--group-column", "patient", "--label-column", "y"]


@pytest.fixture
def files(notes, tmp_path):
    """Members and non-members in the notes' own column names, two patients each (their first three notes)."""
    own = notes.assign(label=notes.index % 2).rename(columns=OWN_NAMES)
    patients = own["patient"].unique()
    paths = {}
    for name, chosen in (("members", patients[:2]), ("nonmembers", patients[2:4])):
        paths[name] = tmp_path / f"{name}.csv"
        own[own["patient"].isin(chosen)].groupby("patient").head(3).to_csv(paths[name], index=False)
    return paths


def test_score_reads_the_named_columns(tiny_model_dirs, files, tmp_path):
    """The same texts under lmaudit's names and under the file's own give the same scores, under the file's ids."""
    own = pd.read_csv(files["members"])
    own.rename(columns={v: k for k, v in OWN_NAMES.items()}).to_csv(tmp_path / "plain.csv", index=False)
    invoke("score", "--target", tiny_model_dirs[0], "--data", tmp_path / "plain.csv", "--k", 1, "--out", tmp_path / "plain-scores.csv")
    invoke("score", "--target", tiny_model_dirs[0], "--data", files["members"], *OPTIONS, "--k", 1,
           "--out", tmp_path / "own-scores.csv")
    plain, named = pd.read_csv(tmp_path / "plain-scores.csv"), pd.read_csv(tmp_path / "own-scores.csv")
    assert named["sample_id"].tolist() == own["note_id"].tolist()
    pd.testing.assert_frame_equal(plain, named)


def commands(target, files, out) -> dict[str, list]:
    """Each command that reads corpus files, on the members (and non-members)."""
    members, nonmembers = files["members"], files["nonmembers"]
    pair = ["--target", target, "--members", members, "--nonmembers", nonmembers, "--out", out]
    return {
        "score": ["score", "--target", target, "--data", members, "--out", out / "scores.csv"],
        "audit": ["audit", *pair],
        "dataset-inference": ["dataset-inference", "--target", target, "--suspect", members, "--validation", nonmembers,
                              "--out", out],
        "extract": ["extract", *pair],
        "reconstruct": ["reconstruct", *pair, "--field", r"bp=(\d+)"],
        "train mlm": ["train", "mlm", "--data", members, "--out", out],
        "train classifier": ["train", "classifier", "--data", members, "--validation", nonmembers, "--out", out],
        "split": ["split", "--data", members, "--out", out],
    }


@pytest.mark.parametrize("command", ["score", "audit", "dataset-inference", "extract", "reconstruct", "train mlm",
                                     "train classifier", "split"])
def test_every_corpus_command_names_a_missing_named_column(tiny_model_dirs, files, tmp_path, command):
    """Refused as the file is read, before any model loads: one line naming the file, the column and its option."""
    args = commands(tiny_model_dirs[0], files, tmp_path / "out")[command]
    assert_one_line_error(*run_cli(*args, "--text-column", "note", "--group-column", "ward"), "members.csv",
                          "no 'ward' column (--group-column", "note_id, patient")
    assert not (tmp_path / "out").exists()


def test_yaml_columns_name_the_groups_of_an_audit(tiny_model_dirs, files, tmp_path):
    """The config's `columns:` reaches the audit: with the patient column named, a patient in both roles is refused
    (unnamed, every note would be its own group); an option given on the command line overrides the file's name."""
    members = pd.read_csv(files["members"])
    crossing = pd.concat([pd.read_csv(files["nonmembers"]), members.head(1).assign(note_id="moved")])
    crossing.to_csv(tmp_path / "crossing.csv", index=False)
    (tmp_path / "audit.yaml").write_text(f"target: {tiny_model_dirs[0]}\nmembers: members.csv\nnonmembers: crossing.csv\n"
                                         "out: out\ncolumns: {text: note, sample_id: note_id, group_id: patient}\n")
    assert_one_line_error(*run_cli("audit", "--config", tmp_path / "audit.yaml"),
                          f"group '{members['patient'][0]}' appears in roles member", "crossing.csv")
    assert_one_line_error(*run_cli("audit", "--config", tmp_path / "audit.yaml", "--text-column", "body"),
                          "members.csv: no 'body' column (--text-column, columns.text in a config)")


@pytest.mark.parametrize(("separator", "named"), [(";", "';'"), ("\t", "tabs")])
def test_a_csv_separated_otherwise_is_refused_in_one_line(tiny_model_dirs, files, tmp_path, separator, named):
    pd.read_csv(files["members"]).to_csv(tmp_path / "exported.csv", index=False, sep=separator)
    code, output = run_cli("score", "--target", tiny_model_dirs[0], "--data", tmp_path / "exported.csv", *OPTIONS,
                           "--out", tmp_path / "scores.csv")
    assert_one_line_error(code, output, "exported.csv: looks separated by", named, "save the file with commas")
    assert not (tmp_path / "scores.csv").exists()
