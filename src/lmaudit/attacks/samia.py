"""SaMIA (Kaneko et al. 2024): membership from generated text alone, for a model behind an API that returns no
probabilities. The target continues the first half of each text several times (signals/samia.py); a member's true
second half comes back more often, so the mean ROUGE-1 recall of the continuations against it is higher for members.
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import SAMPLED_OVERLAPS, AttackInput, AttackSpec, Scored, evaluated_rows, score_frame


def samia_score(overlaps: np.ndarray) -> np.ndarray:
    """(n,) mean over each row's draws of the ROUGE-1 recall (a share, 0 to 1) from (n, d) values."""
    return np.nanmean(np.asarray(overlaps, dtype=float), axis=1)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples long enough to halve (at least 2 words)."""
    rows = evaluated_rows(data) & ~np.isnan(data.values[SAMPLED_OVERLAPS]).all(axis=1)
    overlaps = data.values[SAMPLED_OVERLAPS][rows]
    return Scored(score_frame(data.samples[rows], samia_score(overlaps)), calibration={"draws": overlaps.shape[1]})


SPEC = AttackSpec(
    name="samia",
    description="SaMIA: the mean ROUGE-1 recall of sampled continuations of the text's first half against its second "
                "half (generated text only)",
    reads=(SAMPLED_OVERLAPS,),
    build=build,
    score_label="membership score = mean ROUGE-1 recall of the continuations",
    paper="Kaneko et al. 2024, Sampling-based pseudo-likelihood for membership inference attacks (arXiv 2404.11262)",
)
