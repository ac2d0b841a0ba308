"""Whether a canary audit's scores run against its key: planted canaries scored systematically *below* the unplanted
ones, which no model that merely failed to memorise produces.

Under the null of a canary audit (the model holds nothing of the canaries) the key is a fair coin per canary drawn
apart from everything the scores depend on, so planted and unplanted scores are exchangeable and a rank test of one
against the other holds its level whatever the scores' distribution, ties included. A model that memorised scores the
planted canaries higher. Planted canaries far *below* the unplanted ones mean the scores are anti-correlated with the
key: something between planting, training, saving and scoring turned the canaries' signal around (output embedding
rows lost on saving, scores negated, the key of other canaries). The one-run bounds then read 0, which looks like
"nothing proved" but is no audit at all, so the report calls it INVALID.

The test is the one-sided Mann-Whitney U test of planted below unplanted (scipy, its normal approximation with the
tie correction: new-token canaries whose rows never trained all tie exactly), at BELOW_CHANCE_LEVEL; docs/statistics.md
gives its false alarms under a null with heavy ties and few canaries, and its power.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BELOW_CHANCE_LEVEL = 1e-3  # a false alarm in one audit of a thousand: a valid audit is almost never called invalid


@dataclass(frozen=True)
class RankCheck:
    """Planted against unplanted canaries' scores: how many of each, the rank AUC (the chance a planted canary outscores
    an unplanted one, ties counted half; 0.5 is chance), the one-sided p-value of planted below unplanted, and the level
    below which the audit is invalid. `auc` and `p_below` are None where a side is empty."""

    planted: int
    unplanted: int
    auc: float | None
    p_below: float | None
    level: float

    @property
    def invalid(self) -> bool:
        """The planted canaries score below the unplanted ones beyond what chance gives at `level`."""
        return self.p_below is not None and self.p_below < self.level


def rank_check(scores: np.ndarray, included: np.ndarray, level: float = BELOW_CHANCE_LEVEL) -> RankCheck:
    """The one-sided Mann-Whitney test of the planted canaries' scores (`included`) below the unplanted ones'."""
    from scipy.stats import mannwhitneyu

    scores = np.asarray(scores, dtype=float)
    included = np.asarray(included, dtype=bool)
    planted, unplanted = scores[included], scores[~included]
    if not len(planted) or not len(unplanted):
        return RankCheck(len(planted), len(unplanted), None, None, level)
    if np.ptp(scores) == 0:  # every score alike: nothing runs against the key (the test's variance would be 0)
        return RankCheck(len(planted), len(unplanted), 0.5, 1.0, level)
    result = mannwhitneyu(planted, unplanted, alternative="less", method="asymptotic", use_continuity=True)
    return RankCheck(len(planted), len(unplanted), float(result.statistic) / (len(planted) * len(unplanted)),
                     float(result.pvalue), level)
