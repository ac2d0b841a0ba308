"""Finding a canary's secret among its scored tokens, and the score read on it alone, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from lmaudit.canaries.span import secret_log_probability, secret_positions

NAN = np.nan


def test_the_last_occurrence_of_the_secret_is_found():
    assert secret_positions(np.array([5, 7, 9, 7, 9, 3, NAN]), [7, 9]).tolist() == [3, 4]
    assert secret_positions(np.array([5, 7, NAN]), [9]) is None
    assert secret_positions(np.array([5, 7]), []) is None


def test_the_score_is_the_mean_log_probability_of_the_secret_tokens_only():
    log_probs = np.array([[-1.0, -2.0, -4.0, -8.0], [-0.5, -0.25, NAN, NAN], [-1.0, -1.0, -1.0, NAN]])
    token_ids = np.array([[10, 11, 12, 13], [10, 20, NAN, NAN], [10, 11, 10, NAN]])
    got = secret_log_probability(log_probs, token_ids, [[12, 13], [20], [99]])
    assert got[:2] == pytest.approx([-6.0, -0.25])
    assert np.isnan(got[2])  # truncated away: no score rather than the sentence's


def test_secret_spans_find_each_secret_where_it_last_occurs():
    """Rows [5, 1, 2, 1, 2, 9] with secret [1, 2]: its last place starts at 3; a secret not in its row: None."""
    from lmaudit.canaries.extraction import secret_spans

    assert secret_spans([[5, 1, 2, 1, 2, 9], [4, 4]], [[1, 2], [7]]) == [(3, 2), None]


def slow_starts(row: list, sequence: list[int]) -> list[int]:
    """Every start of `sequence` in `row`, by comparing each window (NaN never an id)."""
    width = len(sequence)
    return [start for start in range(len(row) - width + 1) if width and
            all(row[start + k] == sequence[k] for k in range(width))]


def test_sequence_starts_finds_every_aligned_occurrence_as_the_slow_scan_does():
    """The byte search behind the scoring's, extraction's and the callback's secret finding: ids whose int64 bytes
    coincide at an offset (256 is 1 shifted a byte) must not match off an id's boundary; overlaps and NaN padding."""
    from lmaudit.canaries.span import id_bytes, sequence_starts
    from lmaudit.training.callback import occurrences

    rng = np.random.default_rng(0)
    alphabet = np.array([0, 1, 256, 65536, 1 << 40])
    for _ in range(300):
        row = alphabet[rng.integers(0, len(alphabet), size=rng.integers(0, 12))].tolist()
        sequence = alphabet[rng.integers(0, len(alphabet), size=rng.integers(1, 4))].tolist()
        assert sequence_starts(id_bytes(row), id_bytes(sequence)) == slow_starts(row, sequence)
        padded = np.array([*row, np.nan, np.nan], dtype=float)
        assert sequence_starts(id_bytes(padded), id_bytes(sequence)) == slow_starts(row, sequence)
    rows = [[5, 1, 2, 1, 2], [2, 1], [9]]
    assert occurrences(rows, [[1, 2], [2, 1], [1, 2]]) == ([0, 1], 3)
