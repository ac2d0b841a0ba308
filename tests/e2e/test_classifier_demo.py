"""The classifier suite end to end (demo at smoke size, CLI train and audit) and its bad input."""

import json

import pandas as pd
import pytest

from lmaudit.report.tables import CLASSIFIER_ATTACKS
from tests.helpers import (
    assert_document_round_trips,
    assert_one_line_error,
    demo_member_only_terms,
    run_cli,
    terms_written,
    text_terms,
)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("classifier-demo")
    code, output = run_cli("demo", "--suite", "classifier", "--size", "smoke", "--out", out)
    assert code == 0, output
    return out, output


def test_no_output_holds_a_word_or_word_pair_found_only_in_the_members_posts(demo_run):
    """The classifier demo's report folder (all but its inputs, data/ and models/) and terminal hold no word or word
    pair that only the target's training posts have."""
    out, output = demo_run
    terms = demo_member_only_terms(out, trained=("member",))
    assert terms and terms_written(out, terms, skip=("data", "models")) == {}
    assert not text_terms(output) & terms


def test_demo_reports_every_feature_and_attack(demo_run):
    out, output = demo_run
    assert_document_round_trips(out / "report.json")
    report = json.loads((out / "report.json").read_text())
    cells = {(r["signal"], r["attack"]) for r in report["results"] if r["slice"] == "all" and r["attack"] in CLASSIFIER_ATTACKS}
    # Song and Shmatikov's rank histograms read the rank feature only.
    assert cells == {(f, a) for f in ("loss", "mentropy", "rank", "confidence", "correctness") for a in CLASSIFIER_ATTACKS
                     if a != "rank_histogram"} | {("rank", "rank_histogram")}
    for result in (r for r in report["results"] if r["attack"] in CLASSIFIER_ATTACKS):
        assert result["level"] == ("sample" if result["attack"] == "sample_threshold" else "group")
        assert 0.0 <= result["thresholds"][0]["accuracy"] <= 1.0
    target = report["models"]["target"]
    assert target["generalization_gap"] == pytest.approx(target["train_accuracy"] - target["test_accuracy"])
    assert "user_logistic" in output and "generalisation gap" in output
    assert "Features and attacks" in (out / "report.html").read_text()
    whitebox = {(r["attack"], r["signal"], r["level"]) for r in report["results"] if r["attack"].startswith("logistic")}
    assert whitebox == {(a, s, level) for a in ("logistic_split", "logistic_shadow")
                        for s in ("attention_concentration", "gradient_norms") for level in ("sample", "group")}
    # dataset inference per user, from the classifier's own attack scores (none fitted on the audited labels)
    dataset = report["dataset_inference"]
    assert dataset["unit"] == "user" and 0.0 <= dataset["p_value"] <= 1.0
    assert dataset["features"] and not any(name.startswith("logistic_split") for name in dataset["features"])


def test_scores_hold_features_of_both_models_and_no_text(demo_run):
    out, _ = demo_run
    scores = pd.read_parquet(out / "scores.parquet")
    assert "text" not in scores.columns
    assert set(scores["model"]) == {"target", "shadow"}
    assert (scores.loc[scores["model"] == "shadow", "role"].str.startswith("shadow_")).all()
    for column in ("loss", "mentropy", "rank", "confidence", "correctness", "score_sample_threshold_loss"):
        assert column in scores.columns


def test_report_has_the_per_class_analyses(demo_run):
    out, _ = demo_run
    report = json.loads((out / "report.json").read_text())
    per_class = report["per_class"]
    scores = pd.read_parquet(out / "scores.parquet")
    audited = scores[scores["role"].isin(["member", "nonmember"])]
    classes = {c["label"]: c for c in per_class["classes"]}
    assert sorted(classes) == sorted(audited["label"].astype(str).unique())
    assert sum(c["members"] for c in classes.values()) == (audited["role"] == "member").sum()
    assert sum(c["nonmembers"] for c in classes.values()) == (audited["role"] == "nonmember").sum()
    features = ("loss", "mentropy", "rank", "confidence", "correctness")
    assert list(per_class["gap_correlation"]) == list(features)
    for label, rows in audited.groupby(audited["label"].astype(str)):
        gap = (rows.loc[rows["role"] == "member", "correctness"].mean()
               - rows.loc[rows["role"] == "nonmember", "correctness"].mean())
        assert classes[label]["generalization_gap"] == pytest.approx(gap)
        # Algorithm 1 calls a member at score >= 0 (its fixed threshold)
        right = (rows["score_sample_threshold_loss"] >= 0) == (rows["role"] == "member")
        assert classes[label]["attack_accuracy"]["loss"] == pytest.approx(right.mean())
    for feature in features:  # the classes' accuracies, weighted by their size, are the attack's accuracy on all data
        overall = next(r for r in report["results"] if r["attack"] == "sample_threshold" and r["signal"] == feature
                       and r["slice"] == "all")["thresholds"][0]["accuracy"]
        weighted = sum((c["members"] + c["nonmembers"]) * c["attack_accuracy"][feature] for c in classes.values())
        assert weighted / len(audited) == pytest.approx(overall)
    buckets = per_class["entropy_buckets"]
    assert [b["bucket"] for b in buckets] == list(range(1, len(buckets) + 1))
    assert sum(b["users"] for b in buckets) == audited["group_id"].nunique()
    assert [b["mean_entropy_bits"] for b in buckets] == sorted(b["mean_entropy_bits"] for b in buckets)
    assert all(set(b["s2u_accuracy"]) == set(features) for b in buckets)
    html = (out / "report.html").read_text()
    assert "Per class (Shejwalkar et al., Figure 7)" in html and "Users by class entropy (Figure 6)" in html


def test_cli_train_and_audit_reuse_the_demo_data(demo_run, tmp_path):
    out, _ = demo_run
    data = out / "data"
    code, output = run_cli("train", "classifier", "--data", data / "member.parquet", "--validation", data / "validation.parquet",
                       "--architecture", "lstm", "--max-epochs", "3", "--out", tmp_path / "lstm")
    assert code == 0, output
    assert "train accuracy" in output and "validation accuracy" in output
    code, output = run_cli("audit", "--signal", "classifier", "--target", tmp_path / "lstm", "--shadow", out / "models" / "shadow",
                       "--members", data / "member.parquet", "--nonmembers", data / "nonmember.parquet",
                       "--shadow-members", data / "shadow_member.parquet", "--shadow-nonmembers", data / "shadow_nonmember.parquet",
                       "--out", tmp_path / "audit")
    assert code == 0, output
    assert json.loads((tmp_path / "audit" / "report.json").read_text())["models"]["target"]["architecture"] == "lstm"


def audit_args(out, tmp_path, **replaced):
    data = out / "data"
    files = {"members": data / "member.parquet", "nonmembers": data / "nonmember.parquet",
             "shadow-members": data / "shadow_member.parquet", "shadow-nonmembers": data / "shadow_nonmember.parquet"}
    files.update(replaced)
    args = ["audit", "--signal", "classifier", "--target", out / "models" / "target", "--shadow", out / "models" / "shadow",
            "--out", tmp_path / "bad"]
    for option, path in files.items():
        if path is not None:
            args += [f"--{option}", path]
    return args


def rewrite(path, tmp_path, change):
    table = change(pd.read_parquet(path))
    target = tmp_path / f"changed-{path.stem}.csv"
    table.to_csv(target, index=False)
    return target


def test_members_without_label_column(demo_run, tmp_path):
    out, _ = demo_run
    members = rewrite(out / "data" / "member.parquet", tmp_path, lambda t: t.drop(columns="label"))
    assert_one_line_error(*run_cli(*audit_args(out, tmp_path, members=members)), str(members), "no 'label' column")
    assert not (tmp_path / "bad" / "report.json").exists()


def test_label_unknown_to_the_model(demo_run, tmp_path):
    out, _ = demo_run

    def relabel(table):
        table.loc[3, "label"] = "knitting"
        return table

    nonmembers = rewrite(out / "data" / "nonmember.parquet", tmp_path, relabel)
    assert_one_line_error(*run_cli(*audit_args(out, tmp_path, nonmembers=nonmembers)), f"{nonmembers}, row 4", "'knitting'",
                          "not a label of the model")


def test_user_with_one_sample(demo_run, tmp_path):
    out, _ = demo_run

    def lonely(table):
        table.loc[0, "group_id"] = "lonely-user"
        return table

    members = rewrite(out / "data" / "member.parquet", tmp_path, lonely)
    assert_one_line_error(*run_cli(*audit_args(out, tmp_path, members=members)), f"{members}, row 1", "'lonely-user'",
                          "at least 2 samples per user")


def test_missing_shadow_data_or_model(demo_run, tmp_path):
    out, _ = demo_run
    assert_one_line_error(*run_cli(*audit_args(out, tmp_path, **{"shadow-nonmembers": None})), "no shadow_nonmember samples",
                          "--shadow-nonmembers")
    args = audit_args(out, tmp_path)
    position = args.index("--shadow")
    del args[position : position + 2]
    assert_one_line_error(*run_cli(*args), "pass --shadow MODEL")


def test_train_classifier_without_labels(demo_run, tmp_path):
    out, _ = demo_run
    data = rewrite(out / "data" / "member.parquet", tmp_path, lambda t: t.drop(columns="label"))
    assert_one_line_error(*run_cli("train", "classifier", "--data", data, "--validation", out / "data" / "validation.parquet",
                               "--out", tmp_path / "m"), str(data), "no 'label' column")


def test_language_model_refused_as_classifier(demo_run, tiny_model_dirs, tmp_path):
    out, _ = demo_run
    args = audit_args(out, tmp_path)
    args[args.index("--target") + 1] = tiny_model_dirs[0]
    assert_one_line_error(*run_cli(*args), "BertForMaskedLM, not a sequence classifier")


def test_whitebox_needs_a_shadow_of_the_targets_architecture(demo_run, tmp_path):
    out, _ = demo_run
    code, output = run_cli("train", "classifier", "--data", out / "data" / "shadow_member.parquet", "--validation",
                       out / "data" / "validation.parquet", "--architecture", "lstm", "--max-epochs", "1", "--out", tmp_path / "lstm")
    assert code == 0, output
    args = audit_args(out, tmp_path) + ["--whitebox"]
    args[args.index("--shadow") + 1] = tmp_path / "lstm"
    assert_one_line_error(*run_cli(*args), "architecture differs", "model_type bert vs lmaudit-lstm")
