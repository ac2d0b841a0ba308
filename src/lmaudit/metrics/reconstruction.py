"""Reconstruction of sensitive fields (in the spirit of Lehman et al. 2021 on clinical BERT), pure over candidate
scores, no torch: each span (a name, a diagnosis, a number) is hidden, every candidate of its kind is put in its place
and scored under the model (signals/reconstruction.py), and the true value's rank among the candidates says how well
the model restores it.

- rank: 1 + the candidates scored strictly above the truth + half of those tied with it (mid-rank: a model that scores
  every candidate alike ranks the truth in the middle, never first);
- top-1: the truth scored strictly above every other candidate;
- exposure (Carlini et al. 2019, read on ranks): log2(candidates) - log2(rank), in bits: 0 when the truth comes last,
  log2(candidates) when it comes first;
- chance: a guess that knows nothing picks the truth first with probability 1 / candidates; a guess that knows only how
  often each value occurs in the audited texts is the frequency baseline. Members are read against non-members: a
  model that has learnt which diagnoses are common, not whose they are, restores both alike.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from lmaudit.metrics.extraction import rate, rates_by_side


def truth_ranks(scores: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Mid-rank (1 = best) of each row's true candidate among its scores (rows: spans; columns: candidates; higher =
    likelier; NaN marks a candidate not scored for that row)."""
    scores = np.asarray(scores, dtype=float)
    true_scores = scores[np.arange(len(scores)), np.asarray(truth)]
    above = np.sum(scores > true_scores[:, None], axis=1)
    tied = np.sum(scores == true_scores[:, None], axis=1) - 1  # the truth ties itself
    return 1.0 + above + tied / 2.0


def exposure_bits(ranks: np.ndarray, n_candidates: np.ndarray) -> np.ndarray:
    """log2(candidates) - log2(rank), in bits."""
    return np.log2(np.asarray(n_candidates, dtype=float)) - np.log2(np.asarray(ranks, dtype=float))


def frequency_ranks(truth_values: np.ndarray, counts: dict[str, int], candidates: list[str]) -> np.ndarray:
    """The truth's mid-rank under the frequency baseline: candidates ordered by how often they occur (`counts`)."""
    frequency = np.array([counts.get(value, 0) for value in candidates], dtype=float)
    index = {value: column for column, value in enumerate(candidates)}
    truth = np.array([index[value] for value in truth_values])
    return truth_ranks(np.broadcast_to(frequency, (len(truth), len(candidates))), truth)


def reconstruction_summary(ranks: np.ndarray, baseline_ranks: np.ndarray, n_candidates: int, is_member: np.ndarray,
                           groups: np.ndarray | None = None) -> dict:
    """One field kind's results, members against non-members: top-1 rates (with 95% Clopper-Pearson intervals) per
    span and, with `groups`, per group (a group counts when any of its spans is restored first), the frequency
    baseline's top-1 rate per side, chance (1 / candidates), mean rank and mean exposure (bits) per side."""
    is_member = np.asarray(is_member, bool)
    top1, baseline_top1 = np.asarray(ranks) == 1.0, np.asarray(baseline_ranks) == 1.0
    exposure = exposure_bits(ranks, n_candidates)
    sides = (("member", is_member), ("nonmember", ~is_member))
    summary = {
        "candidates": int(n_candidates), "chance_top1": 1.0 / n_candidates,
        "top1": {side: asdict(value) for side, value in rates_by_side(top1, is_member).items()},
        "frequency_baseline_top1": {side: asdict(rate(baseline_top1[mask])) for side, mask in sides},
        "mean_rank": {side: float(np.mean(ranks[mask])) if mask.any() else float("nan") for side, mask in sides},
        "mean_exposure_bits": {side: float(np.mean(exposure[mask])) if mask.any() else float("nan") for side, mask in sides},
    }
    if groups is not None:
        summary["group_top1"] = {side: asdict(value) for side, value in rates_by_side(top1, is_member, groups).items()}
    return summary
