"""Neighbourhood attack (Mattern et al. 2023): the target's loss on a text against its mean loss on neighbours of the
text (a few words replaced by a masked LM's proposals); a memorised text is likelier than its close variants."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import NEIGHBOUR_LOSSES, TARGET_LOSS, AttackInput, AttackSpec, Scored, evaluated_rows, score_frame


def neighbourhood_score(target_loss: np.ndarray, neighbour_losses: np.ndarray) -> np.ndarray:
    """mean_j NLL(neighbour j) - NLL(x) (nats per token): higher = likelier a member."""
    return np.asarray(neighbour_losses, dtype=float).mean(axis=1) - np.asarray(target_loss, dtype=float)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    neighbours = data.values[NEIGHBOUR_LOSSES]
    scores = neighbourhood_score(data.values[TARGET_LOSS][rows], neighbours[rows])
    return Scored(score_frame(data.samples[rows], scores), calibration={"neighbours": int(neighbours.shape[1])})


SPEC = AttackSpec(
    name="neighbourhood",
    description="the target's mean NLL of neighbour texts (words replaced by a masked LM's proposals) minus its NLL of "
                "the text",
    reads=(TARGET_LOSS, NEIGHBOUR_LOSSES),
    build=build,
    score_label="membership score = mean NLL(neighbours) - NLL (nats)",
    paper="Mattern et al. 2023, Membership inference attacks against language models via neighbourhood comparison "
          "(ACL Findings)",
)
