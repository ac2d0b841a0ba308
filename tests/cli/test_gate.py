"""The release gate on a tiny saved model: plan -> audit --plan -> verify -> gate. An untouched bundle passes; every
flipped byte of the report, the plan, the weights or a data file is found (exit 3; a report or plan no longer readable
as JSON is bad input, exit 2); a plan whose data changed is refused before anything is written; a report over a planned
threshold fails (exit 1) and names the metric, level, value, interval and threshold."""

import hashlib
import json
import os
import shutil

import pytest

from tests.helpers import assert_one_line_error, run_cli
from tests.report.test_integrity import flipped, positions

PASSING = ("sample:auc_upper=1", "sample:tpr_at_1pct_fpr=1", "sample:risk=high")


def write_plan(bundle, name: str, thresholds: tuple[str, ...]):
    """A plan of the bundle's model and data with these thresholds (the path)."""
    args = ["plan", "--out", bundle["root"] / name, "--target", bundle["model"], "--seed", "3"]
    for role in ("members", "nonmembers", "population"):
        args += [f"--{role}", bundle[role]]
    for threshold in thresholds:
        args += ["--threshold", threshold]
    code, output = run_cli(*args)
    assert code == 0, output
    return bundle["root"] / name


def audit(plan, out):
    return run_cli("audit", "--plan", plan, "--out", out, "--k", "2", "--bootstrap", "20")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, tiny_model_dirs, notes):
    """A copy of the tiny model, members, non-members and population by patient, a passing plan and its audit."""
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
    return bundle


def test_an_untouched_bundle_is_intact_and_passes(bundle):
    report = json.loads((bundle["out"] / "report.json").read_text())
    plan = json.loads(bundle["plan"].read_text())
    sha = {role: hashlib.sha256(bundle[role].read_bytes()).hexdigest() for role in ("members", "nonmembers", "population")}
    assert plan["data"] == report["provenance"]["data"] == {str(bundle[role]): sha[role] for role in sha}
    assert report["provenance"]["plan"] == {"path": str(bundle["plan"]), "plan_sha256": plan["integrity"]["plan_sha256"]}
    weights = bundle["model"] / "model.safetensors"
    assert report["model_files"]["target"]["files"]["model.safetensors"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert report["config"]["signal"]["seed"] == report["config"]["evaluation"]["seed"] == plan["settings"]["seed"] == 3
    assert run_cli("verify", bundle["out"])[0] == 0
    code, output = run_cli("gate", bundle["out"], "--plan", bundle["plan"])
    assert code == 0 and output.count("PASS ") == 3 and "pass:" in output, output


@pytest.mark.parametrize("which", ["report", "plan", "weights", "members"])
def test_every_flipped_byte_is_found(bundle, which):
    path = {"report": bundle["out"] / "report.json", "plan": bundle["plan"],
            "weights": bundle["model"] / "model.safetensors", "members": bundle["members"]}[which]
    original, stat = path.read_bytes(), path.stat()
    commands = [("gate", bundle["out"], "--plan", bundle["plan"])]
    if which != "plan":  # verify reads no plan
        commands.append(("verify", bundle["out"]))
    try:
        for position in positions(len(original)):
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
                    assert str(path) in output, output
    finally:
        path.write_bytes(original)
    assert run_cli("gate", bundle["out"], "--plan", bundle["plan"])[0] == 0


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
    plan.write_text(plan.read_text().replace('"seed": 3', '"seed": 4'))
    code, output = audit(plan, tmp_path / "audit")
    assert_one_line_error(code, output, str(plan), "self-hash does not match")
    assert not (tmp_path / "audit").exists()


def test_a_report_over_a_threshold_fails_and_another_plans_report_is_tampered(bundle):
    strict = write_plan(bundle, "strict.json", ("sample:auc_upper=0", "sample:risk=high"))
    code, output = run_cli("gate", bundle["out"], "--plan", strict)
    assert code == 3 and "not from this plan" in output, output  # the report was produced from the passing plan
    out = bundle["root"] / "strict-audit"
    assert audit(strict, out)[0] == 0
    level = json.loads((out / "report.json").read_text())["summary"]["levels"]["sample"]
    upper = level["strongest"]["auc_ci"][1]
    code, output = run_cli("gate", out, "--plan", strict)
    assert code == 1, output
    assert f"FAIL sample auc_upper = {upper:.4f}" in output and f"-{upper:.4f})" in output, output
    assert "threshold: at most 0" in output and "PASS sample risk" in output, output


def test_plan_refuses_bad_input_in_one_line(bundle, tmp_path):
    base = ["plan", "--out", tmp_path / "p.json", "--target", bundle["model"], "--members", bundle["members"]]
    code, output = run_cli(*base, "--nonmembers", tmp_path / "gone.csv", "--threshold", "sample:auc_upper=0.6")
    assert_one_line_error(code, output, str(tmp_path / "gone.csv"), "cannot be read")
    code, output = run_cli(*base, "--nonmembers", bundle["nonmembers"], "--threshold", "sample:auc=0.6")
    assert_one_line_error(code, output, "--threshold sample:auc=0.6", "auc_upper")
    assert not (tmp_path / "p.json").exists()
    code, output = run_cli("gate", bundle["out"], "--plan", tmp_path / "none.json")
    assert_one_line_error(code, output, str(tmp_path / "none.json"), "cannot be read")
