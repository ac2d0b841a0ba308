"""Per-class analyses of a classifier audit (Shejwalkar et al. 2021, appendix C.1): per class, the target's
generalisation gap and the sample-level attack's accuracy (their Figure 7); per bucket of users sorted by the class
entropy of their data, the user-level attack's accuracy (their Figure 6). Only the audited samples (members and
non-members) count, never the shadow model's. Accuracies and gaps are fractions in [0, 1] (a gap in [-1, 1])."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lmaudit.attacks.base import AttackScores
from lmaudit.data.roles import AUDITED_ROLES, MEMBER, NONMEMBER, NONMEMBER_SET
from lmaudit.metrics.slices import nonmember_sets

# The attacks whose decisions the per-class analyses read (Shejwalkar et al.'s Figures 7 and 6): Algorithm 1 per sample,
# Algorithm 4 per user.
PER_CLASS_ATTACKS = {"sample": "sample_threshold", "group": "sample_to_user"}

ENTROPY_BUCKETS = 10  # the paper's Figure 6 sorts users into 10 buckets
MIN_CORRELATED_CLASSES = 3  # with two points any two columns are perfectly correlated


def audited_samples(samples: pd.DataFrame) -> pd.DataFrame:
    """The audited rows of `samples` (role member or nonmember); with several non-member sets, the members and the
    first set's non-members, the ones the main results audit."""
    audited = samples[samples["role"].isin(AUDITED_ROLES)]
    sets = nonmember_sets(samples)
    if sets is not None:
        audited = audited[(audited["role"] != NONMEMBER) | (audited[NONMEMBER_SET] == sets.names[0])]
    return audited


def correct_decisions(frame: pd.DataFrame, threshold: float) -> pd.Series:
    """Per unit (index: the frame's id), whether the decision `score >= threshold` (a member) matches its role."""
    called = frame["score"].to_numpy(dtype=float) >= threshold
    return pd.Series(called == (frame["role"] == MEMBER).to_numpy(), index=frame["id"].to_numpy())


def class_generalization_gaps(samples: pd.DataFrame) -> pd.DataFrame:
    """Per label (index, sorted), from audited samples (label, role, correctness): the members and non-members counted,
    the target's accuracy on each (mean correctness, 0-1) and the gap, member minus non-member accuracy. Non-members are
    held out, so the gap is the class's train minus test accuracy; NaN where either side has no sample."""
    labels = samples["label"].astype(str)
    correct = samples["correctness"].astype(float)
    rows = {}
    for label in sorted(labels.unique()):
        member = correct[(labels == label) & (samples["role"] == MEMBER)]
        nonmember = correct[(labels == label) & (samples["role"] == NONMEMBER)]
        member_accuracy = float(member.mean()) if len(member) else np.nan
        nonmember_accuracy = float(nonmember.mean()) if len(nonmember) else np.nan
        rows[label] = {"members": len(member), "nonmembers": len(nonmember), "member_accuracy": member_accuracy,
                       "nonmember_accuracy": nonmember_accuracy, "generalization_gap": member_accuracy - nonmember_accuracy}
    columns = ["members", "nonmembers", "member_accuracy", "nonmember_accuracy", "generalization_gap"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)


def class_accuracy(labels: pd.Series, correct: pd.Series) -> pd.Series:
    """Per label (index, sorted), the share (0-1) of the class's samples whose attack decision is right; `labels` and
    `correct` are indexed by sample id, and samples without a decision are left out."""
    decided = correct.reindex(labels.index)
    known = decided.notna()
    return decided[known].astype(float).groupby(labels[known].astype(str).to_numpy()).mean().sort_index()


def gap_correlation(gaps: pd.Series, accuracies: pd.Series) -> float | None:
    """Pearson's correlation coefficient (-1 to 1) across classes between the generalisation gap and the attack accuracy
    (both indexed by label): how linearly a class's leak follows its gap. Classes missing either value are left out;
    None with fewer than 3 classes or when either column is constant (the coefficient is undefined)."""
    paired = pd.concat([gaps.rename("gap"), accuracies.rename("accuracy")], axis=1).dropna().astype(float)
    if len(paired) < MIN_CORRELATED_CLASSES or (paired.max() == paired.min()).any():
        return None
    return float(np.corrcoef(paired["gap"], paired["accuracy"])[0, 1])


def label_entropy_bits(labels: np.ndarray) -> float:
    """The Shannon entropy in bits of the empirical distribution of `labels` (0 for a single class)."""
    _, counts = np.unique(np.asarray(labels).astype(str), return_counts=True)
    # Sorted counts: the same distribution gives the same float whatever its labels, so entropy ties stay exact ties.
    shares = np.sort(counts) / counts.sum()
    return float(np.sum(shares * np.log2(1.0 / shares)))


def class_entropy_bits(labels: pd.Series, users: pd.Series) -> pd.Series:
    """Per user (index: user id, sorted), the class entropy of their data: the entropy in bits of their sample labels."""
    frame = pd.DataFrame({"user": users.to_numpy(), "label": labels.astype(str).to_numpy()}).dropna(subset=["user"])
    return frame.groupby("user", sort=True)["label"].agg(label_entropy_bits).astype(float).rename("entropy_bits")


def entropy_buckets(entropy: pd.Series, buckets: int = ENTROPY_BUCKETS) -> list[pd.Index]:
    """The users (index of `entropy`) sorted by class entropy, ties by user id, split into `buckets` groups of near-equal
    size (np.array_split, the larger ones first); fewer groups when there are fewer users, never an empty one."""
    order = pd.DataFrame({"entropy": entropy.to_numpy(dtype=float), "user": entropy.index})
    users = order.sort_values(["entropy", "user"], kind="stable")["user"].to_numpy()
    if len(users) == 0:
        return []
    return [pd.Index(part) for part in np.array_split(users, min(buckets, len(users))) if len(part)]


def entropy_bucket_table(entropy: pd.Series, user_correct: dict[str, pd.Series], buckets: int = ENTROPY_BUCKETS) -> list[dict]:
    """Per entropy bucket (numbered from 1, lowest entropy first): its users, their mean class entropy (bits) and, per
    feature, the share (0-1) of its users whose user-level decision is right (`user_correct`: per feature, indexed by
    user id)."""
    table = []
    for number, users in enumerate(entropy_buckets(entropy, buckets), 1):
        accuracy = {}
        for feature, correct in user_correct.items():
            decided = correct.reindex(users).dropna()
            accuracy[feature] = float(decided.astype(float).mean()) if len(decided) else None
        table.append({"bucket": number, "users": len(users), "mean_entropy_bits": float(entropy.loc[users].mean()),
                      "s2u_accuracy": accuracy})
    return table


def per_class_report(samples: pd.DataFrame, sample_correct: dict[str, pd.Series], user_correct: dict[str, pd.Series]) -> dict:
    """report.json's `per_class`: `classes` (per label, the counts, the target's accuracies and gap, and per feature the
    sample-level attack's accuracy), `gap_correlation` (per feature, see `gap_correlation`) and `entropy_buckets` (see
    `entropy_bucket_table`). `samples`: sample_id, role, group_id, label, correctness (shadow rows are dropped);
    `sample_correct` / `user_correct`: per feature, whether the sample-level / user-level decision is right, indexed by
    sample id / user id."""
    audited = audited_samples(samples)
    gaps = class_generalization_gaps(audited)
    labels = pd.Series(audited["label"].astype(str).to_numpy(), index=audited["sample_id"].to_numpy())
    accuracies = {feature: class_accuracy(labels, correct) for feature, correct in sample_correct.items()}
    classes = [{"label": label, "members": int(row.members), "nonmembers": int(row.nonmembers),
                "member_accuracy": float(row.member_accuracy), "nonmember_accuracy": float(row.nonmember_accuracy),
                "generalization_gap": float(row.generalization_gap),
                "attack_accuracy": {feature: float(accuracy[label]) if label in accuracy.index else None
                                    for feature, accuracy in accuracies.items()}}
               for label, row in gaps.iterrows()]
    correlation = {feature: gap_correlation(gaps["generalization_gap"], accuracy) for feature, accuracy in accuracies.items()}
    buckets = []
    if user_correct and "group_id" in audited:
        entropy = class_entropy_bits(audited["label"], audited["group_id"])
        buckets = entropy_bucket_table(entropy, user_correct)
    return {"classes": classes, "gap_correlation": correlation, "entropy_buckets": buckets}


def classifier_per_class(samples: pd.DataFrame, attacks: list[AttackScores]) -> dict | None:
    """report.json's `per_class` (per_class_report) for a classifier audit, from each feature's Algorithm 1 and 4
    decisions at their own fixed threshold; None for any other audit (no labels, or Algorithm 1 did not run)."""
    decisions = {level: {a.signal: correct_decisions(a.frame, a.fixed_thresholds[0].value) for a in attacks
                         if a.attack == name and a.level == level and a.fixed_thresholds}
                 for level, name in PER_CLASS_ATTACKS.items()}
    if "label" not in samples or not decisions["sample"]:
        return None
    return per_class_report(samples, decisions["sample"], decisions["group"])
