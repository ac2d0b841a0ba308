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
