"""Blind baselines (Das, Zhang and Tramèr 2024, *Blind baselines beat membership inference attacks for foundation
models*): a classifier that never sees the model, only the texts, cross-fitted to tell members from non-members. When
it separates them, the two sets differ in how they were collected, and an attack's AUC measures that difference as
much as the model's leakage.

The classifier: word and word-pair counts, hashed (no vocabulary to fit, so they are computed once for every fold),
TF-IDF weighted and a logistic regression (scikit-learn; fitted by stochastic gradient descent), fitted once per fold on the other folds and scoring that fold
(`cross_val_predict`). The folds keep every group (patient, user) whole, so no person's texts are both fitted and
scored, and keep the members' share in each fold. Das et al.'s bag-of-words is words; character n-grams cost more than
the whole rest on 100,000 notes (benchmarks/blind_baseline.py), so they are left out. No torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from lmaudit.errors import InputError

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


def blind_folds(labels: np.ndarray, groups: np.ndarray, folds: int, seed: int):
    """The folds: stratified by label, each group whole (scikit-learn's StratifiedGroupKFold, shuffled with `seed`);
    InputError where a side has fewer groups than folds."""
    from sklearn.model_selection import StratifiedGroupKFold

    for side, name in ((True, "member"), (False, "non-member")):
        count = len(np.unique(groups[labels == side]))
        if count < folds:
            raise InputError(f"the blind baseline needs at least {folds} {name} groups for its {folds} folds; "
                             f"there are {count}")
    return StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)


def blind_scores(texts: Sequence[str], labels: np.ndarray, groups: np.ndarray | None = None,
                 folds: int = BLIND_FOLDS, seed: int = 0) -> np.ndarray:
    """Each text's out-of-fold probability of being a member (higher = member) from `blind_classifier`, cross-fitted
    over `folds` folds that keep each group whole (each text its own group without `groups`)."""
    from sklearn.model_selection import cross_val_predict

    labels = np.asarray(labels, dtype=bool)
    groups = np.arange(len(labels)) if groups is None else pd.factorize(np.asarray(groups, dtype=object))[0]
    splitter = blind_folds(labels, groups, folds, seed)
    return cross_val_predict(blind_classifier(seed), word_counts(texts), labels, groups=groups, cv=splitter,
                             method="predict_proba")[:, 1]


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
