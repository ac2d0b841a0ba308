"""The null laboratory, small: every decision rule the report prints keeps its stated false-alarm level on simulated
audits where nothing leaked (patients of several notes sharing an effect, ties, few non-members, missing group ids),
within a binomial tolerance at fixed seeds (each bound: fewer events than a rate at the stated level gives with
probability 0.001), and still finds a planted leak. benchmarks/null_calibration.py runs the same rules many times over
and writes docs/statistics.md."""

from dataclasses import replace

from scipy.stats import binom

from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.studies.null_lab import (
    attack_epsilon_rate,
    canary_rates,
    dataset_inference_rate,
    end_to_end_rates,
    extraction_rate,
    gate_rates,
    interval_misses,
    texts_separate_rates,
    verdict_rates,
)
from lmaudit.studies.null_scenarios import Scenario

FAST = EvaluationSettings(bootstrap=10, permutations=200, balanced_repeats=1)
PATIENTS = Scenario("patients, ties, few non-members", 60, 25, 25, 4, icc=0.4, decimals=1, attacks=3)


def tolerated(rate) -> bool:
    """Whether a rate's events are within what its stated level gives at probability 0.999 (one-sided)."""
    return rate.events <= binom.ppf(0.999, rate.runs, rate.nominal)


def test_the_verdict_reads_no_leakage_when_there_is_none_and_finds_a_planted_one():
    null = verdict_rates(PATIENTS, 40, FAST) + verdict_rates(replace(PATIENTS, missing_groups=0.1), 20, FAST)
    assert all(tolerated(rate) for rate in null), [(r.rule, r.scenario, r.events, r.runs) for r in null]
    moderate, _ = verdict_rates(PATIENTS.with_effect(1.0), 10, FAST)  # an AUC of 0.76 per note
    _, high = verdict_rates(PATIENTS.with_effect(2.5), 10, FAST)  # 0.96: members exposed at a low false-positive rate
    assert moderate.events >= 9 and high.events >= 9


def test_the_gate_fails_no_clean_model_beyond_its_level_and_fails_a_leaking_one():
    """On the demo's counts (24 member and 12 non-member patients, several notes each): a model that learnt nothing
    fails `risk=moderate` and `risk=low` at most as often as 5% gives, never passes `risk=low` (12 non-members cannot
    read low: CANNOT DECIDE), and a planted leak (AUC 0.76 per note) fails `risk=low` in most audits."""
    demo = Scenario("the demo's counts", 24, 12, 12, 6, icc=0.3, ragged=True, attacks=3)
    null = {rate.rule: rate for rate in gate_rates(demo, 30, FAST)}
    failed = [null[f"gate risk={limit}: FAIL at some level"] for limit in ("moderate", "low")]
    assert all(tolerated(rate) for rate in failed), [(r.rule, r.events, r.runs) for r in failed]
    assert null["gate risk=low: PASS at every level"].events == 0
    leaking = {rate.rule: rate for rate in gate_rates(demo.with_effect(1.0), 10, FAST)}
    assert leaking["gate risk=low: FAIL at some level"].events >= 8


def test_the_new_users_scores_file_reads_no_leakage():
    """The issue's file (members 150 x 10 notes, non-members 30 x 10, population 50 x 10, a patient effect of ICC
    0.3, reference losses drawn alike) read 'moderate' in every run tried before; the verdict now stays at the low end."""
    moderate, high = end_to_end_rates(Scenario("new user's file", 150, 30, 50, 10, icc=0.3), 3, FAST)
    assert moderate.events == 0 and high.events == 0


def test_intervals_cover_the_truth_with_correlated_notes_near_auc_one():
    misses = interval_misses(Scenario("near 1", 60, 30, 0, 5, icc=0.5, effect=2.6), 60, 200)
    assert all(tolerated(rate) for rate in misses), [(r.rule, r.events) for r in misses]


def test_the_texts_alone_do_not_separate_patients_drawn_alike():
    rates = texts_separate_rates(Scenario("40 patients x 10 texts", 20, 20, 0, 10, icc=0.5), 12, 100)
    assert all(tolerated(rate) for rate in rates), [(r.rule, r.events) for r in rates]
    *_, shifted = texts_separate_rates(Scenario("a member-only word", 20, 20, 0, 10, icc=0.5, effect=1.0), 3, 100)
    assert shifted.events == 3


def test_dataset_inference_keeps_its_level_with_some_group_ids_missing():
    scenario = Scenario("10% of group ids missing", 30, 30, 0, 5, icc=0.3, missing_groups=0.1, attacks=3)
    assert tolerated(dataset_inference_rate(scenario, 60))
    assert dataset_inference_rate(scenario.with_effect(2.0), 5).events == 5


def test_the_epsilon_bounds_hold_their_confidence():
    assert tolerated(attack_epsilon_rate(PATIENTS.with_effect(0.0), 30, FAST))
    *valid, found = canary_rates(200, 2.0, 30)  # a 2-GDP mechanism: epsilon 10 at delta 1e-5
    for rate in canary_rates(200, 0.0, 100) + valid:
        assert tolerated(rate), (rate.rule, rate.scenario, rate.events)
    assert found.events >= 27  # and the bound finds it


def test_the_extraction_line_does_not_read_correlated_notes_as_memorisation():
    assert tolerated(extraction_rate(Scenario("patients x 10 notes", 40, 20, 0, 10, icc=0.5), 100))
