"""Shadow-calibrated classifier attacks (Shejwalkar et al., Algorithms 1-4), at sample and user level.

Every threshold, orientation and logistic regression here is fitted on shadow data only (the
shadow model's features on its own members and non-members); the audited samples are only
scored. The sample-level attacks read the feature oriented so that higher = member; the user statistics (Algorithms 2
and 3) are the paper's, of the raw feature: a user's Minimum loss is their smallest loss. Each attack's scores follow the
package convention and its decision is `score >= its shadow threshold`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmaudit.attacks.base import (
    CLASSIFIER_FEATURE,
    CLASSIFIER_RAW_FEATURE,
    AttackInput,
    AttackSpec,
    NotRun,
    Scored,
    Threshold,
    logistic_regression,
    score_frame,
    user_frame,
)
from lmaudit.data.roles import AUDITED_ROLES, SHADOW_MEMBER, SHADOW_ROLES

USER_STATISTICS = ("avg", "min", "max", "var")
_PANDAS_STATISTIC = {"avg": "mean", "min": "min", "max": "max", "var": "var"}
# The paper's column for each statistic (Shejwalkar et al., Table 2).
PAPER_STATISTIC = {"avg": "Average", "min": "Minimum", "max": "Maximum", "var": "Variance"}


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


@dataclass(frozen=True)
class _Sides:
    """The feature split into the shadow rows (which calibrate) and the audited rows (which are scored): oriented
    (`*_score`) and raw (`*_raw`), and the sign that orients it."""

    shadow: pd.DataFrame
    audited: pd.DataFrame
    shadow_score: np.ndarray
    audited_score: np.ndarray
    shadow_member: np.ndarray
    shadow_raw: np.ndarray
    audited_raw: np.ndarray
    direction: float


def feature_direction(oriented: np.ndarray, raw: np.ndarray) -> float:
    """+1 when the oriented feature is the raw one (a larger value means a likelier member), -1 when it is its
    negation; ValueError for anything else."""
    if np.array_equal(oriented, raw):
        return 1.0
    if np.array_equal(oriented, -raw):
        return -1.0
    raise ValueError("the oriented classifier feature is neither the raw feature nor its negation")


def _sides(data: AttackInput) -> _Sides:
    score = np.asarray(data.values[CLASSIFIER_FEATURE], dtype=float)
    raw = np.asarray(data.values[CLASSIFIER_RAW_FEATURE], dtype=float)
    shadow_rows = data.samples["role"].isin(SHADOW_ROLES).to_numpy()
    audited_rows = data.samples["role"].isin(AUDITED_ROLES).to_numpy()
    shadow = data.samples[shadow_rows]
    return _Sides(shadow, data.samples[audited_rows], score[shadow_rows], score[audited_rows],
                  (shadow["role"] == SHADOW_MEMBER).to_numpy(), raw[shadow_rows], raw[audited_rows],
                  feature_direction(score, raw))


def _class_thresholds(sides: _Sides) -> tuple[dict[str, float], list[str], np.ndarray]:
    """Algorithm 1's class thresholds, the classes that fell back to the all-class one, and each audited sample's threshold."""
    thresholds, fallback = classwise_thresholds(sides.shadow_score, sides.shadow["label"].to_numpy(), sides.shadow_member)
    return thresholds, fallback, _class_threshold_of(sides.audited["label"].to_numpy(), thresholds)


def sample_threshold(data: AttackInput) -> Scored:
    """Algorithm 1: the feature against its class's shadow threshold, per sample."""
    sides = _sides(data)
    thresholds, fallback, audited_threshold = _class_thresholds(sides)
    # Centred on the sample's class threshold: the decision is score >= 0 and the ROC ranks by it. No length column:
    # token length is confounded with membership when the tokenizer was fitted on the members' text.
    frame = score_frame(sides.audited, sides.audited_score - audited_threshold, with_length=False)
    return Scored(frame, [Threshold("shadow", 0.0)], {"class_thresholds": thresholds, "classes_without_own_threshold": fallback})


@dataclass(frozen=True)
class _Users:
    """Per-user statistics of the raw feature (avg, min, max, var; rows sorted by user) of the shadow users, which of
    them were members, and of the audited users."""

    shadow: pd.DataFrame
    shadow_member: np.ndarray
    audited: pd.DataFrame


def _users(sides: _Sides) -> _Users | NotRun:
    # Audited samples without a user never reach a user-level attack: the registry skips the level.
    if sides.shadow["group_id"].isna().any():
        return NotRun("shadow samples without group_id (the user): the user thresholds are fitted on shadow users")
    shadow_users = user_statistics(sides.shadow_raw, sides.shadow["group_id"].to_numpy())
    roles = sides.shadow.groupby("group_id", sort=True)["role"].first()
    shadow_user_member = (roles == SHADOW_MEMBER).loc[shadow_users.index].to_numpy()
    return _Users(shadow_users, shadow_user_member, user_statistics(sides.audited_raw, sides.audited["group_id"].to_numpy()))


def user_threshold(statistic: str):
    """Algorithm 2 on one user statistic (avg, min, max, var) of the raw feature: a threshold fitted on shadow users."""

    def attack(data: AttackInput) -> Scored | NotRun:
        sides = _sides(data)
        users = _users(sides)
        if isinstance(users, NotRun):
            return users
        # A mean, minimum or maximum moves with the feature, so it keeps the feature's direction; a member's scores
        # may vary more or less than a non-member's: for the variance the shadow users decide which.
        values, member = users.shadow[statistic].to_numpy(), users.shadow_member
        orientation = _shadow_orientation(values, member) if statistic == "var" else sides.direction
        threshold = best_separating_threshold(orientation * values[member], orientation * values[~member])
        return Scored(user_frame(sides.audited, orientation * users.audited[statistic] - threshold), [Threshold("shadow", 0.0)],
                      {"orientation": orientation, "threshold": threshold})

    return attack


def user_logistic(data: AttackInput) -> Scored | NotRun:
    """Algorithm 3: a logistic regression on the four user statistics, trained on shadow users."""
    sides = _sides(data)
    users = _users(sides)
    if isinstance(users, NotRun):
        return users
    regression = logistic_regression(data.seed)
    regression.fit(users.shadow.to_numpy(), users.shadow_member)
    logit = pd.Series(regression.decision_function(users.audited.to_numpy()), index=users.audited.index)
    model = regression[-1]
    return Scored(user_frame(sides.audited, logit), [Threshold("shadow", 0.0)],
                  {"features": list(USER_STATISTICS), "coefficients": model.coef_[0].tolist(),
                   "intercept": float(model.intercept_[0])})


def sample_to_user(data: AttackInput) -> Scored:
    """Algorithm 4: the share of a user's samples that Algorithm 1 calls members, decided by majority."""
    sides = _sides(data)
    thresholds, _, audited_threshold = _class_thresholds(sides)
    decisions = (sides.audited_score >= audited_threshold).astype(float)
    share_called = pd.Series(decisions).groupby(sides.audited["group_id"].to_numpy(), sort=True).mean()
    # Where the shadow's thresholds call (almost) no post or every post a member, every user's share is alike and the
    # ranking says nothing of the model (report/checks.py warns): how many were called is part of the calibration.
    return Scored(user_frame(sides.audited, share_called), [Threshold("majority", 0.5)],
                  {"class_thresholds": thresholds, "posts_called_members": float(decisions.mean())})


_SHADOW = {"fitted_on": SHADOW_ROLES, "reads": (CLASSIFIER_FEATURE, CLASSIFIER_RAW_FEATURE),
           "paper": "Shejwalkar et al. 2021, Membership inference attacks against NLP classification models"}
SPECS = (
    AttackSpec("sample_threshold", "Algorithm 1 (Shejwalkar et al.): the feature against a per-class threshold fitted on "
               "the shadow model's members and non-members", build=sample_threshold,
               score_label="membership score = oriented feature - class threshold", aggregated_to=(), **_SHADOW),
    *(AttackSpec(f"user_threshold_{statistic}", f"Algorithm 2 (Shejwalkar et al.), the paper's {PAPER_STATISTIC[statistic]} "
                 f"column: the {PAPER_STATISTIC[statistic].lower()} of the user's raw feature values against a threshold fitted "
                 "on shadow users" + (", oriented by the shadow users" if statistic == "var" else
                                      ", negated for features where lower means member (loss, mentropy, rank)"),
                 build=user_threshold(statistic), level="group",
                 score_label=f"membership score = orientation x user {PAPER_STATISTIC[statistic].lower()} of the raw feature - "
                             "shadow threshold", **_SHADOW)
      for statistic in USER_STATISTICS),
    AttackSpec("user_logistic", "Algorithm 3 (Shejwalkar et al.): logistic regression on the user's average, minimum, "
               "maximum and variance of the raw feature, trained on shadow users", build=user_logistic, level="group",
               score_label="membership score = log-odds of the regression", **_SHADOW),
    AttackSpec("sample_to_user", "Algorithm 4 (Shejwalkar et al.): the share of the user's samples that Algorithm 1 "
               "calls members, majority vote", build=sample_to_user, level="group",
               score_label="membership score = share of the user's samples called members", **_SHADOW),
)


def _shadow_orientation(values: np.ndarray, is_member: np.ndarray) -> float:
    """+1 if "higher = member" separates the shadow users at least as well as "lower = member", else -1."""
    accuracies = {}
    for sign in (1.0, -1.0):
        oriented = sign * values
        threshold = best_separating_threshold(oriented[is_member], oriented[~is_member])
        accuracies[sign] = shadow_accuracy(oriented[is_member], oriented[~is_member], threshold)
    return 1.0 if accuracies[1.0] >= accuracies[-1.0] else -1.0
