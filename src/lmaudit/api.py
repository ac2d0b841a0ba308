"""The Python API: audit from a DataFrame of precomputed losses or of texts and get typed results, as in a notebook.

    >>> from lmaudit.api import audit_losses
    >>> results = audit_losses(losses)            # sample_id, role, target_loss[, reference_loss, group_id, ...]
    >>> results.verdict.risk, results.table()     # the verdict, and one row per attack, level and slice

Both functions validate their input as the command line does (an InputError names the row), run every attack the
data allows, write the same output folder (report.json, report.html, scores.parquet; a temporary one that is removed
unless `out` is given) and return `AuditResults`. docs/api.md has worked examples.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lmaudit.attacks.base import Skipped
from lmaudit.audit.finish import AuditOutcome
from lmaudit.audit.run import attack_losses, audit
from lmaudit.config import AuditConfig, validated
from lmaudit.data.corpus import corpus_from_table
from lmaudit.data.scores import scores_from_table
from lmaudit.metrics.results import AttackResult
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.report.document import ReportDocument, Summary, typed_document
from lmaudit.report.tables import largest_bound

# How results.table() names the TPR columns: the FPR levels the evaluation reports by default.
TABLE_ALPHAS = ("0.01", "0.001")


@dataclass(frozen=True)
class AuditResults:
    """An audit's findings: the verdict (report.json's `summary`), every attack's typed result (metrics.results), what
    could not be run and why, the per-sample scores (scores.parquet), the whole report.json document as its typed
    model (report/document.py), and the output folder (None when it was temporary)."""

    verdict: Summary
    results: list[AttackResult]
    skipped: list[Skipped]
    scores: pd.DataFrame
    report: ReportDocument
    out: Path | None

    def result(self, attack: str, level: str = "sample", signal: str | None = None, slice: str = "all") -> AttackResult:
        """The result of one attack at one level (and signal, when it ran on several) on one slice; KeyError if none."""
        for result in self.results:
            if (result.attack, result.level, result.slice) == (attack, level, slice) and signal in (None, result.signal):
                return result
        raise KeyError(f"no result for attack {attack!r} at level {level!r}, slice {slice!r}"
                       + (f", signal {signal!r}" if signal else ""))

    def table(self) -> pd.DataFrame:
        """One row per result: attack, signal, level, slice, counts, AUC with its 95% interval, TPR at 1% and 0.1% FPR
        with TP and FP, and the largest empirical epsilon lower bound (NaN where no threshold was calibrated)."""
        rows = []
        for r in self.results:
            row = {"attack": r.attack, "signal": r.signal, "level": r.level, "slice": r.slice, "members": r.n_members,
                   "nonmembers": r.n_nonmembers, "auc": r.auc, "auc_low": r.auc_ci[0], "auc_high": r.auc_ci[1]}
            for alpha in TABLE_ALPHAS:
                point = r.tpr_at_fpr.get(alpha)
                row |= {f"tpr@{alpha}": point.tpr if point else float("nan"), f"tp@{alpha}": point.tp if point else None,
                        f"fp@{alpha}": point.fp if point else None}
            bound = largest_bound(r)
            row["epsilon_lower_bound"] = float("nan") if bound is None else bound
            rows.append(row)
        return pd.DataFrame(rows)


def _results(outcome: AuditOutcome, out: Path | None) -> AuditResults:
    report = typed_document("report.json", outcome.report)
    return AuditResults(verdict=report.summary, results=outcome.results, skipped=outcome.skipped, scores=outcome.scores,
                        report=report, out=out)


def _in_folder(out: str | Path | None, run) -> AuditResults:
    """Run `run(folder)` in `out`, or in a temporary folder removed afterwards."""
    if out is not None:
        return _results(run(Path(out)), Path(out))
    with tempfile.TemporaryDirectory(prefix="lmaudit-") as folder:
        return _results(run(Path(folder)), None)


def audit_losses(losses: pd.DataFrame, out: str | Path | None = None, **evaluation) -> AuditResults:
    """Audit from precomputed losses (nats or any unit in which lower = more likely under the model): columns sample_id,
    role, target_loss, and optionally reference_loss (or reference_loss_1, _2, ...), group_id, subgroup_id, length.
    `evaluation`: EvaluationSettings fields (bootstrap, seed, slice_by, ...)."""
    settings = EvaluationSettings(**evaluation)
    signals = scores_from_table(losses, "DataFrame", settings.slice_by)
    return _in_folder(out, lambda folder: attack_losses(signals, folder, settings))


def audit_texts(texts: pd.DataFrame, target: str, out: str | Path, reference: str | list[str] = (),
                progress: bool = False, **options) -> AuditResults:
    """Audit a model on the texts of a DataFrame (columns text and role, optionally sample_id, group_id, subgroup_id,
    label, as in a corpus file): `target` and `reference` are model folders; `out` keeps the report and the signal
    store (a rerun reuses it); `options`: any other audit setting (signal={...}, evaluation={...}, shadow=..., ...)."""
    config: AuditConfig = validated({"target": target, "reference": reference, "out": str(out), **options}, "audit_texts")
    corpus = corpus_from_table(texts, "DataFrame", columns=config.evaluation.slice_by, names=config.columns)
    return _results(audit(config, progress, corpus), Path(out))
