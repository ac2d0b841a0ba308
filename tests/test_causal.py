"""Causal-LM loss: equal to the model's own per-sequence loss, whatever the batching and padding."""

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from lmaudit.cli import main
from lmaudit.signals.causal import causal_lm_loss
from lmaudit.signals.mlm import SignalSettings


@pytest.fixture(scope="module")
def tiny_gpt2(tiny_tokenizer):
    from transformers import GPT2LMHeadModel

    from lmaudit.models.train import clm_config

    torch.manual_seed(0)
    return GPT2LMHeadModel(clm_config("tiny", len(tiny_tokenizer), 64, tiny_tokenizer)).eval()


@pytest.mark.parametrize("batch_tokens, position_chunk", [(64, 7), (4096, 2048)])
def test_causal_loss_equals_the_models_own_loss(tiny_gpt2, tiny_tokenizer, notes, batch_tokens, position_chunk):
    texts, ids = notes["text"].tolist()[:10], notes["sample_id"].tolist()[:10]
    values, encoded = causal_lm_loss(tiny_gpt2, tiny_tokenizer, texts, ids, SignalSettings(signal="clm_loss", max_length=64),
                                     batch_tokens, position_chunk)
    for text, value in zip(texts, values, strict=True):
        input_ids = tiny_tokenizer(text, truncation=True, max_length=64, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            expected = tiny_gpt2(input_ids=input_ids, labels=input_ids).loss.item()
        assert value == pytest.approx(expected, rel=1e-5)
    assert all(not e.truncated for e in encoded)


def test_causal_demo_reports_sample_admission_and_patient_level(tmp_path):
    import json

    result = CliRunner().invoke(main, ["demo", "--suite", "causal", "--size", "smoke", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["config"]["signal"]["signal"] == "clm_loss"
    loss = {r["level"]: r for r in report["results"] if r["attack"] == "loss" and r["slice"] == "all"}
    assert set(loss) == {"sample", "subgroup", "group"}
    for record in loss.values():
        mu = next(t for t in record["thresholds"] if t["rule"] == "mean_member_loss")
        assert mu["advantage"] == pytest.approx(mu["recall"] - mu["fpr"])
    assert np.isfinite([r["auc"] for r in report["results"]]).all()
    assert "Sample, admission and patient level" in (tmp_path / "report.html").read_text()


def test_masked_lm_refused_for_the_causal_signal(tiny_model_dirs, notes, tmp_path):
    notes.head(3).to_csv(tmp_path / "d.csv", index=False)
    result = CliRunner().invoke(main, ["score", "--model", str(tiny_model_dirs[0]), "--data", str(tmp_path / "d.csv"),
                                       "--signal", "clm_loss", "--out", str(tmp_path / "o.csv")])
    assert result.exit_code == 2 and "not a causal LM" in result.output
