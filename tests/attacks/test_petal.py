"""PETAL against the authors' formula applied one text at a time (np.polyfit of the surrogate's log-probabilities on
the log-similarities, the line applied to the target's), and the first-choice similarity against a cosine per
position."""

import numpy as np
import pytest

from lmaudit.attacks.petal import petal_score
from lmaudit.signals.variants import first_choice_similarity


def padded_rows(rng, n, width):
    lengths = rng.integers(3, width + 1, n)
    mask = np.arange(width)[None, :] < lengths[:, None]
    return lambda values: np.where(mask, values, np.nan)


def slow_petal(reference_log_probs, reference_similarity, target_similarity):
    scores = []
    for lp, s_ref, s_target in zip(reference_log_probs, reference_similarity, target_similarity, strict=True):
        keep = ~np.isnan(lp)
        slope, intercept = np.polyfit(np.log(np.maximum(s_ref[keep], 1e-16)), lp[keep], 1)
        scores.append(np.mean(slope * np.log(np.maximum(s_target[keep], 1e-16)) + intercept))
    return np.array(scores)


def test_petal_matches_a_polyfit_per_text():
    rng = np.random.default_rng(3)
    pad = padded_rows(rng, 40, 15)
    # similarities in (-0.2, 1]: a cosine at or below zero is floored at 1e-16 before its log, as the code does
    reference_similarity = pad(rng.uniform(-0.2, 1.0, (40, 15)))
    target_similarity = pad(rng.uniform(-0.2, 1.0, (40, 15)))
    log_probs = pad(0.8 * np.log(np.maximum(reference_similarity, 1e-3)) - 2 + rng.normal(0, 0.5, (40, 15)))
    np.testing.assert_allclose(petal_score(log_probs, reference_similarity, target_similarity),
                               slow_petal(log_probs, reference_similarity, target_similarity), rtol=1e-9)


def test_petal_by_hand_and_with_a_flat_surrogate():
    """Surrogate similarities 1, e^-1, e^-2 with log-probabilities -1, -3, -5: the line lp = 2u - 1; target
    similarities e^-1 each give -3. A surrogate whose similarities are all equal has no slope: the mean
    log-probability (-3), whatever the target does."""
    reference_similarity = np.array([[1.0, np.exp(-1), np.exp(-2)], [0.5, 0.5, 0.5]])
    log_probs = np.array([[-1.0, -3.0, -5.0], [-1.0, -3.0, -5.0]])
    target_similarity = np.full((2, 3), np.exp(-1))
    assert petal_score(log_probs, reference_similarity, target_similarity) == pytest.approx([-3.0, -3.0])


def test_first_choice_similarity_is_the_cosine_of_the_two_tokens():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(12, 5))
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    pad = padded_rows(rng, 7, 9)
    token_ids = pad(rng.integers(0, 12, (7, 9)).astype(float))
    first_choice = pad(rng.integers(0, 12, (7, 9)).astype(float))
    got = first_choice_similarity(table, first_choice, token_ids, positions_per_block=5)
    for row, column in zip(*np.nonzero(~np.isnan(token_ids)), strict=True):
        a, b = table[int(first_choice[row, column])], table[int(token_ids[row, column])]
        assert got[row, column] == pytest.approx(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    assert np.array_equal(np.isnan(got), np.isnan(token_ids))
    same = ~np.isnan(token_ids) & (first_choice == token_ids)
    np.testing.assert_allclose(got[same], 1.0)
    beyond = first_choice.copy()
    beyond[0, 0] = 12.0  # one past the table
    assert np.isnan(first_choice_similarity(table, beyond, token_ids)[0, 0])


def test_spv_mia_by_hand():
    """PV = mean exp(-NLL) of the perturbations less exp(-NLL) of the text; the score is -(PV_target - PV_reference).
    Target: the text at NLL 1, perturbations at 2 and 3; reference: all at NLL 2."""
    from lmaudit.attacks.spv_mia import spv_mia_score

    score = spv_mia_score(np.array([1.0]), np.array([[2.0, 3.0]]), np.array([2.0]), np.array([[2.0, 2.0]]))
    expected = -((np.exp(-2) + np.exp(-3)) / 2 - np.exp(-1))
    assert score == pytest.approx([expected])
