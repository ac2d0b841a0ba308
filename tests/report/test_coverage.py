"""The coverage of the EDPB Opinion 28/2024's attack families: what each audit tested, what it did not and how lmaudit
would, the declared release's context line (words only), and where the reader sees them: report.json, the page, the
terminal."""

import json

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks.base import ACCESS_LEVELS
from lmaudit.audit import run
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.report.coverage import CONTEXTS, LIMITS, NO_WHITE_BOX, access_context, coverage_section, release_context
from lmaudit.report.document import RankedAttack, typed_report
from lmaudit.report.tables import summary_table
from lmaudit.report.verdict import threat_models
from tests.audit.test_run import calls, language_model_config  # noqa: F401 (calls: the fake models' fixture)
from tests.helpers import assert_document_round_trips, assert_one_line_error, run_cli

FAMILIES = ["membership inference", "attribute inference", "exfiltration", "regurgitation of training data",
            "model inversion", "reconstruction"]
PROBABILITIES, WITH_REFERENCE, WITH_SHADOW, WHITE_BOX = ACCESS_LEVELS[2], ACCESS_LEVELS[3], ACCESS_LEVELS[4], ACCESS_LEVELS[5]


def document(signal: str | None, rows: dict[str, list[tuple[str, str]]], **sections) -> dict:
    """The parts of report.json that coverage reads: the configuration (its signal and release), each level's ranked
    attacks with their threat model, and the extraction and dataset-inference sections when given."""
    config = {"out": "o", "signal": {"signal": signal} if signal else "loss", "release": sections.pop("release", None)}
    ranking = {level: [{"attack": attack, "access": access} for attack, access in ranked] for level, ranked in rows.items()}
    return {"config": config, "ranking": ranking, "level_names": {"sample": "note", "subgroup": "admission", "group": "patient"}, **sections}


def coverage_of(report: dict) -> dict:
    """The coverage of a report's parts, with the threat models the verdict names from its ranked attacks."""
    ranked = {level: [RankedAttack(attack=row["attack"], signal="loss", auc=0.5, auc_ci=(0.4, 0.6), tpr_at_fpr={},
                                   n_members=10, n_nonmembers=10, description="", paper="", access=row["access"])
                      for row in rows] for level, rows in report["ranking"].items()}
    return coverage_section(report, threat_models(ranked))


def by_family(section: dict) -> dict[str, dict]:
    assert [item["family"] for item in section["families"]] == FAMILIES  # the Opinion's order, every family once
    return {item["family"]: item for item in section["families"]}


EXTRACTION = {"suffix_tokens": 32, "schemes": ["1,40,1", "0.7,40,1"], "prefix_lengths": {"32": {}, "64": {}}}


def test_a_causal_lm_audit_with_extraction_tests_membership_and_regurgitation_only():
    report = document("clm_tokens", {"sample": [("likelihood_ratio", WITH_REFERENCE), ("loss", PROBABILITIES)],
                                     "subgroup": [("loss", PROBABILITIES)], "group": [("loss", PROBABILITIES)]},
                      extraction=EXTRACTION, dataset_inference={"p_value": 0.3})
    families = by_family(coverage_of(report))
    assert {name: item["status"] for name, item in families.items()} == {
        "membership inference": "tested", "attribute inference": "not tested", "exfiltration": "not tested",
        "regurgitation of training data": "tested", "model inversion": "not tested", "reconstruction": "not tested"}
    assert families["membership inference"]["what_ran"] == (
        "2 attacks (likelihood_ratio, loss) at note, admission and patient level; threat models tried: output probabilities, "
        "output probabilities + a reference model; dataset inference (Maini et al.) of the members as a set")
    # a reference was given: the white-box attacks and SaMIA's generated text are left to add
    assert families["membership inference"]["how_to_test"].startswith(
        "lmaudit audit (this report); to add threat models: --whitebox (white-box), --samia N (generated text only); "
        "lmaudit canaries audit")
    assert families["regurgitation of training data"]["what_ran"] == (
        "extraction (lmaudit audit --extraction): each text's next 32 tokens from its first 32, 64, greedy and sampled "
        "(1,40,1, 0.7,40,1), members against non-members")
    assert families["reconstruction"]["what_ran"] == "lmaudit reconstruct is a separate command, not part of this report"


def test_a_causal_lm_audit_without_extraction_says_how_to_run_it():
    report = document("clm_loss", {"sample": [("loss", PROBABILITIES), ("likelihood_ratio", WITH_REFERENCE),
                                              ("logistic_calibration", WHITE_BOX)]},
                      dataset_inference={"unavailable": "too few patients"})
    families = by_family(coverage_of(report))
    regurgitation = families["regurgitation of training data"]
    assert (regurgitation["status"], regurgitation["what_ran"]) == ("not tested", "no extraction in this audit")
    assert regurgitation["how_to_test"] == ("lmaudit audit --extraction, or lmaudit extract (causal LMs; a separate "
                                            "command, not part of this report)")
    membership = families["membership inference"]
    assert "dataset inference" not in membership["what_ran"]  # it could not run
    assert "to add threat models: --samia N (generated text only);" in membership["how_to_test"]  # the one left


def test_a_masked_lm_audit_without_references_names_the_reference_and_the_white_box_options():
    families = by_family(coverage_of(document("mlm_energy", {"sample": [("loss", PROBABILITIES)]})))
    assert "to add threat models: --whitebox (white-box), --reference DIR (a reference model);" in (
        families["membership inference"]["how_to_test"])
    regurgitation = families["regurgitation of training data"]
    assert (regurgitation["status"], regurgitation["what_ran"]) == (
        "not tested", "no extraction: lmaudit extracts from causal LMs only")
    assert families["attribute inference"]["how_to_test"].startswith("lmaudit reconstruct --field KIND=REGEX")


def test_a_classifier_gives_no_text_back_so_regurgitation_does_not_apply():
    families = by_family(coverage_of(document("classifier", {"sample": [("sample_threshold", PROBABILITIES)]})))
    assert [name for name, item in families.items() if item["status"] == "not applicable"] == [
        "regurgitation of training data"]
    assert families["regurgitation of training data"]["what_ran"].startswith("a classifier outputs label probabilities")
    assert "--shadow DIR --shadow-members F --shadow-nonmembers F" in families["membership inference"]["how_to_test"]
    assert "--reference" not in families["membership inference"]["how_to_test"]
    assert families["reconstruction"]["how_to_test"] == (
        "lmaudit cannot: lmaudit reconstruct scores masked and causal LMs only")
    assert families["attribute inference"]["how_to_test"] == (
        "lmaudit cannot: it has no attribute-inference attack on classifiers")


def test_precomputed_losses_point_to_an_audit_of_the_model():
    section = coverage_of(document(None, {"sample": [("loss", PROBABILITIES)]}))
    families = by_family(section)
    assert families["membership inference"]["how_to_test"].startswith(
        "lmaudit attack (this report, from precomputed losses); lmaudit audit on the model runs every attack")
    assert families["regurgitation of training data"]["status"] == "not tested"
    assert section["release"] is None and section["context"] == CONTEXTS[None] and section["limits"] == LIMITS


def test_the_release_context_is_words_for_the_declared_release_and_never_a_guess():
    assert release_context(None, []).startswith("Release context: not declared (lmaudit audit --release")
    assert release_context("open-weights", [WHITE_BOX]).endswith("This audit tried no white-box attack (--whitebox).")
    assert NO_WHITE_BOX not in release_context("open-weights", [])
    assert release_context("public-api", [WHITE_BOX]).startswith("Release context: public API. Anyone may query")
    assert release_context("internal", [WHITE_BOX]).startswith("Release context: internal. Only those allowed")
    with pytest.raises(ValueError, match="unknown release 'closed'"):
        release_context("closed", [])
    assert "not a determination that the model is anonymous" in LIMITS and "evidence about those attacks only" in LIMITS


def test_an_endpoint_audit_says_what_its_api_allowed_and_an_audit_of_the_weights_what_they_add():
    """Through --target-url the context names the attacks the API could not feed (they read the whole next-token
    distribution), which an attacker holding the weights adds; an audit of the weights of a model behind an API names
    the attacks that read what no API returns; an open-weights audit, whose attacker has the weights, adds nothing."""
    rows = {"sample": [("loss", PROBABILITIES), ("zlib", PROBABILITIES)]}
    served = document("clm_tokens", rows, release="public-api",
                      skipped=[{"attack": "min_k_plus_plus", "level": "sample", "reason": "served"},
                               {"attack": "loss", "level": "group", "reason": "no groups"}])
    served["config"]["target_url"] = "http://127.0.0.1:8000"
    words = access_context(served)
    assert words == (" This audit queried the model through its endpoint (http://127.0.0.1:8000), as a user of its API "
                     "can: 2 attacks ran on what the API returns; not run, as no API returns what they read (the whole "
                     "next-token distribution, or the weights' features and gradients): min_k_plus_plus, which an "
                     "attacker holding the weights adds.")
    assert coverage_of(served)["context"] == CONTEXTS["public-api"] + words
    weights = document("clm_tokens", {"sample": [("loss", PROBABILITIES), ("min_k_plus_plus", PROBABILITIES)]},
                       release="public-api")
    assert access_context(weights).startswith(" This audit ran on the weights, not through an API: min_k_plus_plus "
                                              "read what no API returns")
    assert access_context({**weights, "config": {**weights["config"], "release": "open-weights"}}) == ""
    assert access_context(document("clm_tokens", rows, release="public-api")) == ""


@pytest.fixture(scope="module")
def scores_report(tmp_path_factory):
    """An audit from precomputed losses (no model): 60 notes a side in 20 patients, a reference, a population."""
    out = tmp_path_factory.mktemp("coverage")
    rng = np.random.default_rng(0)
    rows = [{"sample_id": f"{role}-{i}", "role": role, "group_id": f"{role}-{i % 20}",
             "target_loss": rng.normal(3 - shift), "reference_loss": rng.normal(3)}
            for role, shift in (("member", 0.5), ("nonmember", 0.0), ("population", 0.0)) for i in range(60)]
    pd.DataFrame(rows).to_csv(out / "scores.csv", index=False)
    report = run.run_attack(out / "scores.csv", out / "audit", EvaluationSettings(bootstrap=20))
    return out / "audit", report


def test_report_json_page_and_terminal_carry_the_coverage(scores_report):
    folder, report = scores_report
    assert_document_round_trips(folder / "report.json")
    written = json.loads((folder / "report.json").read_text(encoding="utf-8"))["coverage"]
    assert [item["status"] for item in written["families"]] == ["tested", *["not tested"] * 5]
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "What was tested: the attack families of the EDPB's Opinion 28/2024" in page
    assert page.count('<tr><td class="l">') >= 6 and "<td class=\"l\">model inversion</td><td class=\"l\">not tested" in page
    assert "Release context: not declared" in page and "not a determination that the model is anonymous" in page
    lines = summary_table(typed_report(report)).splitlines()
    start = lines.index("Attack families of the EDPB's Opinion 28/2024:")
    assert lines[start + 1].startswith("  Release context: not declared")
    assert [line.split(":")[0].strip() for line in lines[start + 2:start + 8]] == FAMILIES
    assert lines[start + 2].startswith("  membership inference: TESTED: 3 attacks (likelihood_ratio, loss, rmia) at "
                                       "sample and group level;")
    assert lines[start + 6] == ("  model inversion: NOT TESTED: lmaudit cannot: recovering a person's or a class's "
                                "features from the model's outputs or weights needs another tool")


# What an audit found, number for number: the sections that do not name its files.
FOUND = ("summary", "data", "results", "skipped", "warnings", "leakage_tests", "dataset_inference", "ranking", "validity")


@pytest.mark.usefixtures("calls")
def test_a_declared_release_changes_the_words_not_the_numbers(tmp_path):
    """Two audits of the same fake models, one declared open weights: every number and the risk are equal."""
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
    declared = run.run_audit(language_model_config(tmp_path / "a", release="open-weights"))
    undeclared = run.run_audit(language_model_config(tmp_path / "b"))
    assert declared["coverage"]["release"] == "open-weights" and undeclared["coverage"]["release"] is None
    assert declared["coverage"]["context"] == CONTEXTS["open-weights"] + NO_WHITE_BOX
    assert {key: declared[key] for key in FOUND} == {key: undeclared[key] for key in FOUND}
    assert declared["coverage"]["families"] == undeclared["coverage"]["families"]


@pytest.fixture
def captured_audit(monkeypatch):
    """audit with the pipeline replaced: the configuration it would run."""
    import lmaudit.audit.run
    import lmaudit.report.document
    import lmaudit.report.tables

    seen = {}
    monkeypatch.setattr(lmaudit.audit.run, "run_audit", lambda config, progress, overwrite, **rest: seen.update(config=config) or {"warnings": []})
    monkeypatch.setattr(lmaudit.report.tables, "summary_table", lambda report: "")
    monkeypatch.setattr(lmaudit.report.document, "typed_report", lambda report: report)
    return seen


def test_release_is_read_from_the_command_line_and_the_config_file(captured_audit, tmp_path):
    required = ("--target", "t", "--members", "m.csv", "--nonmembers", "n.csv", "--out", tmp_path / "o")
    code, output = run_cli("audit", *required, "--release", "public-api")
    assert code == 0, output
    assert captured_audit["config"].release == "public-api"
    assert run_cli("audit", *required)[0] == 0 and captured_audit["config"].release is None  # never guessed
    (tmp_path / "audit.yaml").write_text("target: t\nmembers: m.csv\nnonmembers: n.csv\nout: o\nrelease: internal\n")
    assert run_cli("audit", "--config", tmp_path / "audit.yaml")[0] == 0
    assert captured_audit["config"].release == "internal"


def test_an_unknown_release_is_refused_in_one_line(tmp_path):
    code, output = run_cli("audit", "--target", "t", "--members", "m", "--nonmembers", "n", "--out", "o",
                           "--release", "closed")
    assert_one_line_error(code, output, "'closed' is not one of 'public-api', 'internal', 'open-weights'",
                          "(see 'lmaudit audit -h')")
    (tmp_path / "audit.yaml").write_text("target: t\nmembers: m.csv\nnonmembers: n.csv\nout: o\nrelease: closed\n")
    assert_one_line_error(*run_cli("audit", "--config", tmp_path / "audit.yaml"), "audit.yaml: release: ")


def test_a_rerun_that_only_declares_the_release_is_not_another_run(scores_report):
    """The release words the report; it is no setting of what the audit finds, so a rerun may declare it."""
    from lmaudit.errors import InputError
    from lmaudit.report.documents import refuse_another_run

    folder, report = scores_report
    refuse_another_run(folder, {**report["config"], "release": "internal"})
    with pytest.raises(InputError, match="its signal differs"):
        refuse_another_run(folder, {**report["config"], "release": "internal", "signal": "other"})
