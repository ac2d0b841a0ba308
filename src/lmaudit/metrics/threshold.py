"""Metrics of the decision `score >= threshold` on labelled members and non-members."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ThresholdMetrics:
    """Confusion counts and rates at one threshold; advantage = TPR - FPR (Jagannatha's leakage)."""

    tp: int
    fp: int
    tn: int
    fn: int
    precision: float
    recall: float
    fpr: float
    accuracy: float
    advantage: float


def threshold_metrics(labels: np.ndarray, scores: np.ndarray, threshold: float) -> ThresholdMetrics:
    """Precision (nan when nothing is called a member), recall, FPR, accuracy and advantage."""
    labels = np.asarray(labels).astype(bool)
    called = np.asarray(scores, dtype=float) >= threshold
    tp, fp = int((called & labels).sum()), int((called & ~labels).sum())
    fn, tn = int((~called & labels).sum()), int((~called & ~labels).sum())
    recall = tp / (tp + fn)
    fpr = fp / (fp + tn)
    return ThresholdMetrics(
        tp=tp, fp=fp, tn=tn, fn=fn,
        precision=tp / (tp + fp) if tp + fp else float("nan"),
        recall=recall,
        fpr=fpr,
        accuracy=(tp + tn) / len(labels),
        advantage=recall - fpr,
    )
