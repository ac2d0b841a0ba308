"""Is it leakage or shift? report.json's `validity`: the blind baseline (`metrics/blind.py`, the texts alone, no model)
on the audit's own members against each non-member set, at every level (numbers; `report/validity.py` sets the
strongest attacks' lift beside them and words the shift). Where the texts alone separate members from non-members, an
attack's AUC measures the data's collection as much as the model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lmaudit.attacks.base import LEVEL_COLUMNS
from lmaudit.data.roles import MEMBER, NONMEMBER, NONMEMBER_SET
from lmaudit.errors import InputError
from lmaudit.metrics.auc_interval import auc_interval
from lmaudit.metrics.blind import BLIND_FOLDS, every_blind_score, group_means, member_features
from lmaudit.metrics.clusters import cluster_codes
from lmaudit.metrics.roc import auc, tpr_at_fpr
from lmaudit.metrics.slices import nonmember_set_names

# validity's blind part where the audit has no texts (an audit from precomputed losses)
NO_TEXTS = {"blind_baseline": None, "sets": {}, "unavailable": "no texts: the audit started from precomputed scores"}
SHIFT_AUC = 0.5  # a blind AUC whose lower bound (95%, Bonferroni-corrected) is above this: the texts alone separate


def unit_summary(labels: np.ndarray, scores: np.ndarray, clusters: np.ndarray, bootstrap: int, seed: int) -> dict:
    """One blind classifier's result at one level: AUC with its interval (whole `clusters` resampled), TPR at 1% FPR
    with its counts, the units on each side."""
    area = auc(labels, scores)
    low, high = auc_interval(labels, scores, area, clusters, bootstrap, seed=seed)
    point = tpr_at_fpr(labels, scores, 0.01)
    return {"auc": area, "auc_ci": [low, high], "tpr_at_1pct_fpr": point.tpr, "tp": point.tp, "fp": point.fp,
            "n_members": int(labels.sum()), "n_nonmembers": int((~labels).sum())}


def level_summary(labels: np.ndarray, scores: dict[str, np.ndarray], clusters: np.ndarray, bootstrap: int,
                  seed: int) -> dict:
    """One level's blind result: the strongest blind classifier's `unit_summary` (by AUC), named, with every
    classifier's AUC and interval; `texts_separate` where the strongest one's AUC interval, Bonferroni-corrected for
    having picked the best of the classifiers that score anything (not all tied), lies above SHIFT_AUC."""
    results = {name: unit_summary(labels, values, clusters, bootstrap, seed) for name, values in scores.items()}
    informative = [name for name, values in scores.items() if np.ptp(values) > 0]
    strongest = max(informative or list(results), key=lambda name: results[name]["auc"])
    level = 1 - 0.05 / max(1, len(informative))
    separate = (strongest in informative and
                auc_interval(labels, scores[strongest], results[strongest]["auc"], clusters, bootstrap, level,
                             seed)[0] > SHIFT_AUC)
    return {**results[strongest], "classifier": strongest, "texts_separate": bool(separate),
            "classifiers": {name: {"auc": r["auc"], "auc_ci": r["auc_ci"]} for name, r in results.items()}}


def set_validity(rows: pd.DataFrame, texts: pd.Series, bootstrap: int, seed: int, include_text: bool = False) -> dict:
    """The blind baselines on `rows` (members and one set's non-members: sample_id, role, group_id, subgroup_id): per
    level, its `level_summary`; the words that say 'member' where `include_text` (they are training text), else how
    many were withheld; or why they could not run."""
    labels = (rows["role"] == MEMBER).to_numpy()
    groups = cluster_codes(rows["sample_id"].to_numpy(), rows["group_id"].to_numpy() if "group_id" in rows else None)
    documents = texts.loc[rows["sample_id"]].tolist()
    try:
        scores = every_blind_score(documents, labels, groups, BLIND_FOLDS, seed)
    except InputError as error:
        return {"unavailable": str(error)}
    levels = {"sample": level_summary(labels, scores, groups, bootstrap, seed)}
    for level, column in LEVEL_COLUMNS.items():
        if column in rows and rows[column].notna().all():
            means = {name: group_means(values, rows[column]) for name, values in scores.items()}
            index = next(iter(means.values())).index
            units = rows.groupby(column).first().loc[index]
            patients = (cluster_codes(index.to_numpy(), units["group_id"].to_numpy()) if level == "subgroup"
                        else np.arange(len(index)))
            levels[level] = level_summary((units["role"] == MEMBER).to_numpy(),
                                          {name: m.to_numpy() for name, m in means.items()}, patients, bootstrap, seed)
    words = member_features(documents, labels)
    return {"levels": levels, **({"member_words": words} if include_text else {"member_words_withheld": len(words)})}


def blind_validity(samples: pd.DataFrame, texts: pd.Series, bootstrap: int = 1000, seed: int = 0,
                   include_text: bool = False) -> dict:
    """report.json's `validity`: per non-member set (in the order given; the first is the one the main results audit,
    'nonmembers' when there is one), `set_validity` of the members against that set's non-members. `texts`: indexed
    by sample_id; `include_text`: list the words that say 'member' (drawn from the training text)."""
    audited = samples[samples["role"].isin([MEMBER, NONMEMBER])]
    nonmembers = audited[audited["role"] == NONMEMBER]
    names = nonmember_set_names(nonmembers) or [None]
    sets = {}
    for name in names:
        chosen = nonmembers if name is None else nonmembers[nonmembers[NONMEMBER_SET] == name]
        rows = pd.concat([audited[audited["role"] == MEMBER], chosen], ignore_index=True)
        sets[name or "nonmembers"] = set_validity(rows, texts, bootstrap, seed, include_text)
    return {"blind_baseline": "the strongest of three classifiers of the texts alone (Das, Zhang and Tramer 2024): word "
                              "and word-pair TF-IDF with a logistic regression, the largest year, greedy rare n-grams; "
                              "each cross-fitted over 5 folds keeping each group whole", "sets": sets}
