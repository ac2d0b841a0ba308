"""The classifier paper's ablation studies (Shejwalkar et al., Appendix C): the runs' mean and spread and the direction
of effect against hand computations, what the tokenizer alone leaks against a hand-made case, every study's plan, and
end to end through the command line on a size smaller than smoke (users 48, 2 epochs, 2 runs)."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from lmaudit.data.users import generate_user_posts
from lmaudit.models.tokenizer import train_tokenizer
from lmaudit.models.training_file import read_training_summary
from lmaudit.studies import classifier_ablations
from lmaudit.studies.classifier_ablations import (
    ABLATIONS,
    RUNS,
    TOKENIZER_ALONE,
    direction_of_effect,
    mean_over_runs,
    tokenizer_alone_auc,
    whole_word_shares,
)
from lmaudit.studies.registry import STUDIES, study_spec
from lmaudit.studies.setup import CLASSIFIER_DEMO_SIZES, DEMO_SIZES, ClassifierDemoSize, DemoSize
from tests.helpers import invoke


def test_whole_word_shares_hand_made():
    texts = ["apple apple banana", "apple cherry"]
    word = train_tokenizer(texts, vocab_size=5 + 2, tokenization="word")  # [PAD] [UNK] [CLS] [SEP] [MASK] apple banana
    # "cherry" is [UNK] under the word-level tokenizer; an empty text has no words.
    assert whole_word_shares(word, ["apple banana", "apple cherry", "cherry", ""]).tolist() == [1.0, 0.5, 0.0, 0.0]
    assert word("apple cherry")["input_ids"][1:-1] == [word.convert_tokens_to_ids("apple"), word.unk_token_id]
    # WordPiece keeps every character, so "cherry" is cut into pieces rather than dropped: not whole either.
    pieces = train_tokenizer(texts, vocab_size=26, tokenization="wordpiece")  # 5 special, 2 x 10 characters, apple
    assert "cherry" not in pieces.get_vocab() and len(pieces.tokenize("cherry")) > 1
    assert whole_word_shares(pieces, ["apple cherry"]).tolist() == [0.5]


def test_tokenizer_alone_tells_members_apart_when_fitted_on_them():
    """A tokenizer fitted on the members' posts keeps their personal words whole and not the non-members': it tells
    members from non-members with no model at all; one fitted on other users' posts does not favour the members."""
    posts = generate_user_posts(40, seed=3)
    users = sorted(posts["group_id"].unique())
    posts["role"] = np.where(posts["group_id"].isin(users[:20]), "member", "nonmember")
    members = posts.loc[posts["role"] == "member", "text"].tolist()
    fitted_on_members = train_tokenizer(members, vocab_size=4000, tokenization="word")
    assert tokenizer_alone_auc(fitted_on_members, posts, "group") == 1.0
    assert tokenizer_alone_auc(fitted_on_members, posts, "sample") > 0.8
    others = generate_user_posts(20, seed=4)["text"].tolist()
    assert tokenizer_alone_auc(train_tokenizer(others, vocab_size=4000, tokenization="word"), posts, "group") < 0.7


def record(value, run, measured, aucs):
    return {"settings": {"classes": value, "run": run}, "measured": measured,
            "results": [{"attack": attack, "level": level, "auc": auc} for (attack, level), auc in aucs.items()]}


SAMPLE, USER = ("sample_threshold", "sample"), ("sample_to_user", "group")


def test_mean_over_runs_and_direction_of_effect_hand_computed():
    records = [record(2, 0, {"gap": 0.1}, {SAMPLE: 0.6, USER: 0.7}), record(2, 1, {"gap": 0.3}, {SAMPLE: 0.8, USER: 0.7}),
               record(4, 0, {"gap": 0.2}, {SAMPLE: 0.5, USER: 0.9}), record(8, 0, {"gap": 0.4}, {SAMPLE: 0.55, USER: 0.95})]
    means = mean_over_runs(records, "classes")
    assert list(means) == ["2", "4", "8"]
    assert means["2"]["runs"] == 2 and means["2"]["gap"] == pytest.approx(0.2)
    assert means["2"]["gap sd"] == pytest.approx(np.sqrt(0.02))  # (0.1 - 0.2)^2 + (0.3 - 0.2)^2, over n - 1 = 1
    assert means["2"]["sample_threshold sample AUC"] == pytest.approx(0.7)
    assert means["4"]["gap sd"] is None  # one run: no spread
    rows = direction_of_effect(means, {SAMPLE: "rises", USER: "rises"})
    # Sample level: 0.7 -> 0.5 -> 0.55: falls from the smallest to the largest value; ranks (3, 1, 2): rho -0.5.
    assert rows["sample_threshold sample"] == {"AUC at the smallest": pytest.approx(0.7), "AUC at the largest": 0.55,
                                               "Spearman rho": pytest.approx(-0.5), "lmaudit": "falls",
                                               "the paper": "rises", "agrees": "no"}
    assert rows["sample_to_user group"]["Spearman rho"] == pytest.approx(1.0)
    assert rows["sample_to_user group"]["agrees"] == "yes"
    assert "rank_histogram group" not in rows  # not run in these records


def test_every_ablation_is_a_registered_study_with_runs_of_each_value(tmp_path):
    names = {"samples-per-user", "users", "classes", "tokenizer", "max-length", "architecture"}
    assert names <= {spec.name for spec in STUDIES} and set(ABLATIONS) == names
    for name in names:
        for size in ("smoke", "full"):
            plan = study_spec(name).plan(tmp_path / name, size, 0, False)  # planning trains and writes nothing
            variants = ABLATIONS[name].variants[size]
            assert len(plan.cells) == RUNS * len(variants) == len({cell.name for cell in plan.cells})
            assert {cell.settings["run"] for cell in plan.cells} == set(range(RUNS))
            assert plan.x == ABLATIONS[name].setting
    assert not any((tmp_path / name).exists() for name in names)


@pytest.fixture
def tiny_sizes(monkeypatch):
    monkeypatch.setitem(CLASSIFIER_DEMO_SIZES, "smoke", ClassifierDemoSize(users=48, max_epochs=2, bootstrap=20))
    monkeypatch.setitem(DEMO_SIZES, "smoke", DemoSize(patients=24, epochs=2, k=2, bootstrap=20, references=1, neighbours=2))
    monkeypatch.setattr(classifier_ablations, "RUNS", 2)


def test_classes_study_end_to_end(tmp_path, tiny_sizes, monkeypatch):
    smoke = ABLATIONS["classes"].variants["smoke"][:2]  # 2 and 4 classes
    monkeypatch.setitem(ABLATIONS, "classes", replace(ABLATIONS["classes"], variants={"smoke": smoke}))
    output = invoke("study", "classes", "--out", tmp_path)
    study = json.loads((tmp_path / "study.json").read_text())
    assert [c["settings"] for c in study["cells"]] == [{"classes": n, "run": r} for r in (0, 1) for n in (2, 4)]
    for cell in study["cells"]:
        models = tmp_path / "models" / f"{cell['settings']['classes']}-run-{cell['settings']['run']}"
        target, shadow = read_training_summary(models / "target"), read_training_summary(models / "shadow")
        assert len(target.labels) == len(shadow.labels) == cell["settings"]["classes"]
        assert cell["measured"]["test accuracy"] == target.test_accuracy
        assert {"sample_threshold", "sample_to_user", "rank_histogram"} <= {s["attack"] for s in cell["results"]}
    # The values of one run share its users; the runs have different users.
    users = {(n, r): set(pd.read_parquet(tmp_path / "data" / f"{n}-run-{r}" / "member.parquet")["group_id"])
             for n in (2, 4) for r in (0, 1)}
    assert users[(2, 0)] == users[(4, 0)] and users[(2, 0)] != users[(2, 1)]
    means = study["analysis"]["mean and spread over runs"]
    assert list(means) == ["2", "4"] and means["2"]["runs"] == 2
    runs = [c["measured"]["gap"] for c in study["cells"] if c["settings"]["classes"] == 2]
    assert means["2"]["gap"] == pytest.approx(np.mean(runs)) and means["2"]["gap sd"] == pytest.approx(np.std(runs, ddof=1))
    assert set(study["analysis"]["direction of effect"]) >= {"sample_threshold sample", "sample_to_user group"}
    html = (tmp_path / "study.html").read_text()
    assert "mean and spread over runs" in html and "data:image/png;base64" in html
    assert "report: " in output


@pytest.mark.parametrize(("study", "cell", "expected"), [
    ("tokenizer", "word-100-run-0", {"tokenization": "word", "vocab_size": 100, "architecture": "lstm"}),
    ("max-length", "6-run-0", {"max_length": 6}),
    ("architecture", "bert-pretrained-run-0", {"architecture": "bert"}),
])
def test_one_cell_trains_what_its_study_varies(tmp_path, tiny_sizes, study, cell, expected):
    invoke("study", study, "--cells", cell, "--out", tmp_path)
    (record,) = json.loads((tmp_path / "study.json").read_text())["cells"]
    for model in ("target", "shadow"):
        summary = read_training_summary(tmp_path / "models" / cell / model)
        assert {key: getattr(summary, key) for key in expected} == expected
    if study == "architecture":  # fine-tuned from the masked LM pretrained on other users' posts
        assert read_training_summary(tmp_path / "models" / cell / "target").init_from.endswith("pretrained-mlm")
        # Its tokenizer was fitted on other users' posts, not on the members': it tells them apart far less.
        assert record["measured"][TOKENIZER_ALONE] < 0.8
    else:
        assert record["measured"][TOKENIZER_ALONE] > 0.8
