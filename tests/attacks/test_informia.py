"""InfoRMIA: token scores against the authors' formula over full next-token distributions (plain loops), the
sequence-level score and its population term by hand, texts without tokens, and the population-only calibration; the
token-level attack (informia_tokens) by hand, its direction, and its skip without the stored KL."""

import math

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks.base import (
    REFERENCE_KL,
    REFERENCE_TOKEN_LOG_PROBS,
    TARGET_LOSS,
    TOKEN_LOG_PROBS,
    AttackInput,
    NotRun,
)
from lmaudit.attacks.informia import TOKEN_SPEC, build, build_tokens, mean_per_token, token_scores
from lmaudit.attacks.registry import run_attacks
from tests.attacks.test_wbc import padded_rows


def log_softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    total = math.log(sum(math.exp(value - top) for value in logits)) + top
    return [value - total for value in logits]


def slow_token_scores(target_logits, reference_logits, tokens) -> list[float]:
    """The authors' per-token score by loops: (lp_target(x_t) - lp_ref(x_t)) - sum_v p_ref(v) (lp_target(v) - lp_ref(v))."""
    scores = []
    for target_row, reference_row, token in zip(target_logits, reference_logits, tokens, strict=True):
        target, reference = log_softmax(target_row), log_softmax(reference_row)
        kl_term = sum(math.exp(reference[v]) * (target[v] - reference[v]) for v in range(len(target)))
        scores.append((target[token] - reference[token]) - kl_term)
    return scores


def test_token_scores_match_the_authors_formula():
    """With KL(p_ref || p_target) computed from the same distributions, token_scores is the code's s_t; its text score
    is the mean of the s_t (the code's default aggregate, sign flipped back to higher = member)."""
    rng = np.random.default_rng(0)
    positions, vocabulary = 7, 11
    target_logits, reference_logits = rng.normal(0, 2, (positions, vocabulary)), rng.normal(0, 2, (positions, vocabulary))
    tokens = rng.integers(0, vocabulary, positions)
    target = np.array([log_softmax(list(row)) for row in target_logits])
    reference = np.array([log_softmax(list(row)) for row in reference_logits])
    kl = np.sum(np.exp(reference) * (reference - target), axis=1)
    picked = np.arange(positions), tokens
    got = token_scores(target[picked][None, :], reference[picked][None, :], kl[None, :])
    expected = slow_token_scores(target_logits.tolist(), reference_logits.tolist(), tokens.tolist())
    assert np.allclose(got[0], expected, rtol=0, atol=1e-12)
    assert mean_per_token(got)[0] == pytest.approx(sum(expected) / positions, abs=1e-12)
    assert np.all(kl >= 0)  # the KL term only adds: a token the target likes more than the reference scores above 0


def test_mean_per_token_keeps_padding_out_and_gives_zero_without_tokens():
    values = np.array([[1.0, 2.0, 6.0], [-1.0, np.nan, np.nan], [np.nan, np.nan, np.nan]])
    assert np.array_equal(mean_per_token(values), [3.0, -1.0, 0.0])


def informia_input(target_rows, reference_rows, roles) -> AttackInput:
    samples = pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(roles))], "role": roles,
                            "group_id": [f"p{i}" for i in range(len(roles))]})
    target, reference = padded_rows(target_rows), padded_rows(reference_rows)
    return AttackInput("clm_tokens", samples, {TARGET_LOSS: -mean_per_token(target), TOKEN_LOG_PROBS: target,
                                               REFERENCE_TOKEN_LOG_PROBS: reference})


def test_sequence_score_and_population_term_by_hand():
    """Population z1: gain (1, 1), r = 1, mean reference log p -2; z2: gain 0, r = 0, mean -3: weights e^-2 : e^-3,
    term = 1 / (1 + e^-1). A member with gains (1, 0, 1) scores 2/3 - term; an empty population text stays out of the
    term and, like any empty text, has r = 0."""
    data = informia_input(
        [[-1.0, -1.0], [-3.0], [-1.0, -2.0, -3.0], [-5.0, -5.0], [], []],
        [[-2.0, -2.0], [-3.0], [-2.0, -2.0, -4.0], [-4.0, -4.0], [], []],
        ["population", "population", "member", "nonmember", "population", "member"])
    scored = build(data)
    term = 1 / (1 + math.exp(-1))
    assert scored.calibration["population_term"] == pytest.approx(term, abs=1e-12)
    assert scored.calibration["population"] == 2
    assert scored.frame["score"].to_numpy() == pytest.approx([1 - term, -term, 2 / 3 - term, -1 - term, -term, -term],
                                                             abs=1e-12)
    assert not scored.frame["score"].isna().any()


def test_needs_population_texts_with_tokens():
    data = informia_input([[-1.0], [-2.0], []], [[-2.0], [-2.0], []], ["member", "nonmember", "population"])
    result = build(data)
    assert isinstance(result, NotRun) and "population" in result.reason and "\n" not in result.reason


def test_members_better_than_the_reference_score_higher_and_population_alone_calibrates():
    """Members gain over the reference, non-members do not; the term moves with the population only."""
    rng = np.random.default_rng(2)
    roles = ["member"] * 50 + ["nonmember"] * 50 + ["population"] * 50
    reference = rng.normal(-4, 1, (150, 20))
    target = reference + rng.normal(0, 0.5, reference.shape) + 0.5 * (np.arange(150) < 50)[:, None]
    scored = build(informia_input(target.tolist(), reference.tolist(), roles))
    scores = scored.frame["score"].to_numpy()
    assert np.mean(scores[:50][:, None] > scores[50:100][None, :]) > 0.95
    moved = target.copy()
    moved[:100] += 3.0  # audited texts only
    again = build(informia_input(moved.tolist(), reference.tolist(), roles))
    assert again.calibration["population_term"] == scored.calibration["population_term"]


def token_input(target_rows, reference_rows, kl_rows, roles) -> AttackInput:
    samples = pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(roles))], "role": roles,
                            "group_id": [f"p{i}" for i in range(len(roles))]})
    target = padded_rows(target_rows)
    return AttackInput("clm_tokens", samples, {TARGET_LOSS: -mean_per_token(target), TOKEN_LOG_PROBS: target,
                                               REFERENCE_TOKEN_LOG_PROBS: padded_rows(reference_rows),
                                               REFERENCE_KL: padded_rows(kl_rows)})


def test_token_level_score_by_hand_and_zero_for_an_empty_text():
    """Member: s = (-1 + 2 + 0.5, -3 + 2 + 0.25) = (1.5, -0.75), score 0.375; non-member: s = -2 + 1 + 0.5 = -0.5; a
    text with no scored token scores 0, not NaN; nothing is fitted (no population needed)."""
    data = token_input([[-1.0, -3.0], [-2.0], []], [[-2.0, -2.0], [-1.0], []], [[0.5, 0.25], [0.5], []],
                       ["member", "nonmember", "member"])
    scored = build_tokens(data)
    assert scored.frame["score"].to_numpy() == pytest.approx([0.375, -0.5, 0.0], abs=1e-12)
    assert scored.frame["id"].tolist() == ["s0", "s1", "s2"]


def test_a_text_whose_tokens_the_target_favours_scores_higher():
    """Same reference and KL everywhere: the text whose tokens the target finds likelier scores higher, by exactly the
    mean gain (the KL shifts both alike)."""
    data = token_input([[-1.0, -1.0, -1.0], [-3.0, -3.0, -3.0]], [[-2.0] * 3, [-2.0] * 3], [[0.3] * 3, [0.3] * 3],
                       ["member", "nonmember"])
    member, nonmember = build_tokens(data).frame["score"].to_numpy()
    assert member > nonmember and member - nonmember == pytest.approx(2.0, abs=1e-12)


def test_without_the_stored_kl_the_token_level_attack_is_skipped_with_the_audits_reason():
    data = token_input([[-1.0]], [[-2.0]], [[0.1]], ["member"])
    values = {name: value for name, value in data.values.items() if name != REFERENCE_KL}
    reason = "the reference's vocabulary differs from the target's (40 logits against 50; the tokenizer has 50 tokens)"
    without = AttackInput("clm_tokens", data.samples, values, missing={REFERENCE_KL: reason})
    scores, skipped = run_attacks([without], [TOKEN_SPEC])
    assert not scores and [(s.attack, s.reason) for s in skipped] == [("informia_tokens", reason)]
