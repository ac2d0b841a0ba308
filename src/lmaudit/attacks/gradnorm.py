"""GradNorm (as in the MIMIR toolkit): the norm of the gradient of the sample's own loss with respect to the target's
parameters; training has driven a member's gradient towards zero."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import GRADIENT_NORMS, AttackInput, AttackSpec, Scored, evaluated_rows, score_frame


def gradnorm_score(gradient_norms: np.ndarray) -> np.ndarray:
    """-(mean over parameter tensors of each tensor's gradient L2 norm), as MIMIR averages them: higher = member."""
    return -np.asarray(gradient_norms, dtype=float).mean(axis=1)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    return Scored(score_frame(data.samples[rows], gradnorm_score(data.values[GRADIENT_NORMS][rows])))


SPEC = AttackSpec(
    name="gradnorm",
    description="the mean over parameter tensors of the norm of the gradient of the sample's loss, negated",
    reads=(GRADIENT_NORMS,),
    build=build,
    score_label="membership score = -mean gradient norm",
    paper="Duan et al. 2024, Do membership inference attacks work on large language models? (COLM; the MIMIR toolkit)",
)
