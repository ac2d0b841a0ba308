"""Blind baselines (Das, Zhang and Tramèr 2024, *Blind baselines beat membership inference attacks for foundation
models*): a classifier that never sees the model, only the texts, cross-fitted to tell members from non-members. When
it separates them, the two sets differ in how they were collected, and an attack's AUC measures that difference as
much as the model's leakage.

The classifier: word and word-pair counts, hashed (no vocabulary to fit, so they are computed once for every fold),
TF-IDF weighted and a logistic regression (scikit-learn; fitted by stochastic gradient descent), fitted once per fold on
the other folds and scoring that fold (`cross_val_predict`). The folds keep every group (patient, user) whole, so no
person's texts are both fitted and scored, and keep the members' share of groups in each fold. Das et al.'s bag-of-words
is words; character n-grams cost more than the whole rest on 100,000 notes (benchmarks/blind_baseline.py), so they are
left out. `every_blind_score` adds Das et al.'s two rules (dates, greedy rare n-grams; metrics/blind_rules.py) over the
same folds. No torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from lmaudit.errors import InputError
from lmaudit.metrics.blind_rules import date_scores, largest_years, rare_ngram_scores

BLIND_FOLDS = 5
HASHED_FEATURES = 2 ** 20  # word and word-pair buckets: few collisions for any vocabulary an audit holds


def word_counts(texts: Sequence[str]):
    """Each text's counts of words and word pairs, hashed into HASHED_FEATURES columns (a sparse matrix; label-free)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    hashing = HashingVectorizer(ngram_range=(1, 2), n_features=HASHED_FEATURES, alternate_sign=False, norm=None,
                                dtype=np.float32)
    return hashing.transform(list(texts))


def blind_classifier(seed: int = 0):
    """The blind baseline's unfitted model over `word_counts`: TF-IDF weights, then a logistic regression fitted by
    stochastic gradient descent (scikit-learn's SGDClassifier, log loss, its default L2 penalty: ten times faster than
    an exact solver on 80,000 notes, measured, for the same kind of model)."""
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline

    return make_pipeline(TfidfTransformer(sublinear_tf=True), SGDClassifier(loss="log_loss", random_state=seed))


def fold_splits(labels: np.ndarray, groups: np.ndarray | None, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (fitted, scored) row indices of each fold: whole groups dealt out by scikit-learn's StratifiedKFold over the
    groups, stratified by each group's label (a member group: any of its rows is a member; roles are disjoint by group),
    shuffled with `seed`; each text its own group without `groups`. StratifiedGroupKFold would do the same with a
    Python loop over the groups, seconds for 100,000 texts. InputError where a side has fewer groups than folds."""
    from sklearn.model_selection import StratifiedKFold

    labels = np.asarray(labels, dtype=bool)
    codes = np.arange(len(labels)) if groups is None else pd.factorize(np.asarray(groups, dtype=object))[0]
    group_is_member = np.bincount(codes, weights=labels) > 0
    for side, name in ((True, "member"), (False, "non-member")):
        count = int((group_is_member == side).sum())
        if count < folds:
            raise InputError(f"the blind baseline needs at least {folds} {name} groups for its {folds} folds; "
                             f"there are {count}")
    fold_of_group = np.empty(len(group_is_member), int)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for fold, (_, scored) in enumerate(splitter.split(np.zeros(len(group_is_member)), group_is_member)):
        fold_of_group[scored] = fold
    fold_of_row = fold_of_group[codes]
    return [(np.flatnonzero(fold_of_row != fold), np.flatnonzero(fold_of_row == fold)) for fold in range(folds)]


def _bag_of_words(counts, labels: np.ndarray, splits: list, seed: int) -> np.ndarray:
    from sklearn.model_selection import cross_val_predict

    return cross_val_predict(blind_classifier(seed), counts, labels, cv=splits, method="predict_proba")[:, 1]


def blind_scores(texts: Sequence[str], labels: np.ndarray, groups: np.ndarray | None = None,
                 folds: int = BLIND_FOLDS, seed: int = 0) -> np.ndarray:
    """Each text's out-of-fold probability of being a member (higher = member) from `blind_classifier`, cross-fitted
    over `folds` folds that keep each group whole (each text its own group without `groups`)."""
    labels = np.asarray(labels, dtype=bool)
    return _bag_of_words(word_counts(texts), labels, fold_splits(labels, groups, folds, seed), seed)


def every_blind_score(texts: Sequence[str], labels: np.ndarray, groups: np.ndarray | None = None,
                      folds: int = BLIND_FOLDS, seed: int = 0) -> dict[str, np.ndarray]:
    """Each blind classifier's out-of-fold scores over the same folds (higher = member): the bag-of-words
    (`blind_scores`), and Das et al.'s dates and rare n-grams (metrics/blind_rules.py), the counts computed once."""
    labels = np.asarray(labels, dtype=bool)
    splits = fold_splits(labels, groups, folds, seed)
    counts = word_counts(texts)
    return {"bag_of_words": _bag_of_words(counts, labels, splits, seed),
            "dates": date_scores(largest_years(texts), labels, iter(splits)),
            "rare_ngrams": rare_ngram_scores(counts, labels, iter(splits))}


def group_means(scores: np.ndarray, groups: Sequence) -> pd.Series:
    """A group's blind score: the mean of its texts' out-of-fold scores (cross-fitted too, since every group's texts
    are scored in one fold), indexed by group id."""
    return pd.Series(np.asarray(scores, dtype=float)).groupby(np.asarray(groups, dtype=object)).mean()


def member_features(texts: Sequence[str], labels: np.ndarray, count: int = 5) -> list[str]:
    """The words and word pairs that say 'member' most, from the same model fitted on all the texts with a vocabulary
    instead of hashing, so that its columns have names (for reading, not scoring)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, dtype=np.float32)
    model = blind_classifier()[-1].fit(vectorizer.fit_transform(list(texts)), np.asarray(labels, dtype=bool))
    names = vectorizer.get_feature_names_out()
    return [str(names[i]) for i in np.argsort(model.coef_[0])[::-1][:count]]
