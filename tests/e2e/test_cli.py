"""The CLI commands do what the README says: synth, train mlm, score, audit from YAML."""

import json

import numpy as np
import pandas as pd

from lmaudit.models.load import load_masked_lm
from lmaudit.signals.mlm import mlm_signal
from lmaudit.signals.settings import SignalSettings
from tests.helpers import invoke


def test_synth_then_train_mlm_gives_a_loadable_safetensors_model(tmp_path):
    invoke("synth", "--out", tmp_path / "notes.csv", "--patients", 4, "--seed", 2)
    notes = pd.read_csv(tmp_path / "notes.csv")
    assert {"sample_id", "group_id", "subgroup_id", "text"} <= set(notes.columns)
    invoke("synth", "--out", tmp_path / "again.jsonl", "--patients", 4, "--seed", 2)
    assert pd.read_json(tmp_path / "again.jsonl", lines=True)["text"].tolist() == notes["text"].tolist()
    invoke("train", "mlm", "--data", tmp_path / "notes.csv", "--out", tmp_path / "model", "--epochs", 1)
    assert (tmp_path / "model" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "model" / "lmaudit_training.json").read_text())["epochs"] == 1
    loaded = load_masked_lm(tmp_path / "model")
    assert loaded.tokenizer.mask_token == "[MASK]"


def test_score_writes_the_signal_per_sample(tiny_model_dirs, notes, tmp_path):
    data = tmp_path / "data.csv"
    notes.head(5).to_csv(data, index=False)
    invoke("score", "--target", tiny_model_dirs[0], "--data", data, "--k", 3, "--seed", 4, "--out", tmp_path / "energy.csv")
    written = pd.read_csv(tmp_path / "energy.csv")
    assert written.columns.tolist() == ["sample_id", "mlm_energy"]
    loaded = load_masked_lm(tiny_model_dirs[0])
    expected, _ = mlm_signal(loaded.model, loaded.tokenizer, notes["text"].head(5).tolist(),
                             notes["sample_id"].head(5).tolist(), SignalSettings(k=3, seed=4))
    np.testing.assert_allclose(written["mlm_energy"].to_numpy(), expected, rtol=1e-6)
    invoke("score", "--target", tiny_model_dirs[0], "--data", data, "--signal", "mlm_pll", "--out", tmp_path / "pll.parquet")
    assert pd.read_parquet(tmp_path / "pll.parquet").columns.tolist() == ["sample_id", "mlm_pll"]


def test_audit_from_yaml_equals_audit_from_options(tiny_model_dirs, notes, tmp_path):
    roles = {"members": notes.iloc[:40], "nonmembers": notes.iloc[40:70], "population": notes.iloc[70:110]}
    # Patients must not cross roles: keep only each role's own groups.
    seen = set()
    for name, frame in roles.items():
        frame = frame[~frame["group_id"].isin(seen)]
        seen |= set(frame["group_id"])
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    target, reference = tiny_model_dirs
    (tmp_path / "audit.yaml").write_text(
        f"target: {target}\nreference: {reference}\nmembers: members.csv\nnonmembers: nonmembers.csv\n"
        "population: population.csv\nout: from-yaml\nsignal: {k: 2}\nevaluation: {bootstrap: 50}\n"
    )
    invoke("audit", "--config", tmp_path / "audit.yaml")
    invoke("audit", "--target", target, "--reference", reference, "--members", tmp_path / "members.csv",
           "--nonmembers", tmp_path / "nonmembers.csv", "--population", tmp_path / "population.csv",
           "--k", 2, "--out", tmp_path / "from-options")
    from_yaml = json.loads((tmp_path / "from-yaml" / "report.json").read_text())
    from_options = json.loads((tmp_path / "from-options" / "report.json").read_text())
    assert [r["auc"] for r in from_yaml["results"]] == [r["auc"] for r in from_options["results"]]
    assert from_yaml["config"]["signal"]["k"] == 2
