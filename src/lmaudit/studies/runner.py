"""Run a study: a grid of cells, each training what it needs (unless already trained) and auditing into its own
folder, tabulated in study.json and study.html.

A finished cell is not redone: its record is kept in cells/<name>/cell.json with the settings it was run with, and a
rerun with the same settings reads it back. Cells share one signal store (`<out>.signals/` beside the study folder), so
a model scored in one cell (the reference, say) is not scored again in the next.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lmaudit.atomic import write_text
from lmaudit.config import AuditConfig
from lmaudit.locks import output_lock
from lmaudit.metrics.results import AttackResult
from lmaudit.report.cell_record import CellRecord
from lmaudit.report.document import ReportDocument, typed_report
from lmaudit.report.tables import largest_bound, population_threshold_at
from lmaudit.strict_json import json_ready, json_text

log = logging.getLogger(__name__)

CELL_FILE = "cell.json"
STUDY_FORMAT = 1


@dataclass(frozen=True)
class Cell:
    """One point of a study's grid: a folder name, the settings it studies (JSON values, the table's first columns),
    `prepare(folder)`, which trains what the cell needs unless done and returns the audit to run into `folder`, and
    `measure()`, what the cell measures besides the audit once it ran (e.g. the accountant's epsilon and the utility of
    its model; the table's next columns)."""

    name: str
    settings: dict
    prepare: Callable[[Path], AuditConfig]
    measure: Callable[[], dict] | None = None


@dataclass(frozen=True)
class StudyPlan:
    """A study's cells and how to read them: the setting on the plot's x axis, the one that separates its lines, the
    attacks and levels the table and plot show, what the paper found, and results computed from all cells at the end
    (`analyse(records)`: a dict added to study.json, e.g. a regression over the cells' samples, drawn by
    `analysis_figure`)."""

    study: str
    description: str
    cells: list[Cell]
    x: str
    paper: str
    shown: tuple[tuple[str, str], ...] = (("loss", "sample"), ("likelihood_ratio", "sample"), ("likelihood_ratio", "group"))
    series: str | None = None
    analyse: Callable[[list[dict]], dict] | None = None
    analysis_figure: Callable[[dict], str | None] | None = None  # study.json's document -> a base64 PNG, or None
    setup: dict = field(default_factory=dict)
    grid_figure: bool = True  # False where the cells are no one line per series (the analysis figure stands instead)


def result_summary(result: AttackResult) -> dict:
    """What a study keeps of one result: AUC with its interval, TPR at 1% and 0.1% FPR, precision, recall and advantage
    at the population threshold (alpha 0.1) and at the mean-member-loss threshold, the largest epsilon lower bound
    (None where not measured: a record read back from cell.json is the same)."""
    population = population_threshold_at(result)
    mean_loss = next((t for t in result.thresholds if t.rule == "mean_member_loss"), None)
    at_one, at_tenth = result.tpr_at_fpr.get("0.01"), result.tpr_at_fpr.get("0.001")
    return json_ready({
        "attack": result.attack, "signal": result.signal, "level": result.level, "auc": result.auc,
        "auc_ci": list(result.auc_ci), "tpr_at_1pct_fpr": at_one.tpr if at_one else None,
        "tpr_at_0.1pct_fpr": at_tenth.tpr if at_tenth else None,
        **{f"population_{key}": getattr(population, key) if population else None
           for key in ("precision", "recall", "advantage")},
        "mean_member_loss_advantage": mean_loss.advantage if mean_loss else None,
        "epsilon_lower_bound": largest_bound(result), "n_members": result.n_members, "n_nonmembers": result.n_nonmembers,
    })


def cell_record(cell: Cell, report: ReportDocument, seconds: float) -> dict:
    """A cell's line of study.json: its settings, what it measured, the seconds it took, and every attack's summary on
    all samples."""
    return {"cell": cell.name, "settings": cell.settings, "measured": cell.measure() if cell.measure else {},
            "seconds": round(seconds, 1), "verdict": report.summary.risk,
            "results": [result_summary(r) for r in report.results if r.slice == "all"]}


def _finished(folder: Path, cell: Cell) -> dict | None:
    """The cell's record from an earlier run with the same settings; None where there is none, or one that does not
    match CellRecord (written by another lmaudit: the cell is redone)."""
    try:
        text = (folder / CELL_FILE).read_text(encoding="utf-8")
        CellRecord.model_validate_json(text)
    except (OSError, ValueError):
        return None
    record = json.loads(text)
    return record if record["settings"] == json.loads(json.dumps(cell.settings)) else None


def run_study(plan: StudyPlan, out: str | Path, progress: bool = False, cell_figures: bool = False) -> dict:
    """Run every cell not finished before, then write study.json and study.html in `out`; returns study.json's document.
    A cell's own page draws no figures unless `cell_figures` (the study's page draws the study's): a cell's 24 figures
    are about a third of its audit."""
    from lmaudit.audit.run import run_audit
    from lmaudit.report.study import write_study

    out = Path(out)
    with output_lock(out):
        records = []
        for number, cell in enumerate(plan.cells, start=1):
            folder = out / "cells" / cell.name
            record = _finished(folder, cell)
            if record is not None:
                log.info("study %s: cell %d of %d (%s): finished earlier, kept", plan.study, number, len(plan.cells),
                         cell.name)
            else:
                log.info("study %s: cell %d of %d (%s): training what it needs and auditing", plan.study, number,
                         len(plan.cells), cell.name)
                started = time.monotonic()
                config = cell.prepare(folder).model_copy(update={"figures": cell_figures})
                report = run_audit(config, progress=progress, overwrite=True)  # a cell redone replaces its report
                record = cell_record(cell, typed_report(report), time.monotonic() - started)
                text = json_text(record)
                CellRecord.model_validate_json(text)  # a writer's bug is refused before the record is kept
                write_text(folder / CELL_FILE, text)
            records.append(record)
        study = {"format": STUDY_FORMAT, "study": plan.study, "description": plan.description, "paper": plan.paper,
                 "setup": plan.setup, "x": plan.x, "series": plan.series,
                 "shown": [list(pair) for pair in plan.shown], "grid_figure": plan.grid_figure, "cells": records,
                 "analysis": plan.analyse(records) if plan.analyse else None}
        write_study(out, study, plan.analysis_figure(study) if plan.analysis_figure and study["analysis"] else None)
    log.info("study %s: %d cells; wrote %s", plan.study, len(records), out / "study.html")
    return study
