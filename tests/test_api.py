"""The Python API gives the same results as the command line from the same data, typed; its documented examples run;
bad DataFrames are refused naming the row."""

import doctest
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lmaudit.api import audit_losses, audit_texts
from lmaudit.audit.run import run_attack, run_audit
from lmaudit.config import AuditConfig
from lmaudit.errors import InputError
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.strict_json import json_ready

DOCS = Path(__file__).parents[1] / "docs" / "api.md"


def test_the_documented_examples_run_and_print_what_the_page_says():
    outcome = doctest.testfile(str(DOCS), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert outcome.attempted >= 10 and outcome.failed == 0


def losses_frame(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(3 * n)],
        "role": ["member"] * n + ["nonmember"] * n + ["population"] * n,
        "group_id": [f"p{i // 3}" for i in range(3 * n)],
        "target_loss": np.r_[rng.normal(2.7, 0.5, n), rng.normal(3.0, 0.5, 2 * n)],
        "reference_loss": rng.normal(3.0, 0.5, 3 * n),
        "length": rng.integers(5, 80, 3 * n),
    })


def test_audit_losses_equals_the_command_lines_audit_of_the_same_file(tmp_path):
    frame = losses_frame()
    frame.to_csv(tmp_path / "scores.csv", index=False)
    from_file = run_attack(tmp_path / "scores.csv", tmp_path / "cli", EvaluationSettings(bootstrap=50))
    results = audit_losses(frame, bootstrap=50)
    assert results.out is None  # a temporary folder, removed
    assert json.dumps(json_ready(results.report)["results"]) == json.dumps(from_file["results"])
    assert results.verdict.risk == from_file["summary"]["risk"] and results.report.summary is results.verdict
    assert json_ready(results.verdict) == from_file["summary"]
    assert results.result("loss", "group").n_members == 20
    table = results.table()
    assert len(table) == len(results.results) and set(table["slice"]) == {"all", *{r.slice for r in results.results}}
    assert table.loc[0, "auc"] == results.results[0].auc
    with pytest.raises(KeyError, match="no result for attack 'lira'"):
        results.result("lira")
    kept = audit_losses(frame, out=tmp_path / "kept", bootstrap=50)
    assert kept.out == tmp_path / "kept" and (tmp_path / "kept" / "report.html").is_file()


def test_bad_dataframes_are_refused_naming_the_row():
    frame = losses_frame()
    frame.loc[4, "target_loss"] = np.nan
    with pytest.raises(InputError, match=r"^DataFrame, row 5: target_loss is not a finite number"):
        audit_losses(frame)
    texts = pd.DataFrame({"text": ["a note", " "], "role": ["member", "nonmember"]})
    with pytest.raises(InputError, match=r"^DataFrame, row 2: empty text"):
        audit_texts(texts, target="unused", out="unused")
    with pytest.raises(InputError, match="no column 'site' .*--slice-by site"):
        audit_losses(losses_frame(), slice_by=("site",))


def test_audit_texts_equals_the_command_lines_audit_of_the_same_files(tiny_model_dirs, notes, tmp_path):
    patients = notes["group_id"].drop_duplicates().tolist()
    role_of = {p: ("member", "nonmember", "population")[i % 3] for i, p in enumerate(patients)}
    corpus = notes.assign(role=notes["group_id"].map(role_of))
    corpus.to_csv(tmp_path / "corpus.csv", index=False)
    target, reference = map(str, tiny_model_dirs)
    settings = {"signal": {"k": 2}, "evaluation": {"bootstrap": 20}}
    from_files = run_audit(AuditConfig(target=target, reference=reference, data=str(tmp_path / "corpus.csv"),
                                       out=str(tmp_path / "cli"), **settings))
    results = audit_texts(corpus, target=target, reference=reference, out=tmp_path / "api", **settings)
    assert [(r.attack, r.level, r.slice, r.auc) for r in results.results] == [
        (r["attack"], r["level"], r["slice"], r["auc"]) for r in from_files["results"]]
    assert results.out == tmp_path / "api" and (tmp_path / "api" / "report.json").is_file()
    assert "text" not in results.scores.columns
