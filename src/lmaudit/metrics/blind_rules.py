"""Das, Zhang and Tramer's two model-free rules beside the bag-of-words (metrics/blind.py), cross-fitted over the same
folds: each is fitted on the other folds and scores the held-out one, higher = member.

- Dates: a text's largest year (a four-digit number from 1900 to 2099; the paper takes the largest four-digit number, which
  in clinical notes is as often a dose or a count). Members written before a cutoff is the classic temporal shift. The
  paper fixes the cutoff by hand; here the direction (earlier or later years say member) is learnt on the other folds,
  and a text without a year scores the other folds' median year.
- Rare n-grams: the paper's greedy selection, on the word and word-pair buckets of `word_counts` instead of character
  n-grams (characters cost more than the whole rest on 100,000 notes): repeatedly pick the n-gram in the most remaining
  member texts per remaining non-member text (m / (n + 1), at least MIN_MEMBER_TEXTS member texts), set aside the texts
  that hold it, and stop after MAX_PICKS picks or when no n-gram is in more member than non-member texts. A held-out
  text scores by the first pick it holds (the earliest picks are the most telling), 0 when it holds none.
No torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import numpy as np

YEAR = re.compile(r"(?<!\d)(19\d\d|20\d\d)(?!\d)")
MAX_PICKS = 50
MIN_MEMBER_TEXTS = 2  # an n-gram of one member text says nothing of the next


def largest_years(texts: Sequence[str]) -> np.ndarray:
    """Each text's largest year from 1900 to 2099 (NaN where it names none)."""
    return np.array([max(map(int, found)) if (found := YEAR.findall(text)) else np.nan for text in texts], dtype=float)


def date_scores(years: np.ndarray, labels: np.ndarray, folds: Iterator[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Each text's out-of-fold date score: its year (the fitted folds' median where it has none), negated where the
    fitted folds' members have the earlier years on average."""
    scores = np.zeros(len(years))
    for fitted, scored in folds:
        known = fitted[~np.isnan(years[fitted])]
        if not len(known) or labels[known].all() or not labels[known].any():
            continue  # no year, or no year on one side: the rule has nothing to learn; its scores tie at 0
        direction = 1.0 if years[known][labels[known]].mean() >= years[known][~labels[known]].mean() else -1.0
        held_out = years[scored]
        scores[scored] = direction * np.where(np.isnan(held_out), np.median(years[known]), held_out)
    return scores


def greedy_picks(present, labels: np.ndarray) -> list[int]:
    """The columns of `present` (texts x n-grams, sparse, nonzero = present) picked greedily, most telling first."""
    by_column = present.tocsc()
    member_counts = np.asarray(present[labels].sum(axis=0)).ravel()
    nonmember_counts = np.asarray(present[~labels].sum(axis=0)).ravel()
    remaining = np.ones(len(labels), bool)
    picks: list[int] = []
    while len(picks) < MAX_PICKS:
        ratio = np.where(member_counts >= MIN_MEMBER_TEXTS, member_counts / (nonmember_counts + 1.0), -np.inf)
        best = int(np.argmax(ratio))
        if member_counts[best] <= nonmember_counts[best]:
            break
        picks.append(best)
        holding = by_column.indices[by_column.indptr[best]:by_column.indptr[best + 1]]
        holding = holding[remaining[holding]]
        remaining[holding] = False
        member_counts -= np.asarray(present[holding[labels[holding]]].sum(axis=0)).ravel()
        nonmember_counts -= np.asarray(present[holding[~labels[holding]]].sum(axis=0)).ravel()
    return picks


def presence(counts):
    """Texts x n-grams, 1 where the text holds the n-gram, over only the n-grams held by at least MIN_MEMBER_TEXTS texts
    (no other can be picked in any fold; dropping them, label-free, makes each pick's search twenty times smaller)."""
    from scipy import sparse

    counts = counts.tocsr()
    texts_holding = np.bincount(counts.indices, minlength=counts.shape[1])
    kept = texts_holding >= MIN_MEMBER_TEXTS
    new_column = np.cumsum(kept) - 1
    entry_kept = kept[counts.indices]
    rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))[entry_kept]
    return sparse.csr_matrix((np.ones(len(rows), np.float32), (rows, new_column[counts.indices[entry_kept]])),
                             shape=(counts.shape[0], int(kept.sum())))


def rare_ngram_scores(counts, labels: np.ndarray, folds: Iterator[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Each text's out-of-fold score from `greedy_picks` on the other folds: MAX_PICKS minus the rank of the first pick
    it holds, 0 where it holds none."""
    present = presence(counts)
    scores = np.zeros(counts.shape[0])
    for fitted, scored in folds:
        picks = greedy_picks(present[fitted], labels[fitted])
        if not picks:
            continue
        held = present[scored][:, picks].toarray() > 0  # texts x picks, in pick order
        first = np.where(held.any(axis=1), held.argmax(axis=1), MAX_PICKS)
        scores[scored] = MAX_PICKS - first
    return scores
