"""Loss attack (Yeom et al.; Jagannatha et al. 2021): a sample the target finds unusually likely is called a member."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    TARGET_LOSS,
    AttackInput,
    AttackSpec,
    Scored,
    Threshold,
    score_frame,
)
from lmaudit.attacks.thresholds import mean_member_loss_threshold
from lmaudit.data.roles import CALIBRATION_MEMBER, EVALUATED_ROLES


def loss_score(target_loss: np.ndarray) -> np.ndarray:
    """A lower target loss means more likely a member: the score is -loss (the signal's unit)."""
    return -np.asarray(target_loss, dtype=float)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples; the mu threshold from the calibration members, when given."""
    roles = data.samples["role"].to_numpy()
    target = np.asarray(data.values[TARGET_LOSS], dtype=float)
    evaluated = np.isin(roles, EVALUATED_ROLES)
    calibration = target[roles == CALIBRATION_MEMBER]
    thresholds = [Threshold("mean_member_loss", mean_member_loss_threshold(calibration))] if len(calibration) else []
    return Scored(score_frame(data.samples[evaluated], loss_score(target[evaluated])), thresholds)


SPEC = AttackSpec(
    name="loss",
    description="the target's loss, negated (Yeom et al.): fooled by how easy each text is for any model; its mu "
                "threshold is the calibration members' mean loss",
    reads=(TARGET_LOSS,),
    build=build,
    fitted_on=(CALIBRATION_MEMBER,),
    score_label="membership score = -E_target (nats)",
    paper="Yeom et al. 2018, Privacy risk in machine learning (CSF); Jagannatha et al. 2021, Membership inference "
          "attack susceptibility of clinical language models",
)
