"""Das et al.'s two model-free rules, cross-fitted: the largest year as hand-read; a temporal shift found whichever way
it runs; the greedy rare n-gram picks equal to a slow loop that recounts every remaining text at each step; a rare
member-only phrase found and one distribution not; the validity section names the strongest rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from sklearn.metrics import roc_auc_score

from lmaudit.metrics.blind import every_blind_score, fold_splits, word_counts
from lmaudit.metrics.blind_rules import (
    MAX_PICKS,
    MIN_MEMBER_TEXTS,
    date_scores,
    greedy_picks,
    largest_years,
    rare_ngram_scores,
)
from lmaudit.metrics.validity import blind_validity

WORDS = "patient admitted with chest pain fever cough stable discharged home follow up clinic blood pressure".split()


def test_the_largest_year_as_read_by_hand():
    years = largest_years(["admitted 2019, seen again in 2021 on 1500 mg", "dose 3000 mg, 12 tablets",
                           "code 19999 and 1899", "born 1950"])
    np.testing.assert_array_equal(years[[0, 3]], [2021, 1950])
    assert np.isnan(years[1]) and np.isnan(years[2])  # no year from 1900 to 2099 standing alone


@pytest.mark.parametrize("members_earlier", [True, False])
def test_a_temporal_shift_is_found_whichever_way_it_runs(members_earlier):
    rng = np.random.default_rng(0)
    early, late = rng.integers(2012, 2018, 150), rng.integers(2020, 2024, 150)
    labels = np.repeat([True, False], 150)
    years = np.r_[early, late] if members_earlier else np.r_[late, early]
    texts = [f"note written {year}" if i % 5 else "note without a date" for i, year in enumerate(years)]
    splits = fold_splits(labels, None, 5, 0)
    scores = date_scores(largest_years(texts), labels, iter(splits))
    assert roc_auc_score(labels, scores) > 0.85


def slow_greedy_picks(present: np.ndarray, labels: np.ndarray) -> list[int]:
    """Das et al.'s greedy selection spelt out: at each step count, for every n-gram, the remaining member and non-member
    texts that hold it."""
    remaining = np.ones(len(labels), bool)
    picks = []
    while len(picks) < MAX_PICKS:
        best, best_ratio = None, -np.inf
        for column in range(present.shape[1]):
            holding = remaining & (present[:, column] > 0)
            members, nonmembers = int((holding & labels).sum()), int((holding & ~labels).sum())
            if members >= MIN_MEMBER_TEXTS and members / (nonmembers + 1) > best_ratio:
                best, best_ratio, best_counts = column, members / (nonmembers + 1), (members, nonmembers)
        if best is None or best_counts[0] <= best_counts[1]:
            break
        picks.append(best)
        remaining &= present[:, best] == 0
    return picks


def test_greedy_picks_equal_the_slow_loop_that_recounts_every_step():
    rng = np.random.default_rng(3)
    labels = rng.random(120) < 0.5
    # columns more common among members for the first ten, common to all for the rest
    rates = np.where(np.arange(40) < 10, 0.25, 0.15)
    present = (rng.random((120, 40)) < rates + 0.2 * labels[:, None] * (np.arange(40) < 10)).astype(np.float32)
    picks = greedy_picks(sparse.csr_matrix(present), labels)
    assert picks == slow_greedy_picks(present, labels) and len(picks) >= 3


def test_a_rare_member_phrase_is_found_and_one_distribution_is_not():
    rng = np.random.default_rng(4)
    labels = np.repeat([True, False], 150)
    texts = [" ".join(rng.choice(WORDS, 10)) + (" transferred from ward seven" if member and rng.random() < 0.4 else "")
             for member in labels]
    splits = fold_splits(labels, None, 5, 1)
    assert roc_auc_score(labels, rare_ngram_scores(word_counts(texts), labels, iter(splits))) > 0.65
    same = [" ".join(rng.choice(WORDS, 10)) for _ in labels]
    shuffled = rng.permutation(labels)
    null_auc = roc_auc_score(shuffled, rare_ngram_scores(word_counts(same), shuffled, iter(fold_splits(shuffled, None, 5, 1))))
    assert 0.4 < null_auc < 0.6


def test_every_blind_score_shares_the_folds_and_validity_names_the_strongest():
    rng = np.random.default_rng(5)
    rows = []
    for role, years in (("member", (1900, 2000)), ("nonmember", (2000, 2100))):  # too many years for words to learn
        for patient in range(40):
            for note in range(3):
                rows.append({"sample_id": f"{role}-{patient}-{note}", "role": role, "group_id": f"{role}-{patient}",
                             "text": " ".join(rng.choice(WORDS, 10)) + f" seen {rng.integers(*years)}"})
    samples = pd.DataFrame(rows)
    labels = (samples["role"] == "member").to_numpy()
    scores = every_blind_score(samples["text"].tolist(), labels, samples["group_id"].to_numpy(), seed=2)
    assert set(scores) == {"bag_of_words", "dates", "rare_ngrams"}
    validity = blind_validity(samples.drop(columns="text"), samples.set_index("sample_id")["text"], bootstrap=200)
    patient = validity["sets"]["nonmembers"]["levels"]["group"]
    assert patient["classifier"] == "dates" and patient["texts_separate"]
    assert patient["auc"] == max(c["auc"] for c in patient["classifiers"].values())
    assert patient["classifiers"]["dates"]["auc"] == pytest.approx(
        roc_auc_score(*zip(*[(g.startswith("member"), s) for g, s in
                             pd.Series(scores["dates"]).groupby(samples["group_id"]).mean().items()], strict=True)))
