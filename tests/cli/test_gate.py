"""The release gate on a tiny saved model: plan -> audit --plan -> verify -> pdf -> model-card -> gate. An untouched bundle
passes; every flipped byte of the report, its page, its scores, its PDF, the model card's section, the plan, the
weights or a data file is found (exit 3; a report or plan no longer readable as JSON is bad input, exit 2); the plan
fixes every setting the audit measures with, and one given again is refused; a threshold the planned data cannot
decide is refused unless accepted, and then the gate says CANNOT DECIDE (exit 4); one over its threshold fails
(exit 1)."""

import hashlib
import json
import os
import shutil

import pandas as pd
import pytest

from tests.helpers import assert_one_line_error, run_cli
from tests.report.test_integrity import flipped, positions

PASSING = ("sample:auc=1", "sample:tpr_at_1pct_fpr:point=1")
MEASURING = ("--seed", "3", "--k", "2", "--bootstrap", "20")


def write_plan(bundle, name: str, thresholds: tuple[str, ...], *extra: str):
    """A plan of the bundle's model and data with these thresholds (the path)."""
    args = ["plan", "--out", bundle["root"] / name, "--target", bundle["model"], *MEASURING, *extra]
    for role in ("members", "nonmembers", "population"):
        args += [f"--{role}", bundle[role]]
    for threshold in thresholds:
        args += ["--threshold", threshold]
    code, output = run_cli(*args)
    assert code == 0, output
    return bundle["root"] / name


def audit(plan, out, *extra):
    return run_cli("audit", "--plan", plan, "--out", out, "--no-figures", *extra)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, tiny_model_dirs, notes):
    """A copy of the tiny model, members, non-members and population by patient, a passing plan, its audit, the PDF
    and the model card."""
    root = tmp_path_factory.mktemp("gate")
    bundle = {"root": root, "model": root / "model"}
    shutil.copytree(tiny_model_dirs[0], bundle["model"])  # its bytes are flipped here: never the shared fixture's
    patients = sorted(notes["group_id"].unique())
    for role, chosen in (("members", patients[:4]), ("nonmembers", patients[4:8]), ("population", patients[8:])):
        bundle[role] = root / f"{role}.csv"
        notes[notes["group_id"].isin(chosen)].to_csv(bundle[role], index=False)
    bundle["plan"] = write_plan(bundle, "plan.json", PASSING)
    bundle["out"] = root / "audit"
    code, output = audit(bundle["plan"], bundle["out"])
    assert code == 0, output
    for command in (("pdf", bundle["out"]), ("model-card", "--report", bundle["out"], "--target", bundle["model"])):
        code, output = run_cli(*command)
        assert code == 0, output
    return bundle


def test_an_untouched_bundle_is_intact_and_passes(bundle):
    report = json.loads((bundle["out"] / "report.json").read_text())
    plan = json.loads(bundle["plan"].read_text())
    sha = {role: hashlib.sha256(bundle[role].read_bytes()).hexdigest() for role in ("members", "nonmembers", "population")}
    assert plan["data"] == report["provenance"]["data"] == {str(bundle[role]): sha[role] for role in sha}
    assert report["provenance"]["plan"] == {"path": str(bundle["plan"]), "plan_sha256": plan["integrity"]["plan_sha256"]}
    weights = bundle["model"] / "model.safetensors"
    assert report["model_files"]["target"]["files"]["model.safetensors"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert report["config"]["signal"]["seed"] == report["config"]["evaluation"]["seed"] == 3
    assert plan["settings"]["signal"]["k"] == report["config"]["signal"]["k"] == 2  # the plan fixed it
    assert report["outputs"] == {name: hashlib.sha256((bundle["out"] / name).read_bytes()).hexdigest()
                                 for name in ("scores.parquet", "report.html")}
    assert run_cli("verify", bundle["out"])[0] == 0
    code, output = run_cli("gate", bundle["out"], "--plan", bundle["plan"])
    assert code == 0 and output.count("PASS ") == 2 and "pass:" in output, output
    assert "signal mlm_energy, 0 reference models" in output and "ran 1 attack: loss" in output, output
    assert "not run: likelihood_ratio, rmia, lira: no reference-model signal" in output, output


FILES = {"report": lambda b: b["out"] / "report.json", "page": lambda b: b["out"] / "report.html",
         "scores": lambda b: b["out"] / "scores.parquet", "pdf": lambda b: b["out"] / "report.pdf",
         "card": lambda b: b["model"] / "README.md", "evaluation": lambda b: b["model"] / "privacy_evaluation.json",
         "plan": lambda b: b["plan"], "weights": lambda b: b["model"] / "model.safetensors",
         "members": lambda b: b["members"]}


@pytest.mark.parametrize("which", list(FILES))
def test_every_flipped_byte_is_found(bundle, which):
    path = FILES[which](bundle)
    original, stat = path.read_bytes(), path.stat()
    commands = [("gate", bundle["out"], "--plan", bundle["plan"])]
    if which != "plan":  # verify reads no plan
        commands.append(("verify", bundle["out"]))
    # the model card is the user's file but for its privacy section: only a byte inside the section is lmaudit's
    card = path.read_text() if which == "card" else ""
    where = positions(len(original)) if which != "card" else [card.index("| level |") + 3, len(card) - 3]
    try:
        for position in where:
            changed = flipped(original, position)
            path.write_bytes(changed)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and time: a cached hash would miss it
            try:
                parses = json.loads(changed.decode("utf-8")) is not None
            except ValueError:
                parses = False
            for command in commands:
                code, output = run_cli(*command)
                if which in ("report", "plan") and not parses:
                    assert_one_line_error(code, output, str(path), "not readable JSON")
                else:
                    assert code == 3 and output.startswith("tampered: "), (command, position, output)
                    assert os.path.normpath(path) in output, output
    finally:
        path.write_bytes(original)
    assert run_cli("gate", bundle["out"], "--plan", bundle["plan"])[0] == 0


def test_the_rest_of_a_model_card_stays_the_users_and_a_pdf_never_sealed_is_not_intact(bundle):
    card = bundle["model"] / "README.md"
    original = card.read_text()
    try:
        card.write_text(original.replace("# model", "# model\n\nOur own words about the model."))
        assert run_cli("verify", bundle["out"])[0] == 0
    finally:
        card.write_text(original)
    derived = bundle["out"] / "derived.json"
    kept = derived.read_bytes()
    try:
        derived.unlink()
        code, output = run_cli("verify", bundle["out"])
        assert code == 3 and "report.pdf: not sealed" in output, output
    finally:
        derived.write_bytes(kept)


def test_a_plan_whose_data_changed_is_refused_and_nothing_written(bundle, tmp_path):
    plan = write_plan({**bundle, "root": tmp_path}, "plan.json", PASSING)
    members = bundle["members"]
    original = members.read_bytes()
    try:
        members.write_bytes(original + b"\n")
        code, output = audit(plan, tmp_path / "audit")
        assert_one_line_error(code, output, str(members), "differs from the plan's")
        assert not (tmp_path / "audit").exists()
    finally:
        members.write_bytes(original)
    plan.write_text(plan.read_text().replace('"k": 2', '"k": 3'))
    code, output = audit(plan, tmp_path / "audit")
    assert_one_line_error(code, output, str(plan), "self-hash does not match")
    assert not (tmp_path / "audit").exists()


@pytest.mark.parametrize("option", [("--k", "1"), ("--max-length", "8"), ("--permutations", "100"),
                                    ("--token-signal", "mlm_tokens"), ("--reference", "x"), ("--seed", "4"),
                                    ("--whitebox",), ("--extraction",), ("--config", "audit.yaml")])
def test_the_plan_fixes_every_setting_that_measures(bundle, tmp_path, option):
    """The trial's findings: one plan audited with --token-signal mlm_tokens, or --max-length 8 --k 1 --permutations
    100, ran as that plan's audit; each is now refused in one line before anything is written."""
    code, output = audit(bundle["plan"], tmp_path / "audit", *option)
    assert_one_line_error(code, output, option[0])
    assert not (tmp_path / "audit").exists()


def test_a_threshold_the_data_cannot_decide_is_refused_unless_accepted_and_then_cannot_be_decided(bundle):
    """4 member and 4 non-member patients: 70 relabellings can never give p below 0.01, so 'at most moderate' can
    never be decided, nor 'low' (581 non-members needed). Written with --accept-undecidable, the plan records why and
    the gate says CANNOT DECIDE, exit 4; a number wholly over its threshold still fails, exit 1."""
    base = ["plan", "--out", bundle["root"] / "undecided.json", "--target", bundle["model"], *MEASURING,
            "--members", bundle["members"], "--nonmembers", bundle["nonmembers"], "--population", bundle["population"]]
    code, output = run_cli(*base, "--threshold", "patient:risk=moderate")
    assert_one_line_error(code, output, "--threshold group:risk=moderate (patient level)", "cannot decide",
                          "--accept-undecidable")
    code, output = run_cli(*base, "--threshold", "patient:risk=low")
    assert_one_line_error(code, output, "about 581 independent non-member patients, 4 planned")
    assert not (bundle["root"] / "undecided.json").exists()
    plan = write_plan(bundle, "undecided.json", ("patient:risk=low", "sample:auc=1"), "--accept-undecidable")
    recorded = json.loads(plan.read_text())
    assert [entry["threshold"] for entry in recorded["undecidable"]] == ["group:risk=low"]
    assert recorded["levels"]["group"]["power"]["can_read_low"] is False
    out = bundle["root"] / "undecided-audit"
    assert audit(plan, out)[0] == 0
    code, output = run_cli("gate", out, "--plan", plan)
    assert code == 4, output
    assert "CANNOT DECIDE group:risk=low (patient level)" in output and "PASS sample:auc:upper=1" in output, output
    assert "accepted when planned: group:risk=low cannot be decided by this data" in output, output


def test_a_report_over_a_threshold_fails_and_another_plans_report_is_tampered(bundle):
    strict = write_plan(bundle, "strict.json", ("sample:auc=0",), "--accept-undecidable")
    code, output = run_cli("gate", bundle["out"], "--plan", strict)
    assert code == 3 and "not from this plan" in output, output  # the report was produced from the passing plan
    out = bundle["root"] / "strict-audit"
    assert audit(strict, out)[0] == 0
    level = json.loads((out / "report.json").read_text())["summary"]["levels"]["sample"]
    low, upper = level["strongest"]["auc_ci"]
    code, output = run_cli("gate", out, "--plan", strict)
    expected = (1, "FAIL") if low > 0 else (4, "CANNOT DECIDE")  # an interval wholly over 0, or reaching it
    assert code == expected[0] and f"{expected[1]} sample:auc:upper=0 (sample level): {upper:.4f}" in output, output


def test_plan_refuses_bad_input_in_one_line(bundle, tmp_path):
    base = ["plan", "--out", tmp_path / "p.json", "--target", bundle["model"], "--members", bundle["members"]]
    code, output = run_cli(*base, "--nonmembers", tmp_path / "gone.csv", "--threshold", "sample:auc=1")
    assert_one_line_error(code, output, str(tmp_path / "gone.csv"))
    code, output = run_cli(*base, "--nonmembers", bundle["nonmembers"], "--threshold", "sample:recall=0.6")
    assert_one_line_error(code, output, "--threshold sample:recall=0.6", "METRIC one of")
    code, output = run_cli(*base, "--nonmembers", bundle["nonmembers"], "--threshold", "sample:auc=1", "--device", "cpu")
    assert_one_line_error(code, output, "--device", "audit --plan")
    code, output = run_cli(*base, "--nonmembers", bundle["nonmembers"], "--threshold", "patient:risk=high")
    assert_one_line_error(code, output, "high would pass every model")
    ungrouped = {}
    for role in ("members", "nonmembers"):  # the same notes without their patients: the data has no patient level
        ungrouped[role] = tmp_path / f"{role}.csv"
        pd.read_csv(bundle[role]).drop(columns=["group_id"]).to_csv(ungrouped[role], index=False)
    code, output = run_cli("plan", "--out", tmp_path / "p.json", "--target", bundle["model"], "--members",
                           ungrouped["members"], "--nonmembers", ungrouped["nonmembers"], "--threshold", "patient:auc=1")
    assert_one_line_error(code, output, "--threshold group:auc:upper=1", "no group level")
    assert not (tmp_path / "p.json").exists()
    code, output = run_cli("gate", bundle["out"], "--plan", tmp_path / "none.json")
    assert_one_line_error(code, output, str(tmp_path / "none.json"), "cannot be read")


def test_the_plan_and_the_privacy_evaluation_match_their_models_and_a_resealed_misshapen_plan_is_refused(bundle,
                                                                                                       tmp_path):
    """plan.json and privacy_evaluation.json as written validate against their models (docs/schema/); a plan whose seal
    was recomputed over a misshapen threshold (a metric no gate reads) is refused in one line naming where."""
    from lmaudit.report.integrity import sealed, written_form
    from lmaudit.report.model_card import PrivacyEvaluation
    from lmaudit.report.plan import PLAN_KEY, PlanDocument

    plan = json.loads(bundle["plan"].read_text())
    PlanDocument.model_validate(plan)
    PrivacyEvaluation.model_validate_json((bundle["model"] / "privacy_evaluation.json").read_text())
    content = {key: value for key, value in plan.items() if key != "integrity"}
    content["thresholds"] = [{**content["thresholds"][0], "metric": "recall"}]
    misshapen = tmp_path / "misshapen.json"
    misshapen.write_text(written_form(sealed(content, PLAN_KEY)))
    code, output = run_cli("gate", bundle["out"], "--plan", misshapen)
    assert_one_line_error(code, output, str(misshapen), "not a plan of this lmaudit's schema (at thresholds.0.metric)")
