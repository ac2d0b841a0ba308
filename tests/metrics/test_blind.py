"""The blind baseline: the same scores as a plain scikit-learn loop over the same folds; a collection difference is
found and one distribution is not; groups are kept whole (a person's own words cannot carry the label across folds);
too few groups is one line."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

from lmaudit.errors import InputError
from lmaudit.metrics.auc_interval import auc_interval
from lmaudit.metrics.blind import blind_classifier, blind_scores, group_means, member_features, word_counts

WORDS = "patient admitted with chest pain fever cough stable discharged home follow up clinic blood pressure".split()


def notes(count: int, rng: np.random.Generator, extra: str = "") -> list[str]:
    return [" ".join(rng.choice(WORDS, size=12)) + extra for _ in range(count)]


def test_the_scores_are_a_plain_scikit_learn_loop_over_the_same_folds():
    rng = np.random.default_rng(0)
    texts = notes(60, rng, " ward a") + notes(60, rng)
    labels = np.r_[np.ones(60, bool), np.zeros(60, bool)]
    groups = np.repeat(np.arange(40), 3)
    expected, counts = np.empty(len(texts)), word_counts(texts)
    # whole groups dealt out by a stratified K-fold over the groups (40 groups: the first 20 members)
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=3)
    for fitted_groups, scored_groups in folds.split(np.zeros(40), np.arange(40) < 20):
        fitted, scored = np.flatnonzero(np.isin(groups, fitted_groups)), np.flatnonzero(np.isin(groups, scored_groups))
        assert not set(groups[fitted]) & set(groups[scored])
        model = blind_classifier(3).fit(counts[fitted], labels[fitted])
        expected[scored] = model.predict_proba(counts[scored])[:, 1]
    np.testing.assert_allclose(blind_scores(texts, labels, groups, seed=3), expected, rtol=1e-6)


def test_a_collection_difference_is_found_and_one_distribution_is_not():
    rng = np.random.default_rng(1)
    shifted = blind_scores(notes(150, rng, " at st mary's") + notes(150, rng, " at general"), np.repeat([True, False], 150))
    assert roc_auc_score(np.repeat([True, False], 150), shifted) > 0.95
    labels = rng.permutation(np.repeat([True, False], 150))
    same = blind_scores(notes(300, rng), labels)
    low, high = auc_interval(labels, same, roc_auc_score(labels, same), n_boot=500, seed=0)
    assert low < 0.5 < high
    assert "st mary" in " ".join(member_features(notes(150, rng, " at st mary's") + notes(150, rng, " at general"),
                                                 np.repeat([True, False], 150)))


def test_groups_are_kept_whole_so_a_persons_own_words_carry_nothing():
    """Each person writes their own name in every note and is a member or not by a coin: fitted and scored on one
    person's notes, the name alone would give membership away; with each person in one fold it cannot."""
    rng = np.random.default_rng(2)
    people = np.repeat(np.arange(60), 8)
    member_people = rng.random(60) < 0.5
    labels = member_people[people]
    texts = [f"{' '.join(rng.choice(WORDS, size=10))} name{person}" for person in people]
    grouped = roc_auc_score(labels, blind_scores(texts, labels, people))
    split = roc_auc_score(labels, blind_scores(texts, labels))  # each note its own group: a person on both sides
    assert grouped < 0.65 and split > 0.9  # measured: 0.52 and 0.99
    means = group_means(blind_scores(texts, labels, people), people)
    assert len(means) == 60 and set(means.index) == set(range(60))


def test_too_few_groups_for_the_folds_is_one_line():
    rng = np.random.default_rng(3)
    labels = np.r_[np.ones(20, bool), np.zeros(20, bool)]
    with pytest.raises(InputError, match="at least 5 member groups for its 5 folds; there are 3"):
        blind_scores(notes(40, rng), labels, np.r_[np.arange(20) % 3, np.arange(20) + 10])
