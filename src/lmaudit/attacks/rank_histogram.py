"""Song and Shmatikov's user-level audit (KDD 2019), the baseline Shejwalkar et al. compare against: each user is the
histogram of the ranks of their samples' true labels, and a logistic regression trained on the shadow users' histograms
tells members from non-members. Song and Shmatikov rank the words of generated text; Shejwalkar et al. (Section 3) carry
it over to classifiers by ranking the true label among the classes, as here."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lmaudit.attacks.base import (
    LABEL_RANKS,
    AttackInput,
    AttackSpec,
    NotRun,
    Scored,
    Threshold,
    logistic_regression,
    user_frame,
)
from lmaudit.data.roles import AUDITED_ROLES, SHADOW_MEMBER, SHADOW_ROLES


def rank_histograms(ranks: np.ndarray, users: np.ndarray, n_ranks: int) -> pd.DataFrame:
    """Per user (rows sorted by id): the share of the user's samples whose true label has rank 1, 2, ..., `n_ranks`
    (columns; each row sums to 1)."""
    ranks = np.asarray(ranks, dtype=int)
    one_hot = pd.DataFrame(ranks[:, None] == np.arange(1, n_ranks + 1)[None, :], columns=range(1, n_ranks + 1))
    return one_hot.astype(float).groupby(np.asarray(users), sort=True).mean()


def rank_histogram(data: AttackInput) -> Scored | NotRun:
    """The log-odds, under a regression fitted on shadow users, that the user's rank histogram is a member's."""
    ranks = np.asarray(data.values[LABEL_RANKS], dtype=float)
    shadow_rows = data.samples["role"].isin(SHADOW_ROLES).to_numpy()
    audited_rows = data.samples["role"].isin(AUDITED_ROLES).to_numpy()
    shadow, audited = data.samples[shadow_rows], data.samples[audited_rows]
    if shadow["group_id"].isna().any():
        return NotRun("shadow samples without group_id (the user): the audit model is fitted on shadow users")
    n_ranks = int(ranks[shadow_rows | audited_rows].max())
    shadow_users = rank_histograms(ranks[shadow_rows], shadow["group_id"].to_numpy(), n_ranks)
    is_member = (shadow.groupby("group_id", sort=True)["role"].first() == SHADOW_MEMBER).loc[shadow_users.index]
    if is_member.nunique() < 2:
        return NotRun("the shadow users are all members or all non-members: the audit model needs both")
    audited_users = rank_histograms(ranks[audited_rows], audited["group_id"].to_numpy(), n_ranks)
    regression = logistic_regression(data.seed).fit(shadow_users.to_numpy(), is_member.to_numpy())
    logit = pd.Series(regression.decision_function(audited_users.to_numpy()), index=audited_users.index)
    return Scored(user_frame(audited, logit), [Threshold("shadow", 0.0)],
                  {"ranks": n_ranks, "coefficients": regression[-1].coef_[0].tolist(),
                   "intercept": float(regression[-1].intercept_[0])})


SPEC = AttackSpec(
    "rank_histogram", "Song and Shmatikov's user-level audit as Shejwalkar et al. run it as their baseline: a logistic "
    "regression, trained on shadow users, on the histogram of the ranks of the user's true labels",
    reads=(LABEL_RANKS,), build=rank_histogram, level="group", fitted_on=SHADOW_ROLES,
    score_label="membership score = log-odds of the regression on the user's rank histogram",
    paper="Song and Shmatikov 2019, Auditing data provenance in text-generation models (KDD); as the baseline of "
          "Shejwalkar et al. 2021, Section 3",
)
