"""The README's "Gate a release" block, run as written against a demo of the README's size (the quick demo's patients,
fewer epochs): every command runs; the gate never passes a risk threshold at a level whose attacks expose most of its
members beyond chance (the trial's finding: it passed one that exposed 19 of 24 member patients); a threshold the demo's
data cannot decide is refused; and after the PDF and the model card, verify finds an edited page, PDF or card section.
(A model that learnt nothing is not failed: tests/report/test_gate.py and the null lab, tests/studies/test_null_lab.py.)"""

import json
import os
import re
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from lmaudit.cli import main
from lmaudit.report.document import load_report
from lmaudit.report.gate import FAIL, most_exposed
from lmaudit.studies.setup import DEMO_SIZES
from tests.helpers import assert_one_line_error, run_cli
from tests.readme import section_blocks


def gate_block() -> list[list[str]]:
    """The arguments of each command of the README's "Gate a release" code block."""
    return [shlex.split(command)[1:] for command in section_blocks("Gate a release")[0]]


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory):
    """A working folder whose runs/demo is the quick demo's patients (24 members, 12 non-members per hospital), its
    models trained 8 epochs: the README's gate block's counts, in a fraction of the time."""
    root = tmp_path_factory.mktemp("readme-gate")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(DEMO_SIZES, "quick", replace(DEMO_SIZES["quick"], epochs=3, bootstrap=100))
        result = CliRunner().invoke(main, ["-q", "demo", "--size", "quick", "--out", str(root / "runs" / "demo")])
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="module")
def readme_block(demo_folder):
    """Each command of the README's gate block run as written in the demo's folder: (exit status, output) by command."""
    ran = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(demo_folder)
        for args in gate_block():
            ran[args[0]] = run_cli(*args)
    return ran


def test_the_readme_gate_block_runs_as_written_and_never_passes_most_members_exposed(demo_folder, readme_block):
    assert list(readme_block) == ["plan", "audit", "gate", "pdf", "model-card", "verify"]
    for command, (code, output) in readme_block.items():
        assert code in ((0, 1, 4) if command == "gate" else (0,)), (command, output)
    gate = readme_block["gate"][1]
    plan = json.loads((demo_folder / "plan.json").read_text())
    for threshold in (t for t in plan["thresholds"] if t["metric"] == "risk"):
        level = load_report(demo_folder / "runs/gated").summary.levels[threshold["level"]]
        line = next(line for line in gate.splitlines() if f"{threshold['level']}:risk=" in line)
        if most_exposed(level) or level.risk == "high":
            assert line.startswith(FAIL), line
    assert "ran 11 attacks" in gate, gate  # the demo's attacks: the plan fixed its strength


def test_a_threshold_the_demos_data_cannot_decide_is_refused(demo_folder, monkeypatch, tmp_path):
    monkeypatch.chdir(demo_folder)
    plan = gate_block()[0]
    plan[plan.index("--out") + 1] = str(tmp_path / "low.json")
    plan[plan.index("patient:risk=moderate")] = "patient:risk=low"
    code, output = run_cli(*plan)
    assert_one_line_error(code, output, "--threshold group:risk=low (patient level)", "about 581",
                          "12 planned", "--accept-undecidable")
    assert not (tmp_path / "low.json").exists()


@pytest.mark.parametrize("edited", ["runs/gated/report.html", "runs/gated/report.pdf", "runs/demo/models/target/README.md"])
def test_verify_finds_an_edited_page_pdf_or_card_section(demo_folder, readme_block, monkeypatch, edited):
    """The trial's finding: report.html's badge changed to 'low risk' and a byte of report.pdf flipped left verify at
    exit 0."""
    monkeypatch.chdir(demo_folder)
    path = Path(edited)
    original = path.read_bytes()
    try:
        if path.suffix == ".pdf":
            middle = len(original) // 2
            path.write_bytes(original[:middle] + bytes([original[middle] ^ 1]) + original[middle + 1:])
        else:
            text = original.decode()
            pattern = r"badge (high|moderate|inconclusive)\">\1" if path.suffix == ".html" else r"\| (high|moderate|inconclusive) \|"
            changed = re.sub(pattern, 'badge low">low' if path.suffix == ".html" else "| low |", text, count=1)
            assert changed != text
            path.write_text(changed)
        code, output = run_cli("verify", "runs/gated")
        assert code == 3 and os.path.normpath(path) in output, output
    finally:
        path.write_bytes(original)
    assert run_cli("verify", "runs/gated")[0] == 0
