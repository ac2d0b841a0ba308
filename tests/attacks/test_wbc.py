"""WBC against a slow per-text reference written as the authors' code reads (window loss sums of each model compared,
strictly), on hand-computed texts, ties, short and empty texts, and a reference with another tokenizer."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks.base import REFERENCE_TOKEN_LOG_PROBS, TARGET_LOSS, TOKEN_IDS, TOKEN_LOG_PROBS, AttackInput
from lmaudit.attacks.registry import attack_spec, run_attacks
from lmaudit.attacks.wbc import WINDOWS, wbc_score


def slow_wbc(target_row, reference_row, windows) -> float:
    """One text's WBC by plain loops: per window size, the share of windows where the reference's loss sum is strictly
    above the target's; the whole text is the window when shorter; 0 without tokens."""
    target_losses = [-value for value in target_row if not math.isnan(value)]
    reference_losses = [-value for value in reference_row if not math.isnan(value)]
    n = min(len(target_losses), len(reference_losses))
    if n == 0:
        return 0.0
    shares = []
    for window in windows:
        size = min(window, n)
        votes = count = 0
        for start in range(n - size + 1):
            votes += sum(reference_losses[start:start + size]) > sum(target_losses[start:start + size])
            count += 1
        shares.append(votes / count)
    return sum(shares) / len(shares)


def padded_rows(rows: list[list[float]]) -> np.ndarray:
    """NaN-padded (n, T) array of the rows, as per-token values are stored."""
    table = np.full((len(rows), max(len(row) for row in rows)), np.nan)
    for index, row in enumerate(rows):
        table[index, :len(row)] = row
    return table


@pytest.mark.parametrize("windows", [WINDOWS, (2, 3, 4, 5, 8, 11, 15, 21, 29, 40), (1,), (5, 1, 70)])
def test_matches_the_slow_reference(windows):
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 60, 80)
    lengths[:3] = (0, 1, 2)
    target = padded_rows([list(rng.normal(-3, 1, n)) for n in lengths] + [[np.nan] * 61])
    reference = np.where(np.isnan(target), np.nan, target + rng.normal(0.2, 1.0, target.shape))
    scores, _ = wbc_score(target, reference, windows)
    expected = [slow_wbc(t, r, windows) for t, r in zip(target, reference, strict=True)]
    assert np.allclose(scores, expected, rtol=0, atol=1e-12) and not np.isnan(scores).any()


def test_a_five_token_text_by_hand():
    """d = (1, -2, 0.5, 0.5, -0.25): w = 2 sums (-1, -1.5, 1, 0.25) give 2/4; w = 3 (-0.5, -1, 0.75) 1/3; w = 4
    (0, -1.25) 0, the tie voting non-member; the 7 sizes from 6 up see the whole text, -0.25: 0. Mean: (1/2 + 1/3) / 10."""
    reference = np.full((1, 5), -3.0)
    target = reference + np.array([[1.0, -2.0, 0.5, 0.5, -0.25]])
    scores, tied = wbc_score(target, reference)
    assert scores[0] == pytest.approx((1 / 2 + 1 / 3) / 10, abs=1e-15)
    assert tied == 1 / 16  # 4 + 3 + 2 + 7 windows, one of them tied


def test_ties_vote_non_member():
    """A target that gives every token the reference's probability scores 0 on every text, and every window ties."""
    log_probs = padded_rows([[-1.0, -2.0, -3.0], [-0.5] * 45, [-2.0]])
    scores, tied = wbc_score(log_probs, log_probs)
    assert np.array_equal(scores, np.zeros(3)) and tied == 1.0


def test_short_and_empty_texts():
    """A text shorter than a window is one window for that size; a text with no scored token scores 0, never NaN."""
    reference = np.array([[-3.0, -3.0, -3.0], [-3.0, np.nan, np.nan], [np.nan, np.nan, np.nan]])
    target = reference + np.array([[2.0, -1.0, -0.5], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
    scores, _ = wbc_score(target, reference)
    # w = 2: sums (1, -1.5), 1/2; the 9 other sizes see the whole text, 0.5 > 0
    assert scores == pytest.approx([(0.5 + 9) / 10, 1.0, 0.0], abs=1e-15)


def test_members_better_than_the_reference_score_higher():
    """Where the target finds a member's tokens likelier than the reference does, its windows vote member."""
    rng = np.random.default_rng(1)
    reference = rng.normal(-4, 1, (200, 30))
    member = np.arange(200) < 100
    target = reference + rng.normal(0, 1, reference.shape) + 0.8 * member[:, None]
    scores, _ = wbc_score(target, reference)
    assert np.mean(scores[member][:, None] > scores[~member][None, :]) > 0.95


def mismatched_reference_input() -> AttackInput:
    """A clm_tokens input whose reference tokenized the texts differently: the audit path leaves the reference's
    per-token values out, with its reason."""
    from lmaudit.attacks.base import TOKEN_IS_TOP1, TOKEN_TOP1_IDS
    from lmaudit.audit.language_model import reference_token_values
    from lmaudit.signals.base import TOKEN_FIELDS

    target_ids = np.array([[5.0, 6.0, 7.0], [8.0, 9.0, np.nan]])
    reference_ids = [np.array([5.0, 6.0]), np.array([8.0, 9.0, 10.0])]
    stored = [np.vstack([np.full((len(TOKEN_FIELDS) - 1, len(ids)), -1.0), ids]).ravel() for ids in reference_ids]
    missing: dict[str, str] = {}
    values = reference_token_values(SimpleNamespace(references={"base": None}),
                                    {"base": pd.DataFrame({"value": stored})}, {TOKEN_IDS: target_ids}, missing, "clm")
    assert values == {} and REFERENCE_TOKEN_LOG_PROBS in missing
    samples = pd.DataFrame({"sample_id": ["a", "b"], "role": ["member", "population"], "group_id": ["p", "q"]})
    log_probs = np.where(np.isnan(target_ids), np.nan, -2.0)
    return AttackInput("clm_tokens", samples, {TARGET_LOSS: np.array([2.0, 2.0]), TOKEN_LOG_PROBS: log_probs,
                                               TOKEN_IDS: target_ids, TOKEN_IS_TOP1: np.zeros_like(target_ids),
                                               TOKEN_TOP1_IDS: target_ids}, missing=missing)


@pytest.mark.parametrize("name", ["wbc", "informia"])
def test_a_reference_with_another_tokenizer_is_refused_in_one_line(name):
    data = mismatched_reference_input()
    scores, skipped = run_attacks([data], [attack_spec(name)])
    assert not scores and [(s.attack, s.level) for s in skipped] == [(name, "sample")]
    reason = skipped[0].reason
    assert reason == data.missing[REFERENCE_TOKEN_LOG_PROBS] and "\n" not in reason and "tokenizer" in reason
