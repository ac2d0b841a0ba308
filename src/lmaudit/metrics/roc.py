"""ROC metrics from membership scores (members are the positives)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import mannwhitneyu
from sklearn.metrics import roc_curve


@dataclass(frozen=True)
class TprAtFpr:
    """The best true-positive rate whose false-positive rate is at most alpha, with its counts."""

    alpha: float
    tpr: float
    fpr: float
    tp: int
    fp: int
    threshold: float
    resolution_limited: bool


def roc_points(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every ROC point (fpr, tpr, threshold), one per distinct score, from (0, 0)."""
    fpr, tpr, thresholds = roc_curve(labels, scores, drop_intermediate=False)
    return fpr, tpr, thresholds


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve; a tie between a member and a non-member counts 1/2."""
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=float)
    n_members, n_nonmembers = int(labels.sum()), int((~labels).sum())
    if n_members == 0 or n_nonmembers == 0:
        raise ValueError("an AUC needs at least one member and one non-member")
    # Mann-Whitney U / (n1 * n0) is the AUC; faster than roc_auc_score (benchmarks/auc.py), and an audit computes
    # about a thousand.
    return float(mannwhitneyu(scores[labels], scores[~labels], method="asymptotic").statistic / (n_members * n_nonmembers))


def tpr_at_fpr(labels: np.ndarray, scores: np.ndarray, alpha: float) -> TprAtFpr:
    """Step lookup (no interpolation) of the largest ROC point with FPR <= alpha."""
    labels = np.asarray(labels).astype(bool)
    n_members, n_nonmembers = int(labels.sum()), int((~labels).sum())
    fpr, tpr, thresholds = roc_points(labels, scores)
    best = int(np.flatnonzero(fpr <= alpha + 1e-12)[-1])
    return TprAtFpr(
        alpha=alpha,
        tpr=float(tpr[best]),
        fpr=float(fpr[best]),
        tp=int(round(tpr[best] * n_members)),
        fp=int(round(fpr[best] * n_nonmembers)),
        threshold=float(thresholds[best]),
        resolution_limited=n_nonmembers < 1.0 / alpha,
    )
