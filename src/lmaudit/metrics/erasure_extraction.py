"""Does a model still give the erased subjects' texts back? One model's greedy extraction of the forget and holdout
texts (a prefix given, the suffix reproduced token for token), per text and per subject: an estimate beside the
erasure verdict, not one of its tests. No torch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lmaudit.metrics.extraction import ExtractionRate, any_per_cluster, rate


@dataclass(frozen=True)
class ExtractionShares:
    """One model's exact greedy reproductions: of the forget and of the holdout texts (intervals clustered by subject),
    and of their subjects (a subject counts when any of its texts is reproduced; exact intervals)."""

    model: str
    forget_texts: ExtractionRate
    holdout_texts: ExtractionRate
    forget_subjects: ExtractionRate
    holdout_subjects: ExtractionRate


def extraction_shares(model: str, exact: np.ndarray, is_forget: np.ndarray, subjects: np.ndarray) -> ExtractionShares:
    """`model`'s shares of texts and subjects reproduced exactly (`exact`, one bool per text), forget against
    holdout (`is_forget`), each text's subject in `subjects`."""
    exact, is_forget, subjects = np.asarray(exact, bool), np.asarray(is_forget, bool), np.asarray(subjects)
    _, codes = np.unique(subjects, return_inverse=True)
    sides = {"forget": is_forget, "holdout": ~is_forget}
    texts = {side: rate(exact[mask], codes[mask]) for side, mask in sides.items()}
    by_subject = {side: rate(any_per_cluster(exact[mask], codes[mask])) for side, mask in sides.items()}
    return ExtractionShares(model, texts["forget"], texts["holdout"], by_subject["forget"], by_subject["holdout"])


@dataclass(frozen=True)
class ErasureExtraction:
    """The extraction estimate: prefix and suffix of `tokens` tokens each, and the shares of each model (before,
    after)."""

    tokens: int
    models: list[ExtractionShares]
