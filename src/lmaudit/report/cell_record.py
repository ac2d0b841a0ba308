"""A study cell's record: cell.json in the cell's folder, and its line of study.json's `cells` (studies/runner.py writes
both; a rerun reads cell.json back instead of redoing the cell)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# A number a cell measured, or None where it was not (NaN and infinities are null in the file).
Measured = float | None


class CellResult(BaseModel):
    """One attack's summary on all of a cell's samples: AUC with its 95% interval, TPR at 1% and 0.1% FPR, precision,
    recall and advantage at the population 10% threshold, the mean-member-loss threshold's advantage, the largest
    epsilon lower bound, and the counts."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    attack: str
    signal: str
    level: str
    auc: Measured
    auc_ci: tuple[Measured, Measured]
    tpr_at_1pct_fpr: Measured
    tpr_at_01pct_fpr: Measured = Field(alias="tpr_at_0.1pct_fpr")
    population_precision: Measured
    population_recall: Measured
    population_advantage: Measured
    mean_member_loss_advantage: Measured
    epsilon_lower_bound: Measured
    n_members: int
    n_nonmembers: int


class CellRecord(BaseModel):
    """cell.json: the cell's name, the settings it studies, what it measured besides the audit, the seconds it took,
    its verdict and every attack's summary on all samples."""

    model_config = ConfigDict(extra="forbid")
    cell: str
    settings: dict[str, Any]
    measured: dict[str, Any]
    seconds: float
    verdict: Literal["high", "moderate", "low", "inconclusive"]
    results: list[CellResult]
