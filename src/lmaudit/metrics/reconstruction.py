"""Reconstruction of sensitive fields (in the spirit of Lehman et al. 2021 on clinical BERT), pure over candidate
scores, no torch: each span (a name, a diagnosis, a number) is hidden, every candidate of its kind is put in its place
and scored under the model (signals/reconstruction.py), and the true value's rank among the candidates says how well
the model restores it.

- rank: 1 + the candidates scored strictly above the truth + half of those tied with it (mid-rank: a model that scores
  every candidate alike ranks the truth in the middle, never first), among the candidates scored for that span: one
  cut off by truncation (NaN) is no candidate of that span, neither above, below nor tied;
- top-1: the truth scored strictly above every other candidate;
- exposure (Carlini et al. 2019, read on ranks): log2(candidates) - log2(rank), in bits, over the span's scored
  candidates: 0 when the truth comes last, log2(candidates) when it comes first;
- chance: a guess that knows nothing picks the truth first with probability 1 / the span's scored candidates; a guess
  that knows only how often each value occurs in the other audited spans (the span's own occurrence left out, which
  would favour the truth) is the frequency baseline, ranked among the same candidates. Members are read against
  non-members: a model that has learnt which diagnoses are common, not whose they are, restores both alike.
- rates per span have intervals clustered by patient (one patient's spans are correlated: Clopper-Pearson on
  Korn-Graubard effective counts), per patient exact ones.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from lmaudit.metrics.extraction import group_rates_by_side, rates_by_side


def truth_ranks(scores: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Mid-rank (1 = best) of each row's true candidate among its scored candidates (rows: spans; columns: candidates;
    higher = likelier; NaN marks a candidate not scored for that row, which takes no part)."""
    scores = np.asarray(scores, dtype=float)
    true_scores = scores[np.arange(len(scores)), np.asarray(truth)]
    # comparisons with NaN are False, so an unscored candidate is neither above nor tied
    above = np.sum(scores > true_scores[:, None], axis=1)
    tied = np.sum(scores == true_scores[:, None], axis=1) - 1  # the truth ties itself
    return 1.0 + above + tied / 2.0


def candidates_scored(scores: np.ndarray) -> np.ndarray:
    """(spans,) how many candidates each span was ranked among: those with a score (not NaN)."""
    return np.sum(~np.isnan(np.asarray(scores, dtype=float)), axis=1)


def exposure_bits(ranks: np.ndarray, n_candidates: np.ndarray) -> np.ndarray:
    """log2(candidates) - log2(rank), in bits (`n_candidates`: one number for all spans or one per span)."""
    return np.log2(np.asarray(n_candidates, dtype=float)) - np.log2(np.asarray(ranks, dtype=float))


def frequency_ranks(truth_values: np.ndarray, counts: dict[str, int], candidates: list[str],
                    scored: np.ndarray | None = None) -> np.ndarray:
    """The truth's mid-rank under the frequency baseline: candidates ordered by how often they occur among the audited
    spans (`counts`, every span's value counted), the span's own occurrence left out; among each span's `scored`
    candidates ((spans, candidates) booleans; None: all)."""
    index = {value: column for column, value in enumerate(candidates)}
    truth = np.array([index[value] for value in truth_values], dtype=int)
    frequency = np.tile(np.array([counts.get(value, 0) for value in candidates], dtype=float), (len(truth), 1))
    frequency[np.arange(len(truth)), truth] -= 1  # a span's own value would otherwise count for itself
    if scored is not None:
        frequency[~np.asarray(scored, bool)] = np.nan
    return truth_ranks(frequency, truth)


def reconstruction_summary(ranks: np.ndarray, baseline_ranks: np.ndarray, n_candidates: int, is_member: np.ndarray,
                           clusters: np.ndarray | None = None, ranked_among: np.ndarray | None = None) -> dict:
    """One field kind's results, members against non-members: top-1 rates per span (95% intervals clustered by
    `clusters`, the spans' cluster_codes where any has a group) and, with `clusters`, per group (a group counts when
    any of its spans is restored first; exact intervals), the frequency baseline's top-1 rate per side, chance (the
    mean of 1 / each span's candidates), mean rank and mean exposure (bits) per side. `n_candidates`: the kind's
    candidates; `ranked_among`: how many of them each span was ranked among (None: all)."""
    is_member = np.asarray(is_member, bool)
    ranked_among = np.full(len(is_member), n_candidates) if ranked_among is None else np.asarray(ranked_among)
    top1, baseline_top1 = np.asarray(ranks) == 1.0, np.asarray(baseline_ranks) == 1.0
    exposure = exposure_bits(ranks, ranked_among)
    sides = (("member", is_member), ("nonmember", ~is_member))
    summary = {
        "candidates": int(n_candidates), "chance_top1": float(np.mean(1.0 / ranked_among)) if len(ranked_among) else float("nan"),
        "top1": {side: asdict(value) for side, value in rates_by_side(top1, is_member, clusters).items()},
        "frequency_baseline_top1": {side: asdict(value) for side, value in
                                    rates_by_side(baseline_top1, is_member, clusters).items()},
        "mean_rank": {side: float(np.mean(ranks[mask])) if mask.any() else float("nan") for side, mask in sides},
        "mean_exposure_bits": {side: float(np.mean(exposure[mask])) if mask.any() else float("nan") for side, mask in sides},
    }
    if clusters is not None:
        summary["group_top1"] = {side: asdict(value) for side, value in group_rates_by_side(top1, is_member, clusters).items()}
    return summary
