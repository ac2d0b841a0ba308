"""Membership scores from signals. Convention: higher score = more likely a member, always."""

from __future__ import annotations

import numpy as np
import pandas as pd


def loss_score(target_loss: np.ndarray) -> np.ndarray:
    """Loss attack (Yeom; Jagannatha): a lower target loss means more likely a member."""
    return -np.asarray(target_loss, dtype=float)


def likelihood_ratio_score(target_loss: np.ndarray, reference_loss: np.ndarray) -> np.ndarray:
    """Likelihood-ratio attack (Mireshghallah Eq. 1): E_reference - E_target, in nats."""
    return np.asarray(reference_loss, dtype=float) - np.asarray(target_loss, dtype=float)


def aggregate_by_group(scores: np.ndarray, group_ids: np.ndarray, how: str = "mean") -> pd.Series:
    """One score per group (mean, min, max or var of its samples' scores), indexed by group id."""
    frame = pd.DataFrame({"group": group_ids, "score": np.asarray(scores, dtype=float)})
    return frame.groupby("group", sort=True)["score"].agg(how)
