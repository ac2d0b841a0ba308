"""LiRA (Carlini et al. 2022), offline: a Gaussian per sample fitted to the reference (OUT) models' losses of it; the
target's loss scored by the one-sided tail of that Gaussian. A member's loss sits far below what models that never saw
it give. The score is the tail's z = (mean - loss) / sd, for which Pr[reference loss >= target loss] = Phi(z): the same
order as the tail probability, without the ties it has where it rounds to 1 in floating point.

The statistic is the signal's loss (a language model's loss is close to Gaussian across models; the paper's logit
scaling is for a classifier's confidence). With fewer references than `lira_per_sample_variance_from` (64, the paper's
advice), the variance is one global value, the mean over samples of their references' variance, as the paper does with
few shadow models.
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    REFERENCE_LOSSES,
    TARGET_LOSS,
    AttackInput,
    AttackSpec,
    NotRun,
    Scored,
    evaluated_rows,
    score_frame,
)


def lira_score(target_loss: np.ndarray, reference_losses: np.ndarray, global_variance: bool) -> np.ndarray:
    """z = (mean - target loss) / sd of each sample's reference losses (n, R), Pr[Z >= target loss] = Phi(z) for Z ~
    N(mean, sd^2) (standard deviations): higher = likelier a member."""
    references = np.asarray(reference_losses, dtype=float)
    mean = references.mean(axis=1)
    variance = references.var(axis=1, ddof=1)
    variance = np.full_like(variance, variance.mean()) if global_variance else variance
    return (mean - np.asarray(target_loss, dtype=float)) / np.sqrt(variance)


def build(data: AttackInput) -> Scored | NotRun:
    """Scores of the audited and population samples; the variance is fitted on every scored sample's references."""
    references = np.asarray(data.values[REFERENCE_LOSSES], dtype=float)
    if references.shape[1] < 2:
        return NotRun(f"needs at least 2 reference models to fit each sample's Gaussian (got {references.shape[1]}); "
                      "give --reference more than once")
    global_variance = references.shape[1] < data.settings.lira_per_sample_variance_from
    scores = lira_score(data.values[TARGET_LOSS], references, global_variance)
    rows = evaluated_rows(data)
    return Scored(score_frame(data.samples[rows], scores[rows]),
                  calibration={"references": int(references.shape[1]),
                               "variance": "global" if global_variance else "per sample"})


SPEC = AttackSpec(
    name="lira",
    description="the target's loss against a Gaussian fitted to the reference models' losses of the same sample "
                "(its one-sided tail, as a z-score); needs 2 or more references",
    reads=(TARGET_LOSS, REFERENCE_LOSSES),
    build=build,
    score_label="membership score = z of the target loss under the references' Gaussian",
    paper="Carlini et al. 2022, Membership inference attacks from first principles (S&P)",
)
