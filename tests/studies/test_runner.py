"""The study runner: one record per cell read from that cell's own report, finished cells kept on a rerun (and redone
when their settings change), study.json and study.html written, the terminal table."""

import json

import numpy as np
import pandas as pd
import pytest

from lmaudit.audit import run
from lmaudit.data.scores import scores_from_table
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.report.cell_record import CellRecord
from lmaudit.report.study import study_lines
from lmaudit.studies.runner import Cell, StudyPlan, run_study
from tests.helpers import assert_document_round_trips


@pytest.fixture
def audits(monkeypatch):
    """run_audit replaced by an audit of generated losses whose member shift is the cell's `shift` (its config's
    target): no model is trained; the folders audited are recorded."""
    audited = []

    def fake_run_audit(config, progress=False, overwrite=False):
        audited.append(config.out)
        shift = float(config.target)
        rng = np.random.default_rng(0)
        roles = ["member", "nonmember", "population"] * 100
        losses = rng.normal(size=300) - shift * (np.array(roles) == "member")
        table = pd.DataFrame({"sample_id": [f"s{i}" for i in range(300)], "role": roles, "target_loss": losses})
        return run.attack_losses(scores_from_table(table, "generated"), config.out,
                                      EvaluationSettings(bootstrap=20)).report

    monkeypatch.setattr(run, "run_audit", fake_run_audit)
    return audited


def plan_of(shifts, prepared):
    from lmaudit.config import AuditConfig

    def cell(shift):
        def prepare(folder):
            prepared.append(shift)
            return AuditConfig(target=str(shift), out=str(folder))

        return Cell(f"shift-{shift}", {"shift": shift}, prepare)

    return StudyPlan(study="shifts", description="members' losses lowered by a shift", cells=[cell(s) for s in shifts],
                     x="shift", paper="a larger shift leaks more", shown=(("loss", "sample"),))


def test_each_cell_is_its_own_audit_and_finished_cells_are_kept(tmp_path, audits):
    prepared = []
    study = run_study(plan_of([0.0, 1.0, 2.0], prepared), tmp_path)
    assert prepared == [0.0, 1.0, 2.0] and len(audits) == 3
    for cell in study["cells"]:
        report = json.loads((tmp_path / "cells" / cell["cell"] / "report.json").read_text())
        loss = next(r for r in report["results"] if r["attack"] == "loss" and r["slice"] == "all")
        summary = next(s for s in cell["results"] if s["attack"] == "loss" and s["level"] == "sample")
        assert summary["auc"] == loss["auc"] and summary["auc_ci"] == loss["auc_ci"]
        population = next(t for t in loss["thresholds"] if t["rule"] == "population" and t["alpha"] == 0.1)
        assert summary["population_recall"] == population["recall"]
    aucs = [c["results"][0]["auc"] for c in study["cells"]]
    assert aucs == sorted(aucs) and aucs[0] < 0.6 < 0.9 < aucs[2]  # the shift is what leaks

    prepared.clear()
    again = run_study(plan_of([0.0, 1.0, 2.0, 3.0], prepared), tmp_path)  # a rerun with one more cell
    assert prepared == [3.0] and len(audits) == 4
    assert again["cells"][:3] == study["cells"]
    assert json.loads((tmp_path / "study.json").read_text())["cells"] == again["cells"]
    assert_document_round_trips(tmp_path / "study.json")
    html = (tmp_path / "study.html").read_text()
    assert html.count("<td class=\"l\">shift-") == 0 and html.count("data:image/png;base64,") == 1
    assert all(f"<td class=\"l\">{s:g}</td>" in html for s in (0.0, 1.0, 2.0, 3.0))
    # Each cell's report is one click away, by a link relative to the study's folder.
    assert all(f'<a href="cells/shift-{s}/report.html" title="the report of cell shift-{s}">' in html for s in (0.0, 1.0, 2.0, 3.0))


def test_a_cell_whose_settings_changed_is_redone(tmp_path, audits):
    prepared = []
    run_study(plan_of([1.0], prepared), tmp_path)
    record = json.loads((tmp_path / "cells" / "shift-1.0" / "cell.json").read_text())
    record["settings"]["shift"] = 5.0  # as if an older version of the study had run this folder otherwise
    (tmp_path / "cells" / "shift-1.0" / "cell.json").write_text(json.dumps(record))
    run_study(plan_of([1.0], prepared), tmp_path)
    assert prepared == [1.0, 1.0]


def test_a_cell_record_that_is_not_a_cell_record_is_redone(tmp_path, audits):
    """cell.json is read back only where it matches its model (report/cell_record.py); one with a misspelt field, as
    another lmaudit might have written, is redone rather than tabulated."""
    prepared = []
    run_study(plan_of([1.0], prepared), tmp_path)
    path = tmp_path / "cells" / "shift-1.0" / "cell.json"
    record = json.loads(path.read_text())
    CellRecord.model_validate(record)
    path.write_text(json.dumps({**record, "verdikt": record.pop("verdict")}))
    run_study(plan_of([1.0], prepared), tmp_path)
    assert prepared == [1.0, 1.0] and "verdict" in json.loads(path.read_text())


def test_the_terminal_table_has_a_line_per_cell(tmp_path, audits):
    study = run_study(plan_of([0.0, 2.0], []), tmp_path)
    lines = study_lines(study)
    assert lines[0].split()[:3] == ["shift", "loss", "sample"] and len(lines) == 4
    assert lines[3].split()[0] == "2" and f"{study['cells'][1]['results'][0]['auc']:.3f}" in lines[3]


def test_a_single_cell_study_has_its_table_but_no_plot_against_one_point(tmp_path, audits):
    run_study(plan_of([1.0], []), tmp_path)
    html = (tmp_path / "study.html").read_text()
    assert "data:image/png;base64," not in html and '<td class="l">1</td>' in html


def test_what_a_cell_measures_is_kept_and_tabulated_after_its_settings(tmp_path, audits):
    from dataclasses import replace

    plan = plan_of([0.0, 2.0], [])
    measured = [replace(cell, measure=lambda shift=cell.settings["shift"]: {"epsilon": 10 * shift + 0.25, "k": None})
                for cell in plan.cells]
    study = run_study(replace(plan, cells=measured, grid_figure=False), tmp_path)
    assert [c["measured"] for c in study["cells"]] == [{"epsilon": 0.25, "k": None}, {"epsilon": 20.25, "k": None}]
    assert study_lines(study)[0].split()[:3] == ["shift", "epsilon", "k"]
    assert study_lines(study)[3].split()[:3] == ["2", "20.25", "-"]  # None: does not apply
    html = (tmp_path / "study.html").read_text()
    assert '<td class="l">20.25</td>' in html and "data:image/png;base64," not in html  # grid figure turned off
    assert json.loads((tmp_path / "cells" / "shift-2.0" / "cell.json").read_text())["measured"]["epsilon"] == 20.25


def test_cells_patterns_choose_the_cells_that_run(tmp_path, audits):
    from lmaudit.errors import InputError
    from lmaudit.studies.registry import only_cells

    prepared = []
    plan = plan_of([0.0, 1.0, 2.0], prepared)
    study = run_study(only_cells(plan, ["shift-1*", "shift-2*"]), tmp_path)
    assert prepared == [1.0, 2.0] and [c["cell"] for c in study["cells"]] == ["shift-1.0", "shift-2.0"]
    assert only_cells(plan, []) is plan
    with pytest.raises(InputError, match=r"--cells lstm-\*: no cell of the study shifts matches; its cells are "
                                         r"shift-0.0, shift-1.0, shift-2.0"):
        only_cells(plan, ["lstm-*"])
