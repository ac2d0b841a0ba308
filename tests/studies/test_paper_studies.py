"""The papers' studies end to end through the command line, on a size smaller than smoke (24 patients, 2 epochs): each
cell trains what it studies and audits it; what must not change between cells does not."""

import json
from dataclasses import replace

import pandas as pd
import pytest

from lmaudit.models.trained import checkpoint_folder
from lmaudit.models.training_file import read_training_summary
from lmaudit.studies.setup import CLASSIFIER_DEMO_SIZES, DEMO_SIZES, ClassifierDemoSize, DemoSize
from tests.helpers import assert_one_line_error, invoke, run_cli

TINY = DemoSize(patients=24, epochs=3, k=2, bootstrap=20, references=1, neighbours=2)


@pytest.fixture(autouse=True)
def tiny_size(monkeypatch):
    monkeypatch.setitem(DEMO_SIZES, "smoke", TINY)


def study_of(out):
    return json.loads((out / "study.json").read_text())


def auc(cell, attack, level="sample"):
    return next(s["auc"] for s in cell["results"] if s["attack"] == attack and s["level"] == level)


def test_model_size_trains_one_target_per_width_and_length(tmp_path):
    output = invoke("study", "model-size", "--out", tmp_path)
    study = study_of(tmp_path)
    assert [c["settings"] for c in study["cells"]] == [{"model_size": s, "epochs": e} for s in ("tiny", "mini") for e in (1, 3)]
    for cell in study["cells"]:
        summary = read_training_summary(tmp_path / "models" / f"target-{cell['cell']}")
        assert (summary.size, summary.epochs) == (cell["settings"]["model_size"], cell["settings"]["epochs"])
        assert {"loss", "likelihood_ratio"} <= {s["attack"] for s in cell["results"]}
    assert "report: " in output and len([line for line in output.splitlines() if line.startswith(("tiny", "mini"))]) == 4
    # The paper's short (at most 20 tokens) and long samples, each result as the cell's report has it.
    split = study["analysis"]["short and long samples (Mireshghallah et al. Tables 9-10)"]
    for cell in study["cells"]:
        report = json.loads((tmp_path / "cells" / cell["cell"] / "report.json").read_text())
        assert report["config"]["evaluation"]["length_bounds"] == [21]
        sliced = [r for r in report["results"] if r["level"] == "sample" and r["attack"] in ("loss", "likelihood_ratio")
                  and r["slice"].startswith("length:")]
        assert len(sliced) == 4  # two attacks, each on the short and the long samples
        for result in sliced:
            low, high = map(int, result["slice"].removeprefix("length:").split("-"))
            assert high <= 20 or low >= 21
            row = split[f"{cell['cell']}: {result['attack']}, {low}-{high} tokens"]
            assert row["AUC"] == result["auc"] and row["samples"] == result["n_members"] + result["n_nonmembers"]
    assert len(split) == 4 * 2 * 2


def test_reference_choice_changes_only_what_reads_the_reference(tmp_path):
    from lmaudit.models.tokenizer import load_tokenizer

    invoke("study", "reference-choice", "--out", tmp_path)
    cells = study_of(tmp_path)["cells"]
    first, independent = "the same-notes reference's", "independent notes'"
    assert [(c["settings"]["tokenizer"], c["settings"]["reference"]) for c in cells] == [
        (first, "same-notes"), (first, "other-notes"), (first, "not-clinical"),
        (independent, "same-notes"), (independent, "other-notes")]
    # One target per tokenizer, one store: the loss attack is one number per tokenizer, and two across them.
    assert len({auc(c, "loss") for c in cells[:3]}) == len({auc(c, "loss") for c in cells[3:]}) == 1
    assert auc(cells[0], "loss") != auc(cells[3], "loss")
    assert len({auc(c, "likelihood_ratio") for c in cells}) == 5
    models = tmp_path / "models"
    sizes = {read_training_summary(models / name).n_samples
             for name in ("reference", "reference-other-notes", "reference-not-clinical",
                          "reference-independent-tokenizer", "reference-other-notes-independent-tokenizer")}
    assert len(sizes) == 1  # every reference trains on as many texts
    vocabulary = {name: load_tokenizer(models / name).get_vocab() for name in (
        "reference", "target", "reference-other-notes", "tokenizer-independent-notes-seed-0-texts-" + str(sizes.pop()),
        "target-independent-tokenizer",
        "reference-independent-tokenizer", "reference-other-notes-independent-tokenizer")}
    assert vocabulary["target"] == vocabulary["reference-other-notes"] == vocabulary["reference"]
    assert (vocabulary["target-independent-tokenizer"] == vocabulary["reference-independent-tokenizer"]
            == vocabulary["reference-other-notes-independent-tokenizer"])
    assert vocabulary["target-independent-tokenizer"] == next(v for k, v in vocabulary.items() if k.startswith("tokenizer-"))
    assert vocabulary["target-independent-tokenizer"] != vocabulary["reference"]
    reports = {c["cell"]: json.loads((tmp_path / "cells" / c["cell"] / "report.json").read_text()) for c in cells}
    assert reports["same-notes-independent-tokenizer"]["config"]["target"].endswith("target-independent-tokenizer")
    assert reports["same-notes-independent-tokenizer"]["config"]["reference"][0].endswith("reference-independent-tokenizer")


def test_name_insertion_puts_names_on_member_notes_only(tmp_path, monkeypatch):
    monkeypatch.setitem(DEMO_SIZES, "smoke", replace(TINY, epochs=2))  # checkpoints after epochs 1 and 2
    invoke("study", "name-insertion", "--out", tmp_path)
    cells = study_of(tmp_path)["cells"]
    assert [(c["settings"]["target"], c["settings"]["audited members"], c["settings"]["epochs"]) for c in cells] == [
        (target, audited, epoch) for target, audited in (("plain", "as trained"), ("names", "with names"),
                                                         ("names", "without names")) for epoch in (1, 2)]
    assert [c["cell"] for c in cells][:2] == ["plain-target-as-trained-epoch-1", "plain-target-as-trained"]
    plain = pd.read_parquet(tmp_path / "data" / "member.parquet")
    named = pd.read_parquet(tmp_path / "data" / "member-with-names.parquet")
    assert named["sample_id"].tolist() == plain["sample_id"].tolist()
    assert all(n.endswith(" " + p) and len(n.split()) == len(p.split()) + 2
               for n, p in zip(named["text"], plain["text"], strict=True))
    with_names = json.loads((tmp_path / "cells" / "names-target-with-names" / "report.json").read_text())
    assert with_names["config"]["members"].endswith("member-with-names.parquet")
    assert with_names["config"]["nonmembers"].endswith("nonmember.parquet")
    assert with_names["config"]["target"].endswith("target-names")
    first_epoch = json.loads((tmp_path / "cells" / "names-target-with-names-epoch-1" / "report.json").read_text())
    assert first_epoch["config"]["target"] == str(checkpoint_folder(tmp_path / "models" / "target-names", 1))
    assert auc(cells[2], "loss") != auc(cells[3], "loss")  # the checkpoint is another model than the last epoch's
    analysis = study_of(tmp_path)["analysis"]["short and long samples (Mireshghallah et al. Tables 9-10)"]
    assert {row.split(":")[0] for row in analysis} == {"plain-target-as-trained", "names-target-with-names",
                                                       "names-target-without-names"}  # the last epoch's cells only


def test_a_study_from_yaml_over_your_own_files(tmp_path, notes):
    """Your files, paths relative to the YAML file, two non-member sets: every cell audits like `lmaudit audit`."""
    patients = sorted(notes["group_id"].unique())
    parts = {"members": patients[:4], "nonmembers": patients[4:6], "other": patients[6:8], "population": patients[8:10],
             "public": patients[10:]}
    for name, group in parts.items():
        notes[notes["group_id"].isin(group)].to_csv(tmp_path / f"{name}.csv", index=False)
    (tmp_path / "study.yaml").write_text(
        "study: lr\nsize: smoke\ndata:\n  members: members.csv\n  nonmembers: {here: nonmembers.csv, there: other.csv}\n"
        "  population: population.csv\n  reference_train: public.csv\ngrid:\n  learning_rate: [0.001, 0.003]\n  k: [2]\n")
    invoke("study", "--config", tmp_path / "study.yaml", "--out", tmp_path / "out")
    study = study_of(tmp_path / "out")
    assert [c["settings"] for c in study["cells"]] == [{"learning_rate": 0.001, "k": 2}, {"learning_rate": 0.003, "k": 2}]
    assert study["x"] == "learning_rate" and study["series"] == "k"
    report = json.loads((tmp_path / "out" / "cells" / study["cells"][0]["cell"] / "report.json").read_text())
    assert report["config"]["members"] == str(tmp_path / "members.csv") and report["config"]["signal"]["k"] == 2
    assert report["config"]["nonmembers"] == {"here": str(tmp_path / "nonmembers.csv"), "there": str(tmp_path / "other.csv")}
    assert list(report["data"]["nonmember_sets"]) == ["here", "there"]
    assert {"nonmembers:here", "nonmembers:there"} <= {r["slice"] for r in report["results"]}


def test_a_grid_of_audit_settings_shares_one_target(tmp_path):
    """normalize and signal change the audit, not the model: every cell audits one target, each with its own signal."""
    (tmp_path / "study.yaml").write_text(
        "study: energy\nsize: smoke\ngrid:\n  signal: [mlm_energy, mlm_pll]\n  normalize: [sum, mean]\n")
    invoke("study", "--config", tmp_path / "study.yaml", "--out", tmp_path / "out")
    cells = study_of(tmp_path / "out")["cells"]
    configs = [json.loads((tmp_path / "out" / "cells" / c["cell"] / "report.json").read_text())["config"] for c in cells]
    assert [(c["signal"]["signal"], c["signal"]["normalize"]) for c in configs] == [
        ("mlm_energy", "sum"), ("mlm_energy", "mean"), ("mlm_pll", "sum"), ("mlm_pll", "mean")]
    assert {c["target"] for c in configs} == {str(tmp_path / "out" / "models" / "target-default")}
    assert len({auc(c, "loss") for c in cells}) == 4  # four signals of one model: four different loss attacks
    assert [r["signal"] for r in cells[2]["results"] if r["attack"] == "loss"] == ["mlm_pll"] * 3


@pytest.mark.parametrize(("text", "fragments"), [
    ("grid:\n  colour: [1]\n", ("study.yaml: grid", "cannot vary colour")),
    ("grid:\n  normalize: [avg]\n", ("study.yaml: grid", "normalize takes sum")),
    ("grid:\n  signal: [clm_loss]\n", ("study.yaml", "signal clm_loss: a mlm grid audits mlm_energy or mlm_pll")),
    ("kind: clm\ngrid:\n  normalize: [sum]\n", ("study.yaml", "a clm grid cannot vary them")),
    ("grid:\n  k: [0]\n", ("study.yaml", "k takes whole numbers of masks, 1 or more")),
    ("data: {members: m.csv, nonmembers: {a b: n.csv}, population: p.csv, reference_train: r.csv}\ngrid:\n  epochs: [1]\n",
     ("study.yaml: data.nonmembers", "'a b' cannot name a non-member set")),
    ("grid:\n  epochs: [1]\nx: k\n", ("study.yaml: x: 'k' is not a setting of the grid",)),
    ("study: ../elsewhere\ngrid:\n  epochs: [1]\n", ("study.yaml: study: String should match pattern",)),
    ("grid: [1\n", ("study.yaml", "not valid YAML")),
])
def test_a_bad_study_file_is_one_line(tmp_path, text, fragments):
    (tmp_path / "study.yaml").write_text(text)
    code, output = run_cli("study", "--config", tmp_path / "study.yaml", "--out", tmp_path / "out")
    assert_one_line_error(code, output, *fragments)
    assert not (tmp_path / "out").exists()


def test_a_study_needs_a_name_or_a_file(tmp_path):
    assert_one_line_error(*run_cli("study", "--out", tmp_path / "out"), "give a study NAME or --config FILE")
    assert_one_line_error(*run_cli("study", "no-such-study"), "'no-such-study' is not one of")


def test_cells_that_match_nothing_are_refused_and_leave_no_folder(tmp_path):
    # The study's data is written when it is planned; the refusal takes it back out of a folder it created.
    assert_one_line_error(*run_cli("study", "rare-disease", "--cells", "lstm-*", "--out", tmp_path / "out"),
                          "--cells lstm-*: no cell of the study rare-disease matches; its cells are target")
    assert not (tmp_path / "out").exists()


def test_memorisation_predictor_labels_the_members_the_likelihood_ratio_exposes(tmp_path):
    invoke("study", "memorisation-predictor", "--out", tmp_path)
    analysis = study_of(tmp_path)["analysis"]
    report = json.loads((tmp_path / "cells" / "target" / "report.json").read_text())
    ratio = next(r for r in report["results"] if r["attack"] == "likelihood_ratio" and r["level"] == "sample"
                 and r["slice"] == "all")
    threshold = next(t for t in ratio["thresholds"] if t["rule"] == "population" and t["alpha"] == 0.1)
    scores = pd.read_parquet(tmp_path / "cells" / "target" / "scores.parquet")
    members = scores[scores["role"] == "member"]
    assert analysis["exposed members"]["members"] == len(members) == threshold["tp"] + threshold["fn"]
    assert analysis["exposed members"]["exposed"] == (members["score_likelihood_ratio"] >= threshold["value"]).sum() == threshold["tp"]
    assert analysis["exposed members"]["train members"] + analysis["exposed members"]["test members"] == len(members)
    assert set(analysis["coefficients"]) == {"digits", "length", "non_alphanumeric", "rarest_1", "rarest_2", "rarest_3"}
    assert "<h3>feature sets</h3>" in (tmp_path / "study.html").read_text()


def test_epochs_audits_every_checkpoint_of_every_kind_and_takes_the_maximum(tmp_path, monkeypatch):
    # Two epochs of every kind: one checkpoint and the full run each (audits, not training, take the time).
    monkeypatch.setitem(DEMO_SIZES, "smoke", replace(TINY, epochs=2))
    monkeypatch.setitem(CLASSIFIER_DEMO_SIZES, "smoke", ClassifierDemoSize(users=48, max_epochs=2, bootstrap=20))
    invoke("study", "epochs", "--out", tmp_path)
    study = study_of(tmp_path)
    assert [(c["settings"]["kind"], c["settings"]["epochs"]) for c in study["cells"]] == [
        (kind, epoch) for kind in ("mlm", "clm", "classifier") for epoch in (1, 2)]
    for cell in study["cells"]:
        report = json.loads((tmp_path / "cells" / cell["cell"] / "report.json").read_text())
        kind, epoch = cell["settings"]["kind"], cell["settings"]["epochs"]
        if kind == "classifier":  # every epoch a checkpoint (the run's own folder keeps the best epoch), shadow alike
            assert report["config"]["target"].endswith(f"classifier/target-epoch-{epoch}")
            assert report["config"]["shadow"].endswith(f"classifier/shadow-epoch-{epoch}")
            for model in ("target", "shadow"):
                summary = read_training_summary(report["config"][model])
                assert (summary.epochs_run, summary.checkpoint_of) == (epoch, 2)
            continue
        expected = f"target-{kind}" + ("" if epoch == 2 else f"-epoch-{epoch}")
        assert report["config"]["target"].endswith(expected)
        assert read_training_summary(report["config"]["target"]).epochs == epoch
        whitebox = {(r["attack"], r["signal"]) for r in report["results"] if r["attack"].startswith("logistic_")}
        assert {("logistic_split", "attention_concentration"), ("logistic_split", "gradient_norms")} <= whitebox
    best = study["analysis"]["maximum over epochs"]["clm loss sample"]
    aucs = {c["settings"]["epochs"]: auc(c, "loss") for c in study["cells"] if c["settings"]["kind"] == "clm"}
    assert best["max AUC"] == max(aucs.values()) and aucs[best["at epoch"]] == best["max AUC"]
    # The classifier's attacks read several features: the maximum is per feature.
    assert "classifier sample_threshold on confidence sample" in study["analysis"]["maximum over epochs"]


def test_rare_disease_runs_and_says_when_no_bucket_is_big_enough(tmp_path):
    """24 patients leave about 9 audited ones: fewer than one bucket's minimum, said in the analysis, not a crash."""
    invoke("study", "rare-disease", "--out", tmp_path)
    analysis = study_of(tmp_path)["analysis"]
    from lmaudit.studies.rare_disease import PAPER_SECTION

    assert set(analysis) == {"loss: buckets", "likelihood_ratio: buckets", PAPER_SECTION}
    assert all(isinstance(value, str) and ("more patients needed" in value or "not run" in value)
               for value in analysis.values())
    assert "codes" in pd.read_parquet(tmp_path / "data" / "member.parquet").columns



# Five cells of the dp study cover every family, both starts (and both starts' note inference), DP and non-DP, and two
# checkpoints of one DP run.
DP_CELLS = ("mlm-scratch-sigma-1-epoch-1", "mlm-scratch-sigma-1-epoch-2", "mlm-fine-tuned-non-dp-epoch-2",
            "clm-fine-tuned-non-dp-epoch-2", "classifier-fine-tuned-sigma-1-epoch-2")


def test_dp_trains_every_family_and_start_and_keeps_each_epochs_epsilon(tmp_path, monkeypatch):
    from lmaudit.metrics.privacy import group_privacy
    from lmaudit.models.dp import privacy_spent
    from lmaudit.studies.dp import DP_GRIDS, PAPER_DELTA, DPGrid, plan
    from lmaudit.studies.runner import run_study

    monkeypatch.setitem(DEMO_SIZES, "smoke", replace(TINY, epochs=2))
    monkeypatch.setitem(CLASSIFIER_DEMO_SIZES, "smoke", ClassifierDemoSize(users=48, max_epochs=2, bootstrap=20))
    monkeypatch.setitem(DP_GRIDS, "smoke", DPGrid(noises=(1.0, None), checkpoints=2))
    planned = plan(tmp_path, "smoke", 0)
    models = [f"{family}, {start}" for family in ("mlm", "clm", "classifier") for start in ("scratch", "fine-tuned")]
    assert [(c.settings["model"], c.settings["noise"], c.settings["epochs"]) for c in planned.cells] == [
        (model, noise, epoch) for model in models for noise in ("1", "non-DP") for epoch in (1, 2)]
    study = run_study(replace(planned, cells=[c for c in planned.cells if c.name in DP_CELLS]), tmp_path)
    assert [c["cell"] for c in study["cells"]] == list(DP_CELLS)
    for cell in study["cells"]:
        report = json.loads((tmp_path / "cells" / cell["cell"] / "report.json").read_text())
        target = read_training_summary(report["config"]["target"])
        family, start = cell["settings"]["model"].split(", ")
        epochs = target.epochs_run if family == "classifier" else target.epochs
        assert epochs == cell["settings"]["epochs"]
        assert (target.init_from is not None) == (start == "fine-tuned")
        if family == "classifier":  # the shadow is trained alike: same start, same noise, same epoch
            shadow = read_training_summary(report["config"]["shadow"])
            assert (shadow.epochs_run, shadow.dp is None, shadow.init_from is None) == (
                epochs, target.dp is None, target.init_from is None)
        assert any(r["attack"] == "logistic_split" for r in cell["results"])  # white-box attacks ran
        measured = cell["measured"]
        assert ("held_out_loss" in measured) == (family != "classifier") and ("test_accuracy" in measured) == (family == "classifier")
        if family != "classifier":  # the language models' planted canaries, audited at that checkpoint
            canary_report = json.loads((tmp_path / "canary-audits" / cell["cell"] / "canary_report.json").read_text())
            assert measured["canary_epsilon"] == canary_report["one_run"]["epsilon_lower_bound"] >= 0
            assert measured["canary_f_dp_epsilon"] == canary_report["f_dp"]["epsilon_lower_bound"]
            assert canary_report["one_run"]["delta"] == PAPER_DELTA and canary_report["target"] == report["config"]["target"]
            # new-token canaries on the secret alone; a fine-tune against its base, a model from scratch alone
            assert (canary_report["canaries"]["kind"], canary_report["attack"]) == ("new_token", "secret")
            assert canary_report["reference"] == ([report["config"]["reference"][0]] if start == "fine-tuned" else [])
            assert target.n_samples > len(pd.read_parquet(tmp_path / "data" / "member.parquet"))  # canaries planted
            assert target.canaries[0].design == "new_token"
        if family == "mlm":  # downstream utility: the checkpoint and its start fine-tuned on note inference
            tuned, began, floor = (read_training_summary(tmp_path / "models" / "note-inference" / name)
                                   for name in (cell["cell"], f"start-{start}", "start-scratch"))
            started_from = report["config"]["reference"][0] if start == "fine-tuned" else None
            assert (tuned.init_from, began.init_from, floor.init_from) == (report["config"]["target"], started_from, None)
            assert (measured["nli_accuracy"], measured["start_nli_accuracy"], measured["random_init_nli_accuracy"]) == (
                tuned.test_accuracy, began.test_accuracy, floor.test_accuracy)
            assert measured["nli_test_pairs"] == tuned.n_test > 0 and tuned.epochs_run == 3
            low, high = measured["nli_accuracy_interval"]
            assert low <= measured["nli_accuracy"] <= high
        if cell["settings"]["noise"] != "non-DP" and family != "classifier":  # DP-SGD audited white-box too
            assert measured["white_box_verdict"].startswith("consistent") and measured["white_box_epsilon"] >= 0
        if cell["settings"]["noise"] == "non-DP":
            assert target.dp is None and measured["epsilon_rdp"] is None
            continue
        dp = target.dp
        assert (dp.noise_multiplier, dp.delta, dp.max_grad_norm, dp.max_samples_per_group) == (1.0, PAPER_DELTA, 1.0, 50)
        # The checkpoint's epsilon is the accountant's for its own steps; the group epsilon is k times it.
        assert measured["epsilon_rdp"] == pytest.approx(privacy_spent(dp.sample_rate, 1.0, dp.steps, PAPER_DELTA)["epsilon_rdp"])
        assert measured["group_epsilon"] == pytest.approx(group_privacy(measured["epsilon_rdp"], PAPER_DELTA, measured["group_size"])[0])
    first, last = study["cells"][:2]
    assert 0 < first["measured"]["epsilon_rdp"] < last["measured"]["epsilon_rdp"]
    best = study["analysis"]["maximum over epochs: mlm"]["scratch, sigma 1"]
    assert best["loss sample: max AUC"] == max(auc(first, "loss"), auc(last, "loss"))
    assert best["epsilon"] == last["measured"]["epsilon_rdp"]  # the last epoch's: what the whole run spent
    assert best["canary epsilon"] == last["measured"]["canary_epsilon"] <= best["epsilon"]
    assert best["white-box epsilon"] == last["measured"]["white_box_epsilon"] <= best["epsilon"]
    assert best["NLI accuracy"] == last["measured"]["nli_accuracy"]
    assert best["NLI accuracy from random initialisation"] == last["measured"]["random_init_nli_accuracy"]
    assert set(study["analysis"]["maximum over epochs: clm"]) == {"fine-tuned, non-DP"}
    assert set(study["analysis"]) == {f"maximum over epochs: {f}" for f in ("mlm", "clm", "classifier")}
    assert "data:image/png;base64," in (tmp_path / "study.html").read_text()


def test_dp_at_full_size_runs_the_one_hour_grid_and_dp_paper_the_papers(tmp_path, monkeypatch):
    """Full size: fine-tuned models only, DP-SGD for 3 epochs (the paper's), each epoch audited, at four noise levels;
    the dp-paper study: the paper's seven noise levels and non-DP, from scratch and fine-tuned."""
    from lmaudit.studies.dp import PAPER_NOISES, noise_label, plan
    from lmaudit.studies.registry import study_spec

    monkeypatch.setitem(DEMO_SIZES, "full", TINY)
    monkeypatch.setitem(CLASSIFIER_DEMO_SIZES, "full", ClassifierDemoSize(users=48, max_epochs=40, bootstrap=20))
    hour = plan(tmp_path / "hour", "full", 0)
    noises = ("1", "0.01", "0.001", "non-DP")
    assert [(c.settings["model"], c.settings["noise"], c.settings["epochs"]) for c in hour.cells] == [
        *((f"{kind}, fine-tuned", noise, epoch) for kind in ("mlm", "clm") for noise in noises for epoch in (1, 2, 3)),
        *(("classifier, fine-tuned", noise, epoch) for noise in noises for epoch in (1, 6, 40))]
    assert hour.setup["language-model epochs"] == "3 fine-tuned"
    paper = study_spec("dp-paper").plan(tmp_path / "paper", "full", 0)
    assert sorted({c.settings["noise"] for c in paper.cells}) == sorted(map(noise_label, (*PAPER_NOISES, None)))
    assert {c.settings["model"] for c in paper.cells} >= {"mlm, scratch", "mlm, fine-tuned"}
    assert paper.setup["language-model epochs"] == "3 from scratch, 3 fine-tuned"  # TINY's epochs
