"""The README's command-line examples run as written: each command is read from README.md's code blocks
(tests/readme.py; this file never spells one) and run in a fresh folder, as a user would type it
there, and what the README says it writes is checked.

The quick start as written takes about two minutes (its training on 3,400 notes about 100 s), so its commands run with
the options as written, but the split's files are cut to a few patients after the split writes them (`few_patients`):
the generated notes and the split are as written, the training and the audit read fewer rows. The fine-tune recipe is
tests/e2e/test_readme_finetune.py; "Gate a release" and "Audit inside your training script" are tested where they are
owned (tests/cli/test_gate.py, tests/training/)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from lmaudit.data.corpus import read_table, write_table
from lmaudit.data.roles import split_groups
from lmaudit.data.synth import generate_notes
from lmaudit.data.users import generate_user_posts
from tests.readme import (
    README,
    attacks_of,
    few_patients,
    options_of,
    readme_commands,
    readme_section,
    run,
    scores_rows,
    section_blocks,
    starting,
)

TEXT = README.read_text(encoding="utf-8")


def test_the_first_command_prints_every_command():
    commands = readme_commands(TEXT[:TEXT.index("## Quick start")])
    assert commands == ["lmaudit --help"]
    output = run(commands[0])
    assert all(name in output for name in ("audit", "split", "synth", "train"))


def test_quick_start_as_written_on_fewer_notes(tmp_path, monkeypatch):
    """synth and split as written (300 patients, 70% / 15% / 15% by whole patient), then train and audit as written
    on the split's files cut to 6 + 2 + 2 patients."""
    monkeypatch.chdir(tmp_path)
    synth, split, train, audit = readme_commands(readme_section(TEXT, "Quick start"))
    assert (synth.split()[1], split.split()[1], train.split()[1:3], audit.split()[1]) == (
        "synth", "split", ["train", "clm"], "audit")
    run(synth)
    run(split)
    plan = json.loads(Path("audit-plan/split.json").read_text())
    assert plan["fractions"] == pytest.approx({"member": 0.7, "nonmember": 0.15, "population": 0.15})
    files = {name: read_table(Path("audit-plan") / name) for name in plan["files"].values()}
    assert sum(len(table) for table in files.values()) == len(read_table("notes.csv"))
    assert not set(files["train.parquet"]["group_id"]) & set(files["nonmembers.parquet"]["group_id"])
    for name, patients in (("train.parquet", 6), ("nonmembers.parquet", 2), ("population.parquet", 2)):
        few_patients(Path("audit-plan") / name, patients)
    run(train)
    assert "VERDICT:" in run(audit)
    rows = sum(len(read_table(Path("audit-plan") / name)) for name in plan["files"].values())
    assert scores_rows(Path("report")) == rows  # "report/scores.parquet: one row per text"


def write_notes_roles(roles: dict[str, str], patients: int = 8) -> None:
    """Generated notes split by patient into the files `roles` names (file name -> role), in equal shares."""
    notes = generate_notes(patients, seed=5)
    drawn = notes["group_id"].map(split_groups(notes["group_id"].tolist(), dict.fromkeys(roles, 1.0), seed=5))
    for name in roles:
        write_table(notes.loc[drawn == name, ["sample_id", "group_id", "text"]], name)


def test_audit_your_own_model_as_written(tmp_path, monkeypatch, tiny_model_dirs):
    """The masked-LM audit with a reference, calibration members, per-token values and white-box attacks, on tiny
    BERTs at the README's model paths."""
    monkeypatch.chdir(tmp_path)
    (command,) = starting(section_blocks("What the audit reads")[0], "lmaudit audit")
    options = options_of(command)
    for option, source in (("--target", tiny_model_dirs[0]), ("--reference", tiny_model_dirs[1])):
        shutil.copytree(source, options[option])
    write_notes_roles({options[option]: option for option in ("--members", "--nonmembers", "--population",
                                                               "--calibration-members")})
    run(command)
    # what each option adds: the likelihood ratio (--reference), Min-K%++ (per-token values), the gradient norm
    assert {"likelihood_ratio", "min_k_plus_plus", "gradnorm"} <= attacks_of(Path(options["--out"]))  # (--whitebox)
    assert scores_rows(Path(options["--out"])) == sum(len(read_table(options[o])) for o in
                                                      ("--members", "--nonmembers", "--population", "--calibration-members"))


def test_a_text_classifier_as_written(tmp_path, monkeypatch):
    """The shadow trained as written, the target by the same command on the members, then the audit as written."""
    monkeypatch.chdir(tmp_path)
    train, audit = section_blocks("What the audit reads")[1]
    assert train.startswith("lmaudit train classifier ") and audit.startswith("lmaudit audit ")
    files = [options_of(train)[option] for option in ("--data", "--validation", "--test")]
    files += [options_of(audit)[option] for option in ("--members", "--nonmembers", "--shadow-nonmembers")]
    posts = generate_user_posts(n_users=24, seed=5, n_topics=3)
    drawn = posts["group_id"].map(split_groups(posts["group_id"].tolist(), dict.fromkeys(files, 1.0), seed=5))
    for name in files:
        write_table(posts[drawn == name], name)
    run(train)
    # the target, trained as the shadow is ("a shadow classifier trained the same way"), on the members
    target = train.replace(f"--data {files[0]}", f"--data {files[3]}")
    run(target.replace(f"--out {options_of(train)['--out']}", f"--out {options_of(audit)['--target']}"))
    run(audit)
    out = Path(options_of(audit)["--out"])
    assert {"sample_threshold", "user_logistic"} <= attacks_of(out)  # the shadow's thresholds, sample and user
    assert scores_rows(out) == sum(len(read_table(name)) for name in (files[0], *files[3:]))  # audited and shadow rows


def test_an_audit_from_precomputed_losses_as_written(tmp_path, monkeypatch):
    """`scores.csv` with the columns the README lists; members' losses lower than the reference's, non-members' alike,
    so the likelihood ratio finds the members."""
    monkeypatch.chdir(tmp_path)
    found = re.search(r"\*\*From precomputed losses\.\*\* `(lmaudit [^`]+)`, where `([^`]+)` has", TEXT)
    assert found, "README's 'From precomputed losses' command moved"
    command, path = found.groups()
    roles = ["member"] * 60 + ["nonmember"] * 60 + ["population"] * 60
    shift = [-0.5 if role == "member" else 0.0 for role in roles]
    spread = pd.Series(range(len(roles))).sample(frac=1, random_state=5).to_numpy() / len(roles)  # each text's own
    pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(roles))], "role": roles,
                  "target_loss": 2 + spread + shift, "reference_loss": 2 + spread,
                  "group_id": [f"g{i // 3}" for i in range(len(roles))],
                  "length": 20 + (spread * 30).astype(int)}).to_csv(path, index=False)
    run(command)
    out = Path(options_of(command)["--out"])
    results = json.loads((out / "report.json").read_text())["results"]
    ratio = next(r for r in results if (r["attack"], r["level"], r["slice"]) == ("likelihood_ratio", "sample", "all"))
    assert ratio["auc"] > 0.95 and "loss" in attacks_of(out)
    assert scores_rows(out) == len(roles)
