"""Shadow-calibrated classifier attacks (Shejwalkar et al., Algorithms 1-4), at sample and user level.

Every threshold, orientation and logistic regression here is fitted on shadow data only (the
shadow model's features on its own members and non-members); the audited samples are only
scored. Scores follow the package convention: higher = more likely a member, and each attack's
decision is `score >= its shadow threshold`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from lmaudit.attacks.suite import AttackScores, Threshold

SHADOW_ROLES = ("shadow_member", "shadow_nonmember")
AUDITED_ROLES = ("member", "nonmember")
USER_STATISTICS = ("avg", "min", "max", "var")
_PANDAS_STATISTIC = {"avg": "mean", "min": "min", "max": "max", "var": "var"}


def shadow_accuracy(member_scores: np.ndarray, nonmember_scores: np.ndarray, threshold: float) -> float:
    """Share of shadow samples classified right by `score >= threshold` (members) and `< threshold`."""
    correct = (np.asarray(member_scores) >= threshold).sum() + (np.asarray(nonmember_scores) < threshold).sum()
    return float(correct / (len(member_scores) + len(nonmember_scores)))


def best_separating_threshold(member_scores: np.ndarray, nonmember_scores: np.ndarray) -> float:
    """Algorithm 1, line 5: the threshold that classifies the most shadow samples right.

    Candidates are every observed score and the largest plus one (calling no shadow sample a
    member; finite, so that scores centred on it stay finite); among equally good candidates the
    lowest wins.
    """
    members = np.sort(np.asarray(member_scores, dtype=float))
    nonmembers = np.sort(np.asarray(nonmember_scores, dtype=float))
    observed = np.unique(np.concatenate([members, nonmembers]))
    candidates = np.append(observed, observed[-1] + 1.0)
    members_at_or_above = len(members) - np.searchsorted(members, candidates, side="left")
    nonmembers_below = np.searchsorted(nonmembers, candidates, side="left")
    return float(candidates[int(np.argmax(members_at_or_above + nonmembers_below))])


def classwise_thresholds(scores: np.ndarray, labels: np.ndarray, is_member: np.ndarray) -> tuple[dict[str, float], list[str]]:
    """Algorithm 1: one best separating threshold per class, from shadow samples.

    A class without both shadow members and shadow non-members gets the threshold fitted on
    all classes together; those classes are returned second.
    """
    scores, labels, is_member = np.asarray(scores, dtype=float), np.asarray(labels).astype(str), np.asarray(is_member, bool)
    overall = best_separating_threshold(scores[is_member], scores[~is_member])
    thresholds, fallback = {}, []
    for label in sorted(set(labels)):
        in_class = labels == label
        if is_member[in_class].any() and (~is_member[in_class]).any():
            thresholds[label] = best_separating_threshold(scores[in_class & is_member], scores[in_class & ~is_member])
        else:
            thresholds[label], fallback = overall, [*fallback, label]
    thresholds["*"] = overall
    return thresholds, fallback


def user_statistics(scores: np.ndarray, users: np.ndarray) -> pd.DataFrame:
    """Per user (rows, sorted by id): avg, min, max and var (population variance) of the sample scores."""
    frame = pd.DataFrame({"user": np.asarray(users), "score": np.asarray(scores, dtype=float)})
    grouped = frame.groupby("user", sort=True)["score"]
    return pd.DataFrame({name: grouped.agg(_PANDAS_STATISTIC[name], **({"ddof": 0} if name == "var" else {}))
                         for name in USER_STATISTICS})


def _class_threshold_of(labels: np.ndarray, thresholds: dict[str, float]) -> np.ndarray:
    return np.array([thresholds.get(label, thresholds["*"]) for label in np.asarray(labels).astype(str)])


def _user_frame(audited: pd.DataFrame, values: pd.Series) -> pd.DataFrame:
    roles = audited.groupby("group_id", sort=True)["role"].first()
    return pd.DataFrame({"id": values.index, "role": roles.loc[values.index].to_numpy(), "score": values.to_numpy()})


def build_feature_attacks(table: pd.DataFrame, feature: str, direction: float, seed: int = 0) -> tuple[list[AttackScores], list[dict]]:
    """Algorithms 1-4 for one feature of a table with columns sample_id, role, group_id, label, `feature`.

    `direction` (+1 or -1) turns the feature into a membership score. Rows in shadow roles were
    scored by the shadow model and calibrate; rows in member / nonmember roles are audited.
    """
    score = direction * table[feature].to_numpy(dtype=float)
    shadow_rows = table["role"].isin(SHADOW_ROLES).to_numpy()
    audited_rows = table["role"].isin(AUDITED_ROLES).to_numpy()
    shadow, audited = table[shadow_rows], table[audited_rows]
    shadow_score, audited_score = score[shadow_rows], score[audited_rows]
    shadow_member = (shadow["role"] == "shadow_member").to_numpy()

    thresholds, fallback = classwise_thresholds(shadow_score, shadow["label"].to_numpy(), shadow_member)
    audited_class_threshold = _class_threshold_of(audited["label"].to_numpy(), thresholds)
    sample_frame = pd.DataFrame({
        "id": audited["sample_id"].to_numpy(), "role": audited["role"].to_numpy(),
        "group_id": audited["group_id"].to_numpy(),
        # Centred on the sample's class threshold: the decision is score >= 0 and the ROC ranks by it.
        "score": audited_score - audited_class_threshold,
    })
    attacks = [AttackScores("sample_threshold", feature, "sample", sample_frame, [Threshold("shadow", 0.0)],
                            {"class_thresholds": thresholds, "classes_without_own_threshold": fallback})]
    if audited["group_id"].isna().any() or shadow["group_id"].isna().any():
        return attacks, [{"attack": "user_*", "level": "group", "slice": "all", "signal": feature,
                          "reason": "audited or shadow samples without group_id (the user)"}]

    shadow_users = user_statistics(shadow_score, shadow["group_id"].to_numpy())
    shadow_user_member = (shadow.groupby("group_id", sort=True)["role"].first() == "shadow_member").loc[shadow_users.index].to_numpy()
    audited_users = user_statistics(audited_score, audited["group_id"].to_numpy())
    for statistic in USER_STATISTICS:
        # A member's scores may vary more or less than a non-member's: the shadow users decide which.
        orientation = _shadow_orientation(shadow_users[statistic].to_numpy(), shadow_user_member) if statistic == "var" else 1.0
        oriented = orientation * shadow_users[statistic].to_numpy()
        threshold = best_separating_threshold(oriented[shadow_user_member], oriented[~shadow_user_member])
        attacks.append(AttackScores(
            f"user_threshold_{statistic}", feature, "group",
            _user_frame(audited, orientation * audited_users[statistic] - threshold), [Threshold("shadow", 0.0)],
            {"orientation": orientation, "threshold": threshold},
        ))

    regression = make_pipeline(StandardScaler(), LogisticRegression(random_state=seed))
    regression.fit(shadow_users.to_numpy(), shadow_user_member)
    logit = pd.Series(regression.decision_function(audited_users.to_numpy()), index=audited_users.index)
    model = regression[-1]
    attacks.append(AttackScores("user_logistic", feature, "group", _user_frame(audited, logit), [Threshold("shadow", 0.0)],
                                {"features": list(USER_STATISTICS), "coefficients": model.coef_[0].tolist(),
                                 "intercept": float(model.intercept_[0])}))

    decisions = (audited_score >= audited_class_threshold).astype(float)
    share_called = pd.Series(decisions).groupby(audited["group_id"].to_numpy(), sort=True).mean()
    attacks.append(AttackScores("sample_to_user", feature, "group", _user_frame(audited, share_called),
                                [Threshold("majority", 0.5)], {"class_thresholds": thresholds}))
    return attacks, []


def _shadow_orientation(values: np.ndarray, is_member: np.ndarray) -> float:
    """+1 if "higher = member" separates the shadow users at least as well as "lower = member", else -1."""
    accuracies = {}
    for sign in (1.0, -1.0):
        oriented = sign * values
        threshold = best_separating_threshold(oriented[is_member], oriented[~is_member])
        accuracies[sign] = shadow_accuracy(oriented[is_member], oriented[~is_member], threshold)
    return 1.0 if accuracies[1.0] >= accuracies[-1.0] else -1.0
