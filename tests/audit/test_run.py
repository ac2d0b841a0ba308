"""The orchestrator on fake signals (no model is loaded): which model scores which rows, how signals become attack
inputs, pairing of target and reference, what is skipped and why, and what the output folder holds."""

import json

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks.base import LEVELS, TARGET_LOSS
from lmaudit.attacks.registry import attacks_reading
from lmaudit.audit import run
from lmaudit.config import ROLE_FILE_FIELDS, AuditConfig
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models import tokenizer
from lmaudit.report import build
from lmaudit.signals import compute

ROLES = {"member": "m", "nonmember": "n", "population": "p", "calibration_member": "c",
         "shadow_member": "sm", "shadow_nonmember": "sn"}
MEMBER_LIKE = ("m", "c", "sm")


def write_roles(folder, roles, patients=8, samples=3):
    """One CSV per role; sample ids start with the role's prefix, so the fakes below know who is a member."""
    files = {}
    for role in roles:
        prefix = ROLES[role]
        rows = [{"sample_id": f"{prefix}-{p}-{s}", "group_id": f"{prefix}-{p}", "subgroup_id": f"{prefix}-{p}-a{s % 2}",
                 "text": f"note {p} {s}", "label": "ab"[(p + s) % 2]} for p in range(patients) for s in range(samples)]
        files[role] = folder / f"{role}.csv"
        pd.DataFrame(rows).to_csv(files[role], index=False)
    return files


def member_like(sample_ids) -> np.ndarray:
    return np.array([sample_id.split("-")[0] in MEMBER_LIKE for sample_id in sample_ids])


def difficulty(sample_ids) -> np.ndarray:
    return np.array([(sum(map(ord, sample_id)) % 7) + 1.0 for sample_id in sample_ids])


def fake_frame(sample_ids, values) -> pd.DataFrame:
    """A stored signal's frame; samples are short (15 tokens) or long (25) by the parity of their last digit."""
    lengths = [15 if int(sample_id[-1]) % 2 else 25 for sample_id in sample_ids]
    return pd.DataFrame({"sample_id": sample_ids, "value": list(values), "n_tokens": lengths, "truncated": False})


def fake_model_signals(models, sample_ids, texts, settings, scoring):
    """Target 1 nat below the reference on members; both carry the same sample difficulty."""
    return {name: fake_frame(sample_ids, difficulty(sample_ids) - (name == "target") * member_like(sample_ids))
            for name in models}


def fake_config(folder, labels=("a", "b"), architecture="BertForSequenceClassification") -> str:
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "architectures": [architecture], "model_type": "bert", "hidden_size": 8,
        "num_hidden_layers": 1, "num_attention_heads": 2, "id2label": {str(i): name for i, name in enumerate(labels)}}))
    for name in ("model.safetensors", "tokenizer.json"):  # never loaded: the fakes stand in for scoring
        (folder / name).write_bytes(b"")
    return str(folder)


@pytest.fixture
def calls(monkeypatch):
    """Fake scoring: records which model scored which samples (and with which labels) and returns member-like values."""
    record = []

    def fake_model_signal(model, sample_ids, texts, settings, scoring, label="model", class_labels=None, prefix=None):
        record.append({"model": label, "signal": settings.signal, "ids": list(sample_ids), "labels": class_labels})
        member = member_like(sample_ids)
        if settings.signal == "classifier":  # log-probabilities of labels a, b: members are confident and right
            true = np.array([{"a": 0, "b": 1}[t.split()[-1]] for t in texts])
            confident = np.where(member, 0.95, 0.6)
            probs = np.where(true[:, None] == np.arange(2), confident[:, None], 1 - confident[:, None])
            return fake_frame(sample_ids, np.log(probs))
        rng = np.random.default_rng(len(record))
        return fake_frame(sample_ids, rng.normal(size=(len(sample_ids), 4)) + 2.0 * member[:, None])

    monkeypatch.setattr(tokenizer, "tokenizer_difference", lambda *args, **kwargs: None)  # the fake folders share none
    monkeypatch.setattr(compute, "model_signals", fake_model_signals)
    monkeypatch.setattr(compute, "model_signal", fake_model_signal)
    monkeypatch.setattr(build, "render_html", lambda *args: "<html></html>")  # the page is tested end to end
    return record


def language_model_config(tmp_path, roles=("member", "nonmember", "population", "calibration_member"), **settings):
    files = write_roles(tmp_path, roles)
    return AuditConfig(target=fake_config(tmp_path / "target", architecture="BertForMaskedLM"),
                       reference=fake_config(tmp_path / "reference", architecture="BertForMaskedLM"),
                       out=str(tmp_path / "out"), evaluation={"bootstrap": 20},
                       **{ROLE_FILE_FIELDS[role]: str(path) for role, path in files.items()}, **settings)


def test_language_model_audit_pairs_target_and_reference_of_each_sample(tmp_path, calls):
    report = run.run_audit(language_model_config(tmp_path))
    scores = pd.read_parquet(tmp_path / "out" / "scores.parquet")
    expected = scores["reference_mlm_energy"] - scores["target_mlm_energy"]
    evaluated = scores["role"] != "calibration_member"
    np.testing.assert_array_equal(scores.loc[evaluated, "score_likelihood_ratio"], expected[evaluated])
    assert scores.loc[~evaluated, "score_likelihood_ratio"].isna().all()  # calibration members only calibrate mu
    ran = {(r["attack"], r["level"]) for r in report["results"] if r["slice"] == "all"}
    assert {(attack, level) for attack in ("loss", "likelihood_ratio", "rmia") for level in LEVELS} <= ran
    ratio = next(r for r in report["results"] if r["attack"] == "likelihood_ratio" and r["level"] == "sample")
    assert ratio["auc"] == 1.0
    # Every other language-model attack says in one line why it did not run: one reference, no per-token signal.
    reasons = {s["attack"]: s["reason"] for s in report["skipped"]}
    names = {attack for attack, _ in ran}
    assert names | set(reasons) == {spec.name for spec in attacks_reading(TARGET_LOSS)} and not names & set(reasons)
    assert {"lira", "zlib", "min_k", "dc_pdd", "recall", "neighbourhood"} <= set(reasons)
    assert reasons["lira"].startswith("needs at least 2 reference models")
    assert all("\n" not in reason and "clm_tokens" in reason for attack, reason in reasons.items() if attack != "lira")
    assert not calls  # every signal came through model_signals: no white-box pass was asked for


def test_language_model_audit_without_reference_or_calibration(tmp_path, calls):
    config = language_model_config(tmp_path, roles=("member", "nonmember", "population")).model_copy(
        update={"reference": [], "whitebox": True})
    report = run.run_audit(config)
    skipped = {(s["attack"], s["signal"]): s["reason"] for s in report["skipped"]}
    assert skipped[("likelihood_ratio", "mlm_energy")].startswith("no reference-model signal")
    for signal in ("attention_concentration", "gradient_norms"):
        assert "calibration_member" in skipped[("logistic_calibration", signal)]
    assert not any(r["attack"] == "logistic_shadow" for r in report["results"] + report["skipped"])
    mu_rules = {t["rule"] for r in report["results"] if r["attack"] == "loss" for t in r["thresholds"]}
    assert "mean_member_loss" not in mu_rules
    # The white-box features were computed once per signal, by the target, on every scored sample.
    assert [(c["model"], c["signal"], c["labels"]) for c in calls] == [
        ("target attention_concentration", "attention_concentration", None), ("target gradient_norms", "gradient_norms", None)]
    assert all(len(c["ids"]) == 3 * 8 * 3 for c in calls)


def test_classifier_audit_scores_each_side_with_its_own_model(tmp_path, calls):
    files = write_roles(tmp_path, ("member", "nonmember", "shadow_member", "shadow_nonmember"))
    texts = {role: pd.read_csv(path) for role, path in files.items()}
    for role, table in texts.items():  # the fake classifier reads the true label from the text
        table.assign(text=table["text"] + " " + table["label"]).to_csv(files[role], index=False)
    config = AuditConfig(target=fake_config(tmp_path / "target"), shadow=fake_config(tmp_path / "shadow"),
                         out=str(tmp_path / "out"), signal={"signal": "classifier"}, evaluation={"bootstrap": 20},
                         whitebox=True, **{ROLE_FILE_FIELDS[role]: str(path) for role, path in files.items()})
    report = run.run_audit(config)
    by_model = {(c["model"], c["signal"]): c for c in calls}
    def prefixes(model):
        return {sample_id.split("-")[0] for key, call in by_model.items() if key[0].startswith(model) for sample_id in call["ids"]}

    assert prefixes("target") == {"m", "n"} and prefixes("shadow") == {"sm", "sn"}
    assert set(by_model[("shadow", "classifier")]["ids"]) == set(texts["shadow_member"]["sample_id"]) | set(
        texts["shadow_nonmember"]["sample_id"])
    # Only the gradient depends on the label: its calls carry each sample's label index, the attention's none.
    gradient = by_model[("target gradient_norms", "gradient_norms")]
    expected = [{"a": 0, "b": 1}[label] for label in pd.concat([texts["member"], texts["nonmember"]])["label"]]
    assert gradient["labels"] == expected and by_model[("target attention_concentration", "attention_concentration")]["labels"] is None
    cells = {(r["signal"], r["attack"]) for r in report["results"] if r["slice"] == "all"}
    assert ("loss", "user_logistic") in cells and ("gradient_norms", "logistic_shadow") in cells
    assert not any(r["attack"] in ("loss", "logistic_calibration") and r["signal"] == "mlm_energy" for r in report["results"])
    loss = next(r for r in report["results"] if r["attack"] == "sample_threshold" and r["signal"] == "loss")
    assert loss["auc"] == 1.0  # oriented: a confident right prediction is a member


def test_attack_from_a_scores_file(tmp_path, calls):
    # References a little different per sample: RMIA compares samples pairwise, and equal ratios would all tie.
    rows = [{"sample_id": f"{p}{i}", "role": role, "target_loss": 3.0 - (p == "m") + i % 5,
             "reference_loss": 3.0 + i % 5 + 0.001 * i}
            for p, role in (("m", "member"), ("n", "nonmember"), ("p", "population")) for i in range(20)]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    report = run.run_attack(tmp_path / "scores.csv", tmp_path / "out", EvaluationSettings(bootstrap=20))
    assert {r["attack"]: r["auc"] for r in report["results"] if r["slice"] == "all"
            and r["attack"] in ("loss", "likelihood_ratio", "rmia")} == {
        "loss": pytest.approx(0.68), "likelihood_ratio": 1.0,
        # RMIA: every member beats every population sample (score 1); so does the last non-member (i = 19), a tie
        # with the 20 members: AUC = 1 - 0.5 * 20 / 400.
        "rmia": pytest.approx(0.975)}
    assert {s["level"] for s in report["skipped"] if s["attack"] == "*"} == {"subgroup", "group"}
    assert list(pd.read_parquet(tmp_path / "out" / "scores.parquet").columns[:4]) == ["sample_id", "role", "target_loss",
                                                                                       "reference_loss"]


def test_attack_from_a_scores_file_with_several_references(tmp_path, calls):
    """reference_loss_1, reference_loss_2, ...: the likelihood ratio takes their mean, LiRA needs them all."""
    rng = np.random.default_rng(0)
    rows = []
    for p, role in (("m", "member"), ("n", "nonmember"), ("p", "population")):
        for i in range(20):
            difficulty = rng.uniform(2, 6)
            rows.append({"sample_id": f"{p}{i}", "role": role, "target_loss": difficulty - (p == "m"),
                         "reference_loss_1": difficulty + rng.normal(0, 0.1), "reference_loss_2": difficulty + rng.normal(0, 0.1)})
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    report = run.run_attack(tmp_path / "scores.csv", tmp_path / "out", EvaluationSettings(bootstrap=20))
    aucs = {r["attack"]: r["auc"] for r in report["results"] if r["slice"] == "all"}
    assert aucs["likelihood_ratio"] == aucs["lira"] == aucs["rmia"] == 1.0
    scores = pd.read_parquet(tmp_path / "out" / "scores.parquet")
    expected = (scores["reference_1_loss"] + scores["reference_2_loss"]) / 2 - scores["target_loss"]
    np.testing.assert_allclose(scores["score_likelihood_ratio"], expected)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # an overflow in a figure is a broken figure
def test_huge_losses_and_no_population_still_give_a_full_report_with_a_warning(tmp_path):
    rng = np.random.default_rng(0)
    losses = np.r_[rng.normal(size=98), 1e308, -1e308]
    pd.DataFrame({"sample_id": [f"s{i}" for i in range(100)], "role": ["member", "nonmember"] * 50,
                  "target_loss": losses}).to_csv(tmp_path / "scores.csv", index=False)
    report = run.run_attack(tmp_path / "scores.csv", tmp_path / "out", EvaluationSettings(bootstrap=20))
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"report.json", "report.html", "scores.parquet"}
    assert report["results"][0]["thresholds"] == []
    assert report["results"][0]["unavailable"]["population_threshold_0.1"].startswith("no population samples")
    assert any("no threshold could be calibrated for loss" in w for w in report["warnings"])


def test_losses_spanning_the_whole_float_range_give_a_report_and_a_warning(tmp_path):
    """Losses of +-1e308 (a broken losses file): the report, its page and its histograms are written, and a warning
    says how many scores are that large."""
    losses = np.where(np.random.default_rng(0).random(100) < 0.5, 1e308, -1e308)
    pd.DataFrame({"sample_id": [f"s{i}" for i in range(100)], "role": ["member", "nonmember"] * 50,
                  "target_loss": losses}).to_csv(tmp_path / "scores.csv", index=False)
    report = run.run_attack(tmp_path / "scores.csv", tmp_path / "out", EvaluationSettings(bootstrap=20))
    assert (tmp_path / "out" / "report.html").stat().st_size > 10_000
    assert any(w.startswith("loss on loss: 100 of 100 scores are beyond 1e+150 in size") for w in report["warnings"])
