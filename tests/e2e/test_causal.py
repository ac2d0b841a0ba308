"""The causal demo end to end (every language-model attack, ranked), and a masked LM refused for the causal signal."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from lmaudit.attacks.base import TARGET_LOSS
from lmaudit.attacks.registry import attacks_reading
from lmaudit.cli import main
from lmaudit.signals.store import default_cache_dir
from lmaudit.studies.setup import DEMO_SIZES, DemoSize
from tests.helpers import assert_document_round_trips, demo_member_only_terms, terms_written, text_terms


def test_causal_demo_reports_sample_admission_and_patient_level(tmp_path, monkeypatch):
    """Every attack, level and ranking of the causal suite; what it checks holds at any size, so a smaller one than
    smoke (30 patients, 5 epochs) keeps the test fast."""
    import json

    monkeypatch.setitem(DEMO_SIZES, "smoke", DemoSize(patients=30, epochs=5, k=2, bootstrap=50, references=2, neighbours=2))
    result = CliRunner().invoke(main, ["demo", "--suite", "causal", "--size", "smoke", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert_document_round_trips(tmp_path / "report.json")
    assert report["config"]["signal"]["signal"] == "clm_tokens" and len(report["config"]["reference"]) == 2
    # Every sample-level attack on the target's loss ran, and PETAL on its greedy tokens, except lowercase (the demo's
    # tokenizer lowercases), SPV-MIA (a model trained from scratch has no base to build a self-prompt reference on) and
    # token-level InfoRMIA (its KL pass is not asked for: the fine-tune suite asks for it).
    language_model_attacks = {spec.name for spec in attacks_reading(TARGET_LOSS) if spec.level == "sample"}
    ran = {r["attack"] for r in report["results"] if r["level"] == "sample" and r["signal"] == "clm_tokens"}
    assert ran == (language_model_attacks - {"lowercase", "spv_mia", "informia_tokens"}) | {"petal"}
    reasons = {s["attack"]: s["reason"] for s in report["skipped"]}
    assert reasons["lowercase"] == "the target's tokenizer lowercases every text, so lowercasing changes nothing"
    assert "lmaudit train self-prompt" in reasons["spv_mia"]
    assert reasons["informia_tokens"].startswith("not asked for: give --reference-kl")
    assert "gradnorm" in {r["attack"] for r in report["results"]}
    ranked = report["ranking"]["sample"]
    assert [row["auc"] for row in ranked] == sorted((row["auc"] for row in ranked), reverse=True)
    assert {(row["attack"], row["signal"]) for row in ranked} == {
        (r["attack"], r["signal"]) for r in report["results"] if r["level"] == "sample" and r["slice"] == "all"}
    assert all(row["paper"] and set(row["tpr_at_fpr"]) == {"0.01", "0.001"} for row in ranked)
    loss = {r["level"]: r for r in report["results"] if r["attack"] == "loss" and r["slice"] == "all"}
    assert set(loss) == {"sample", "subgroup", "group"}
    for record in loss.values():
        mu = next(t for t in record["thresholds"] if t["rule"] == "mean_member_loss")
        assert mu["advantage"] == pytest.approx(mu["recall"] - mu["fpr"])
    assert np.isfinite([r["auc"] for r in report["results"]]).all()
    assert "Sample, admission and patient level" in (tmp_path / "report.html").read_text()
    # the demo's audit runs extraction: report.json's section agrees with scores.parquet's per-sample matches, and the
    # verdict and the page say what it found
    extraction = report["extraction"]
    assert set(extraction["prefix_lengths"]) == {"4", "8"} and extraction["suffix_tokens"] == 8
    scores = pd.read_parquet(tmp_path / "scores.parquet")
    for prefix, entry in extraction["prefix_lengths"].items():
        assert set(entry["sets"]) == {"same-hospital", "other-hospital"}
        exact = entry["sets"]["same-hospital"]["greedy"]["sample"]["exact"]["member"]
        column = scores.loc[scores["role"] == "member", f"extraction_exact_prefix{prefix}"]
        assert (exact["exposed"], exact["units"]) == (column.eq(True).sum(), column.notna().sum())
    assert "Extraction: from each text's first" in result.output
    assert "Does it give the text back? Extraction" in (tmp_path / "report.html").read_text()
    # extraction output is training text: none of it in any output, the signal store or the terminal
    written = ((tmp_path / "report.json").read_text() + (tmp_path / "report.html").read_text() + scores.to_csv()
               + result.output + "".join(part.read_bytes().decode("latin-1")
                                         for part in default_cache_dir(tmp_path).rglob("part-*.parquet")))
    audited = pd.concat([pd.read_parquet(path) for path in (tmp_path / "data").glob("*member*.parquet")])["text"]
    assert len(audited) and not any(text in written for text in audited)
    # nor any word or word pair that only the training texts have, in any file of the report folder or the terminal
    terms = demo_member_only_terms(tmp_path)
    assert terms and terms_written(tmp_path, terms, skip=("data", "models")) == {}
    assert not text_terms(result.output) & terms


def test_masked_lm_refused_for_the_causal_signal(tiny_model_dirs, notes, tmp_path):
    notes.head(3).to_csv(tmp_path / "d.csv", index=False)
    result = CliRunner().invoke(main, ["score", "--target", str(tiny_model_dirs[0]), "--data", str(tmp_path / "d.csv"),
                                       "--signal", "clm_loss", "--out", str(tmp_path / "o.csv")])
    assert result.exit_code == 2 and "not a causal LM" in result.output
