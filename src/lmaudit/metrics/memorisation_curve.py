"""How much a run without DP memorises a rare record: canaries planted at several repetition counts (1, 4, 16 copies),
each tier's planted canaries against the never-planted ones (the controls, shared by every tier).

Per tier: the rank AUC with its interval (canaries are independent draws, resampled one by one); the TPR at the
threshold that at most `fpr` (1%) of the controls exceed, with Clopper-Pearson's interval on the tier's planted count
(given the threshold); and the one-sided Mann-Whitney p-value of planted above controls. The claim "the run memorises
canaries planted r times" is made where Holm's step-down over the tiers rejects at `level`: under the null (nothing of
any canary learned) the coins are independent of the scores, so every tier's planted scores are exchangeable with the
controls', and the chance of any false claim is at most `level` whatever the tiers' dependence through their shared
controls (docs/statistics.md, "Memorisation curve"). The smallest repetition count claimed is the curve's answer. No
torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import mannwhitneyu

from lmaudit.metrics.auc_interval import auc_interval
from lmaudit.metrics.results import Interval
from lmaudit.metrics.roc import auc, tpr_at_fpr
from lmaudit.metrics.uncertainty import clopper_pearson

CURVE_FPR = 0.01
CURVE_LEVEL = 0.05


def controls_needed(fpr: float = CURVE_FPR) -> int:
    """The fewest controls that put a threshold at `fpr`: one control above it in 1/fpr (100 at 1%)."""
    return int(np.ceil(1 / fpr - 1e-9))


@dataclass(frozen=True)
class RepetitionTier:
    """One repetition count's canaries against the controls: counts, AUC [95%], TPR at the controls' `fpr` threshold
    [95%] (None with fewer controls than `controls_needed`), the one-sided p-value, Holm's adjusted one, and whether
    the run is claimed to memorise them. `exposure_median` (bits): the planted secrets' median exposure, and
    `given_back`: how many of them greedy decoding reproduces from their prefix, where measured."""

    repeats: int
    planted: int
    controls: int
    auc: float
    auc_ci: Interval
    tpr: float | None
    tpr_ci: Interval | None
    p_value: float
    adjusted_p_value: float
    memorised: bool
    exposure_median: float | None = None
    given_back: int | None = None


@dataclass(frozen=True)
class MemorisationCurve:
    """The curve: each tier, the FPR of its TPRs, the claims' family-wise level, the smallest repetition count
    claimed memorised (None: none), and how many never-planted secrets greedy decoding gives back (where measured: a
    control that should read 0)."""

    fpr: float
    level: float
    tiers: list[RepetitionTier]
    smallest_memorised: int | None
    controls_given_back: int | None = None


def holm_adjusted(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error under any dependence)."""
    p_values = np.asarray(p_values, dtype=float)
    order = np.argsort(p_values)
    steps = (len(p_values) - np.arange(len(p_values))) * p_values[order]
    adjusted = np.empty_like(p_values)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(steps))
    return adjusted


def higher_p_value(planted: np.ndarray, controls: np.ndarray) -> float:
    """One-sided Mann-Whitney p-value of the planted scores above the controls' (exact for small tie-free samples, else
    the normal approximation with the tie correction); 1 where every score ties."""
    if np.ptp(np.concatenate([planted, controls])) == 0:
        return 1.0
    return float(mannwhitneyu(planted, controls, alternative="greater", method="auto").pvalue)


def tier_p_values(scores: np.ndarray, included: np.ndarray, repeats: np.ndarray) -> dict[int, float]:
    """Each planted tier's one-sided p-value against every never-planted canary, by repetition count (ascending)."""
    controls = scores[~included]
    return {int(count): higher_p_value(scores[included & (repeats == count)], controls)
            for count in sorted(set(repeats[included].tolist()))}


def memorised_counts(p_values: dict[int, float], level: float = CURVE_LEVEL) -> dict[int, tuple[float, bool]]:
    """Each count's Holm-adjusted p-value and whether the run is claimed to memorise canaries planted that often."""
    adjusted = holm_adjusted(np.array(list(p_values.values()))) if p_values else np.array([])
    return {count: (float(p), bool(p <= level)) for count, p in zip(p_values, adjusted, strict=True)}


def memorisation_curve(scores: np.ndarray, included: np.ndarray, repeats: np.ndarray,
                       exposure: np.ndarray | None = None, given_back: np.ndarray | None = None,
                       fpr: float = CURVE_FPR, level: float = CURVE_LEVEL, n_boot: int = 1000,
                       seed: int = 0) -> MemorisationCurve:
    """The curve from every canary's score (higher = guessed planted), its coin (`included`) and its tier's repetition
    count (`repeats`; an unplanted canary's tier is ignored: all unplanted canaries are every tier's controls), and,
    where measured, the secrets' exposure in bits and whether greedy decoding gives each back."""
    scores, included, repeats = np.asarray(scores, float), np.asarray(included, bool), np.asarray(repeats)
    controls = scores[~included]
    if not len(controls):  # every coin came up planted: nothing to compare with
        return MemorisationCurve(fpr, level, [], None)
    p_values = tier_p_values(scores, included, repeats)
    claims = memorised_counts(p_values, level)
    tiers = []
    for count, p_value in p_values.items():
        tier = included & (repeats == count)
        labels = np.concatenate([np.ones(tier.sum(), bool), np.zeros(len(controls), bool)])
        both = np.concatenate([scores[tier], controls])
        value = auc(labels, both)
        point = tpr_at_fpr(labels, both, fpr) if len(controls) >= controls_needed(fpr) else None
        tiers.append(RepetitionTier(
            repeats=count, planted=int(tier.sum()), controls=len(controls), auc=value,
            auc_ci=auc_interval(labels, both, value, n_boot=n_boot, seed=seed), tpr=point.tpr if point else None,
            tpr_ci=clopper_pearson(point.tp, int(tier.sum())) if point else None, p_value=p_value,
            adjusted_p_value=claims[count][0], memorised=claims[count][1],
            exposure_median=float(np.median(exposure[tier])) if exposure is not None else None,
            given_back=int(given_back[tier].sum()) if given_back is not None else None))
    claimed = [tier.repeats for tier in tiers if tier.memorised]
    return MemorisationCurve(fpr, level, tiers, min(claimed) if claimed else None,
                             int(given_back[~included].sum()) if given_back is not None else None)
