"""Canary audits end to end on tiny models trained here: a clear bound without DP, near 0 and below the accountant's
epsilon under strong noise, exposure of planted secrets, scores that never read the key, a key other than the one trained
with refused, and a key that never reaches the report, the scores table or the logs."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pandas as pd
import pytest

from lmaudit.canaries.audit import audit_canaries, check_trained_with
from lmaudit.canaries.make import (
    CANARIES_FILE,
    KEY_FILE,
    folder_fingerprint,
    make_canaries,
    plant,
    planted_canaries,
    record_planted,
    reserved_tokens,
)
from lmaudit.canaries.report import PAGE_FILE, REPORT_FILE, SCORES_FILE
from lmaudit.canaries.settings import SecretShape
from lmaudit.config import AuditConfig
from lmaudit.data.synth import generate_notes
from lmaudit.data.users import generate_user_posts
from lmaudit.errors import InputError
from lmaudit.models.recipe import DPSettings, TrainingRecipe
from lmaudit.models.train import train_language_model
from lmaudit.models.training_file import TrainingRecord, read_training_summary
from tests.helpers import assert_one_line_error, run_cli

CANARIES = 200


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A causal LM trained on notes with sample, secret and new-token canaries planted (no DP), the same under strong
    DP-SGD noise, and a reference trained on other patients, with the target's tokenizer."""
    root = tmp_path_factory.mktemp("canaries")
    generate_notes(400, seed=13).to_csv(root / "held.csv", index=False)
    make_canaries(root / "samples", "sample", CANARIES, seed=0, source=root / "held.csv")
    make_canaries(root / "secrets", "secret", CANARIES, seed=1, shape=SecretShape(digits=6))
    make_canaries(root / "new-tokens", "new_token", CANARIES, seed=2)
    notes = generate_notes(40, seed=11)
    # plant refuses a canary already in the notes
    training = plant(plant(plant(notes, root / "samples"), root / "secrets"), root / "new-tokens")
    texts = training["text"].tolist()
    train_language_model("clm", texts, root / "target", TrainingRecipe(
        epochs=20, seed=0, reserved_tokens=reserved_tokens(root / "new-tokens")))
    train_language_model("clm", generate_notes(40, seed=12)["text"].tolist(), root / "reference",
                         TrainingRecipe(tokenizer_dir=root / "target", epochs=20, seed=1))
    train_language_model("clm", texts, root / "dp-target", TrainingRecipe(
        tokenizer_dir=root / "target", epochs=1, seed=0, dp=DPSettings(noise_multiplier=3.0, delta=1e-5)),
                         training["group_id"].tolist())
    for model in ("target", "dp-target"):  # what `train --canaries` records, for one folder; here three are planted
        for folder in ("samples", "secrets", "new-tokens"):
            record_planted(root / model, root / folder)
    return root, len(texts)


def audit(root, target, folder, out, **options):
    # One signal store for every audit of the module: the same model and texts are scored once.
    config = AuditConfig(target=str(root / target), reference=[str(root / "reference")], out=str(root / out),
                         signal={"signal": "clm_loss"}, cache_dir=str(root / "store"))
    return audit_canaries(config, root / folder, candidates=300, **options)


def test_every_planted_canary_was_trained_on(trained):
    root, n_texts = trained
    assert read_training_summary(root / "target").n_samples == n_texts


def test_without_dp_sample_canaries_give_a_clearly_positive_bound(trained):
    root, _ = trained
    result = audit(root, "target", "samples", "audit-samples")
    assert result.report["attack"] == "likelihood_ratio"  # sample canaries with a reference
    assert result.bound.epsilon_lower_bound > 0.5
    assert result.bound.guesses.correct / result.bound.guesses.guesses > 0.8
    assert result.report["accountant"] is None and result.report["verdict"] is None
    assert result.exposure is None  # no exposure for real samples


def test_under_strong_noise_the_bound_is_near_zero_and_below_the_accountants_epsilon(trained):
    root, _ = trained
    for folder in ("samples", "secrets"):
        result = audit(root, "dp-target", folder, f"dp-{folder}")
        accountant = read_training_summary(root / "dp-target").dp
        assert result.bound.delta == accountant.delta == 1e-5  # the bound's delta is the training's
        assert result.bound.epsilon_lower_bound <= 0.1
        assert result.bound.epsilon_lower_bound <= accountant.epsilon_rdp
        assert result.report["verdict"].startswith("consistent")


def test_secret_canaries_are_scored_on_the_secret_alone_with_their_exposure(trained):
    root, _ = trained
    result = audit(root, "target", "secrets", "audit-secrets")
    assert result.report["attack"] == "secret" and result.report["signal"] == "clm_tokens"
    scores = result.scores
    assert len(scores) == CANARIES and scores["exposure_sampled"].between(0, 1e9).all()
    assert (scores["rank_among_candidates"] >= 1).all() and (scores["rank_among_candidates"] <= 301).all()
    exposure = result.exposure
    assert exposure["candidates"] == 300 and exposure["planted"]["secrets"] + exposure["not_planted"]["secrets"] == CANARIES
    # planted secrets are ranked higher among random ones than secrets the model never saw
    assert exposure["planted"]["sampled_median"] > exposure["not_planted"]["sampled_median"]


def test_scores_never_read_the_key(trained):
    root, _ = trained
    flipped = root / "flipped"
    if not flipped.exists():
        shutil.copytree(root / "samples", flipped)
        key = pd.read_parquet(flipped / KEY_FILE)
        key.assign(included=~key["included"]).to_parquet(flipped / KEY_FILE)
        # the same weights, recorded as trained with the turned-over key (an audit refuses a key it was not trained with)
        shutil.copytree(root / "target", root / "flipped-target")
        record_planted(root / "flipped-target", flipped)
    original, other = audit(root, "target", "samples", "keyed"), audit(root, "flipped-target", "flipped", "flipped-out")
    pd.testing.assert_series_equal(original.scores["score"], other.scores["score"])
    # with the key turned over, the same guesses are wrong: no bound
    assert other.bound.epsilon_lower_bound == 0.0 < original.bound.epsilon_lower_bound


def test_new_token_canaries_are_found_best_and_the_vocabulary_holds_every_one(trained):
    root, _ = trained
    from lmaudit.models.tokenizer import load_tokenizer

    tokenizer, tokens = load_tokenizer(root / "target"), reserved_tokens(root / "new-tokens")
    assert len(tokens) == CANARIES and all(len(tokenizer.tokenize(token)) == 1 for token in tokens)  # planted or not
    result = audit(root, "target", "new-tokens", "audit-new-tokens", delta=1e-5)
    samples = audit(root, "target", "samples", "audit-samples-again", delta=1e-5)
    key = pd.read_parquet(root / "new-tokens" / KEY_FILE).set_index("sample_id").loc[result.scores["sample_id"]]
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(key["included"], result.scores["score"]) > 0.95
    assert result.bound.epsilon_lower_bound > samples.bound.epsilon_lower_bound
    assert result.gaussian.epsilon_lower_bound > result.bound.epsilon_lower_bound > 1.0


def test_a_masked_lm_reads_each_secret_token_masked_alone(tmp_path):
    make_canaries(tmp_path / "c", "new_token", 20, seed=3, shape=SecretShape(tokens=2))
    training = plant(generate_notes(5, seed=1), tmp_path / "c")
    train_language_model("mlm", training["text"].tolist(), tmp_path / "mlm", TrainingRecipe(
        epochs=2, seed=0, reserved_tokens=reserved_tokens(tmp_path / "c")))
    record_planted(tmp_path / "mlm", tmp_path / "c")
    result = audit_canaries(AuditConfig(target=str(tmp_path / "mlm"), out=str(tmp_path / "out")), tmp_path / "c",
                            candidates=0)
    assert result.report["signal"] == "mlm_tokens" and result.report["attack"] == "secret"
    assert np.isfinite(result.scores["score"]).all() and (result.scores["loss"] > 0).all()


def test_the_key_and_the_texts_stay_out_of_the_report_the_scores_and_the_logs(trained, caplog):
    root, _ = trained
    with caplog.at_level(logging.DEBUG):
        audit(root, "target", "samples", "private")
    canaries = pd.read_json(root / "samples" / CANARIES_FILE, lines=True)
    report = (root / "private" / REPORT_FILE).read_text() + (root / "private" / PAGE_FILE).read_text()
    explanation = json.loads((root / "private" / REPORT_FILE).read_text())["explanation"]
    assert "epsilon &ge; " in report and "mu &ge; " in report and explanation[:40] in report  # the page, explained
    scores = pd.read_parquet(root / "private" / SCORES_FILE)
    assert not {"included", "role", "text", "label"} & set(scores.columns)
    for sample_id, text in zip(canaries["sample_id"], canaries["text"], strict=True):
        assert sample_id not in report and text not in report and text not in caplog.text
    assert "included" not in report
    json.loads((root / "private" / REPORT_FILE).read_text())  # strict JSON


def test_the_command_line_audits_and_refuses_a_folder_that_is_not_a_canary_folder(trained):
    root, _ = trained
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--reference", root / "reference",
                           "--canaries", root / "samples", "--out", root / "cli", "--signal", "clm_loss")
    assert code == 0 and "epsilon lower bound" in output and "a lower bound" in output
    assert json.loads((root / "cli" / REPORT_FILE).read_text())["one_run"]["canaries"] == CANARIES
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--canaries", root / "secrets",
                           "--out", root / "cli-secrets", "--signal", "clm_loss", "--candidates", "50")
    assert code == 0 and "secret canaries scored by secret (clm_tokens)" in output
    assert "exposure (bits; 19.9 possible, 50 random" in output
    # like an audit, a canary audit refuses another run's report unless --overwrite, and a rerun of its own goes on
    first = (root / "cli-secrets" / REPORT_FILE).read_text()
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--canaries", root / "secrets",
                           "--out", root / "cli-secrets", "--signal", "clm_loss", "--candidates", "40")
    assert_one_line_error(code, output, "holds a canary audit's report configured otherwise (its candidates differs)",
                          "--overwrite")
    assert (root / "cli-secrets" / REPORT_FILE).read_text() == first
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--canaries", root,
                           "--out", root / "cli-bad", "--signal", "clm_loss")
    assert code == 2 and "not a canary folder" in output and len(output.strip().splitlines()) == 1
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--canaries", root / "secrets",
                           "--out", root / "cli-bad", "--signal", "clm_loss", "--attack", "nonsense")
    assert code == 2 and "no such attack" in output and len(output.strip().splitlines()) == 1
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--canaries", root / "samples",
                           "--out", root / "cli-bad", "--attack", "secret")
    assert code == 2 and "no secret to score alone" in output and len(output.strip().splitlines()) == 1
    assert not (root / "cli-bad").exists()


KEY_CHANGES = {  # each a key that differs from the one written with the canaries
    "flipped": lambda key: key.assign(included=key["included"].where(key.index != 0, ~key["included"])),
    "removed": lambda key: key.iloc[1:],
    "added": lambda key: pd.concat([key, pd.DataFrame({"sample_id": ["canary-9999"], "included": [True]})],
                                   ignore_index=True),
    "renamed": lambda key: key.assign(sample_id=key["sample_id"].str.upper()),
}


@pytest.mark.parametrize("change", sorted(KEY_CHANGES))
def test_an_audit_refuses_a_key_other_than_the_one_trained_with_in_one_line_and_writes_nothing(trained, change):
    root, _ = trained
    folder = root / f"key-{change}"
    shutil.copytree(root / "samples", folder)  # the canaries.jsonl the model was trained with
    KEY_CHANGES[change](pd.read_parquet(folder / KEY_FILE)).to_parquet(folder / KEY_FILE)
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--canaries", folder,
                           "--out", root / f"key-{change}-audit", "--signal", "clm_loss")
    assert_one_line_error(code, output, str(folder / KEY_FILE), "not the key", "make the canaries again")
    assert not (root / f"key-{change}-audit").exists()


def test_an_unchanged_key_audits_however_its_parquet_bytes_are_written(trained):
    root, _ = trained
    folder = root / "rewritten"
    if not folder.exists():
        shutil.copytree(root / "samples", folder)
        pd.read_parquet(folder / KEY_FILE).to_parquet(folder / KEY_FILE, compression="gzip")
    assert (folder / KEY_FILE).read_bytes() != (root / "samples" / KEY_FILE).read_bytes()
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--reference", root / "reference",
                           "--canaries", folder, "--out", root / "rewritten-audit", "--signal", "clm_loss")
    assert code == 0 and "epsilon lower bound" in output, output


def test_a_model_that_records_its_canaries_but_not_their_key_is_refused_in_one_line(tmp_path):
    make_canaries(tmp_path / "c", "secret", 10, seed=0)
    summary = TrainingRecord(canaries=[{"design": "secret", "planted": 5, "folder_fingerprint": folder_fingerprint(tmp_path / "c")}])
    with pytest.raises(InputError, match="key.parquet: model records these canaries but not their key's") as refused:
        check_trained_with(summary, "model", tmp_path / "c")
    assert "train it again with --canaries" in str(refused.value) and "\n" not in str(refused.value)


def test_classifier_canaries_are_scored_by_the_classifiers_loss_mislabelled_ones_at_their_wrong_label(tmp_path):
    from lmaudit.models.classifier import ClassifierData, train_classifier

    posts = generate_user_posts(60, seed=5)
    generate_user_posts(60, seed=6).to_csv(tmp_path / "held.csv", index=False)
    generate_user_posts(60, seed=7).to_csv(tmp_path / "held-too.csv", index=False)
    make_canaries(tmp_path / "canaries", "sample", 40, seed=0, source=tmp_path / "held.csv")
    make_canaries(tmp_path / "mislabelled", "mislabelled", 40, seed=1, source=tmp_path / "held-too.csv")
    planted = pd.concat([planted_canaries(tmp_path / "canaries"), planted_canaries(tmp_path / "mislabelled")])
    users = sorted(posts["group_id"].unique())
    train = posts[posts["group_id"].isin(users[:48])]
    validation = posts[~posts["group_id"].isin(users[:48])]
    data = ClassifierData(train["text"].tolist() + planted["text"].tolist(),
                          train["label"].tolist() + planted["label"].tolist(),
                          (validation["text"].tolist(), validation["label"].tolist()))
    train_classifier(data, tmp_path / "model", TrainingRecipe(epochs=4, patience=4, seed=0))
    for folder in ("canaries", "mislabelled"):
        record_planted(tmp_path / "model", tmp_path / folder)
    config = AuditConfig(target=str(tmp_path / "model"), out=str(tmp_path / "audit"), signal={"signal": "classifier"})
    result = audit_canaries(config, tmp_path / "canaries")
    assert result.report["attack"] == "loss" and result.report["signal"] == "classifier"
    assert result.bound.guesses.canaries == 40
    assert result.scores["loss"].gt(0).all()  # cross-entropy of each canary's own label (nats)
    np.testing.assert_allclose(result.scores["score"], -result.scores["loss"])  # higher = more likely planted
    wrong = audit_canaries(config.model_copy(update={"out": str(tmp_path / "audit-wrong")}), tmp_path / "mislabelled")

    def not_planted(audit, folder):
        key = pd.read_parquet(tmp_path / folder / KEY_FILE).set_index("sample_id")["included"]
        return audit.scores.loc[~key.loc[audit.scores["sample_id"]].to_numpy(), "loss"]

    # scored at the wrong label: posts the model never saw get their own topic more than another (it is better than
    # chance), so their losses at a wrong label are higher than other posts' at their own
    assert not_planted(wrong, "mislabelled").median() > not_planted(result, "canaries").median()
    pd.DataFrame({"text": [f"a post about nothing {i}" for i in range(5)], "label": "nonsense"}).to_csv(
        tmp_path / "odd.csv", index=False)
    make_canaries(tmp_path / "odd", "sample", 5, seed=0, source=tmp_path / "odd.csv")
    record_planted(tmp_path / "model", tmp_path / "odd")  # as if planted too: the labels are what is refused
    with pytest.raises(InputError, match="canaries.jsonl, row 1: label 'nonsense' is not a label of the model"):
        audit_canaries(config.model_copy(update={"out": str(tmp_path / "odd-audit")}), tmp_path / "odd")


def test_scores_that_run_against_the_key_make_an_invalid_audit_never_worded_chance(trained, monkeypatch):
    """The new-token canaries' scores turned around (as lost output rows or a negated score would): the command prints
    INVALID first, with the rank test's probability, and never that chance explains it; the report and page say so."""
    from lmaudit.canaries import audit as canary_audit
    from lmaudit.metrics.one_run import provable_ceiling

    root, _ = trained
    scored = canary_audit.secret_scores

    def negated(*args):
        table, candidates = scored(*args)
        return table.assign(score=-table["score"]), candidates

    monkeypatch.setattr(canary_audit, "secret_scores", negated)
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--canaries", root / "new-tokens",
                           "--out", root / "cli-invalid", "--candidates", "0")
    assert code == 0, output
    assert output.startswith("INVALID AUDIT: the planted canaries score below the unplanted ones")
    assert "chance gives often enough" not in output and "INVALID audit: the planted canaries score below" in output
    report = json.loads((root / "cli-invalid" / REPORT_FILE).read_text())
    assert not report["validity"]["valid"] and report["validity"]["p_below"] < 1e-3
    assert report["validity"]["rank_auc"] < 0.05 and report["one_run"]["epsilon_lower_bound"] == 0
    assert "INVALID audit" in (root / "cli-invalid" / PAGE_FILE).read_text()
    monkeypatch.setattr(canary_audit, "secret_scores", scored)
    code, output = run_cli("canaries", "audit", "--target", root / "target", "--canaries", root / "new-tokens",
                           "--out", root / "cli-valid", "--candidates", "0")
    assert code == 0 and "INVALID" not in output
    assert f"With {CANARIES} canaries no audit can prove more than epsilon {provable_ceiling(CANARIES, 1e-5):.2f}" in output
