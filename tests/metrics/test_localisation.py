"""Localisation's statistics (metrics/localisation.py): every per-class number against a slow loop written from the
definitions, the permutation p-value against full enumeration, the top tokens and spans of a text, the token statistic
chosen from what the audit holds; and the "stands out" rule's family-wise false-alarm rate under a realistic null
(several notes per patient sharing a patient effect, ties, 8 comparison patients) and its power when one class is
shifted in the members (docs/statistics.md)."""

from itertools import combinations

import numpy as np
import pytest
from scipy.stats import binom

from lmaudit.attacks.base import REFERENCE_KL, REFERENCE_TOKEN_LOG_PROBS, TOKEN_LOG_PROBS, TOKEN_MEANS, TOKEN_STDS
from lmaudit.metrics.localisation import (
    LEVEL,
    ScoredTokens,
    localise,
    permutation_p,
    token_scores,
    top_spans,
    top_token_mask,
    welch_t,
)

CLASSES = ("name", "number", "capitalised word", "other word", "punctuation")
SHARES = np.array([0.05, 0.1, 0.15, 0.5, 0.2])
OFFSETS = np.array([0.5, -0.3, 0.2, 0.0, -0.5])  # classes differ in their mean score on both sides alike


def simulate(rng: np.random.Generator, members: int = 40, comparison: int = 8, shift: float = 0.0,
             shifted: int = 0) -> ScoredTokens:
    """1-4 notes per patient of 15-39 tokens; score = patient effect (sd 0.5) + note effect (sd 0.3) + the class's
    offset + heavy-tailed token noise (t, 4 df), rounded to halves (ties); members' tokens of class `shifted` + `shift`."""
    patients = members + comparison
    notes = np.repeat(np.arange(patients), rng.integers(1, 5, size=patients))
    text = np.repeat(np.arange(len(notes)), rng.integers(15, 40, size=len(notes)))
    patient = notes[text]
    classes = rng.choice(len(CLASSES), size=len(text), p=SHARES)
    member = patient < members
    scores = (rng.normal(0, 0.5, patients)[patient] + rng.normal(0, 0.3, len(notes))[text] + OFFSETS[classes]
              + rng.standard_t(4, len(text)) + shift * (member & (classes == shifted)))
    return ScoredTokens(np.round(scores * 2) / 2, classes, text, patient, member, CLASSES,
                        tuple(f"p{i}" for i in range(patients)))


def test_null_family_wise_false_alarms_stay_within_the_level():
    """400 audits with no class different in members: any class standing out is a false alarm. The count must stay
    below the 99.9% quantile of Binomial(400, 0.05) (measured at 2,000 replicates: 3.7%, docs/statistics.md)."""
    rng = np.random.default_rng(11)
    runs = 400
    fired = sum(any(entry.stands_out for entry in localise(simulate(rng), 999, 10, seed=run).classes)
                for run in range(runs))
    assert fired <= binom.ppf(0.999, runs, LEVEL), fired


def test_a_class_shifted_in_members_stands_out_and_the_others_rarely_do():
    """Members' name tokens 2 points higher (a memorised field): it stands out in at least 85% of 100 audits (measured:
    94.5% of 400), and the unshifted classes together in no more than the level allows."""
    rng = np.random.default_rng(12)
    runs = 100
    results = [localise(simulate(rng, shift=2.0), 999, 10, seed=run).classes for run in range(runs)]
    assert sum(classes[0].stands_out for classes in results) >= 85
    assert sum(any(entry.stands_out for entry in classes[1:]) for classes in results) <= binom.ppf(0.999, runs, LEVEL)


def slow_statistics(tokens: ScoredTokens, index: int) -> dict:
    """The class's numbers by loops over tokens and patients, from their definitions."""
    member_scores, other_scores, by_patient = [], [], {}
    for score, token_class, patient, member in zip(tokens.scores, tokens.classes, tokens.patients, tokens.member,
                                                   strict=True):
        if token_class == index:
            (member_scores if member else other_scores).append(score)
            by_patient.setdefault(patient, []).append(score)
    top_in_class = top_total = 0
    for text in set(tokens.texts.tolist()):
        positions = [i for i in range(len(tokens.scores)) if tokens.texts[i] == text]
        if not tokens.member[positions[0]]:
            continue
        kept = sorted(positions, key=lambda i: (-tokens.scores[i], i))[: int(np.ceil(0.1 * len(positions)))]
        top_total += len(kept)
        top_in_class += sum(tokens.classes[i] == index for i in kept)
    member_patients = {p for p, m in zip(tokens.patients, tokens.member, strict=True) if m}
    means = {p: sum(v) / len(v) for p, v in by_patient.items()}
    return {"member_tokens": len(member_scores), "comparison_tokens": len(other_scores),
            "member_mean": sum(member_scores) / len(member_scores), "comparison_mean": sum(other_scores) / len(other_scores),
            "top_share": top_in_class / top_total, "token_share": len(member_scores) / int(tokens.member.sum()),
            "member_patients": sum(p in member_patients for p in means),
            "comparison_patients": sum(p not in member_patients for p in means), "patient_means": means}


def test_every_class_statistic_equals_a_slow_loop():
    tokens = simulate(np.random.default_rng(3), members=12, comparison=5, shift=1.0)
    result = localise(tokens, 199, 200, seed=1)
    for index, entry in enumerate(result.classes):
        slow = slow_statistics(tokens, index)
        assert (entry.member_tokens, entry.comparison_tokens) == (slow["member_tokens"], slow["comparison_tokens"])
        assert (entry.member_patients, entry.comparison_patients) == (slow["member_patients"], slow["comparison_patients"])
        assert entry.member_mean == pytest.approx(slow["member_mean"])
        assert entry.comparison_mean == pytest.approx(slow["comparison_mean"])
        assert entry.difference == pytest.approx(slow["member_mean"] - slow["comparison_mean"])
        assert entry.top_share == pytest.approx(slow["top_share"])
        assert entry.token_share == pytest.approx(slow["token_share"])
        assert entry.enrichment == pytest.approx(slow["top_share"] / slow["token_share"])
        low, high = entry.difference_ci
        assert low < entry.difference < high
        assert entry.stands_out == (entry.p_value <= LEVEL / result.classes_tested)
    assert result.classes_tested == len(CLASSES) and result.per_class_level == pytest.approx(LEVEL / len(CLASSES))
    # each member patient's strongest class: the largest mean excess over the comparison's class mean
    for chosen in result.patients:
        patient = tokens.patient_names.index(chosen.patient)
        excess = {}
        for index, entry in enumerate(result.classes):
            scores = tokens.scores[(tokens.patients == patient) & (tokens.classes == index)]
            if len(scores):
                excess[entry.name] = scores.mean() - entry.comparison_mean
        assert chosen.token_class == max(excess, key=excess.get) and chosen.excess == pytest.approx(max(excess.values()))
    assert sum(result.patients_by_class.values()) == len(result.patients) == 12


def test_welch_t_equals_its_formula_and_ties_give_zero():
    values, member = np.array([1.0, 2.0, 4.0, 0.0, 1.0]), np.array([True, True, True, False, False])
    a, b = values[member], values[~member]
    expected = (a.mean() - b.mean()) / np.sqrt(a.var(ddof=1) / 3 + b.var(ddof=1) / 2)
    assert welch_t(values, member)[0] == pytest.approx(expected)
    assert welch_t(np.ones(5), member)[0] == 0.0
    assert welch_t(np.array([2.0, 2.0, 2.0, 1.0, 1.0]), member)[0] == np.inf


def test_permutation_p_approaches_the_exact_enumeration():
    """3 member and 4 comparison patients: the p-value of 20,000 random relabellings is the share of all 35
    relabellings with a t at least the observed one, within Monte Carlo error."""
    values = np.array([2.0, 1.5, 0.7, 0.1, 0.9, -0.4, 0.3])
    member = np.array([True, True, True, False, False, False, False])
    observed = welch_t(values, member)[0]
    exact = []
    for chosen in combinations(range(7), 3):
        labels = np.zeros(7, dtype=bool)
        labels[list(chosen)] = True
        exact.append(welch_t(values, labels)[0] >= observed)
    p = permutation_p(values, member, 20_000, 0)
    assert p == pytest.approx(np.mean(exact), abs=0.01)


def test_top_tokens_and_spans_of_a_text():
    scores = np.array([0.1, 3.0, 2.5, 0.0, 0.2, 4.0, 0.3, 0.1, 0.0, 0.2, 0.0, 2.0, np.nan])
    # 12 scored tokens: the top ceil(1.2) = 2 are tokens 5 and 1, two one-token spans, in text order
    assert top_spans(scores) == [(1, 2, 3.0), (5, 6, 4.0)]
    # the top 40% (5 tokens: 5, 1, 2, 11, 6): runs [1, 3), [5, 7), [11, 12); at most 2 kept, the highest first
    assert top_spans(scores, fraction=0.4, max_spans=2) == [(1, 3, 3.0), (5, 7, 4.0)]
    assert top_spans(np.array([np.nan, np.nan])) == []
    texts = np.array([0, 0, 0, 1, 1])
    np.testing.assert_array_equal(top_token_mask(np.array([1.0, 5.0, 5.0, 2.0, 1.0]), texts),
                                  [False, True, False, True, False])  # a tie goes to the earlier token


def test_the_token_statistic_is_the_best_the_values_allow():
    lp, ref, kl = np.array([[-1.0, -2.0]]), np.array([[-1.5, -1.0]]), np.array([[0.1, 0.2]])
    name, scores = token_scores({TOKEN_LOG_PROBS: lp, REFERENCE_TOKEN_LOG_PROBS: ref, REFERENCE_KL: kl})
    assert name == "informia" and np.allclose(scores, [[0.6, -0.8]])
    name, scores = token_scores({TOKEN_LOG_PROBS: lp, REFERENCE_TOKEN_LOG_PROBS: ref})
    assert name == "gain" and np.allclose(scores, [[0.5, -1.0]])
    name, scores = token_scores({TOKEN_LOG_PROBS: lp, TOKEN_MEANS: np.array([[-2.0, -2.0]]),
                                 TOKEN_STDS: np.array([[0.5, 0.0]])})
    assert name == "calibrated" and scores[0, 0] == pytest.approx(2.0) and scores[0, 1] == 0.0
    assert token_scores({TOKEN_LOG_PROBS: lp}) is None


def test_a_class_with_too_few_comparison_patients_is_not_tested():
    tokens = simulate(np.random.default_rng(5), members=6, comparison=3)
    only_one = tokens.member | (tokens.patients == 6) | (tokens.classes != 0)  # class 0 kept in one comparison patient
    kept = ScoredTokens(*(array[only_one] for array in (tokens.scores, tokens.classes, tokens.texts, tokens.patients,
                                                         tokens.member)), CLASSES, tokens.patient_names)
    result = localise(kept, 199, 50)
    assert result.classes[0].p_value is None and not result.classes[0].stands_out
    assert result.classes[0].comparison_patients == 1 and result.classes_tested == len(CLASSES) - 1
