"""The gate's decisions (report/gate.py) on verdicts built from hand-made results: each threshold is PASS, FAIL or CANNOT
DECIDE by its stated rule, a leak that few non-members keep from reading high never passes, an audit that could never
have read high or low says it cannot decide, and a threshold is written one way whatever name its level is given."""

import pytest

from lmaudit.errors import InputError
from lmaudit.report.document import LevelVerdict
from lmaudit.report.gate import FAIL, PASS, UNDECIDED, decide
from lmaudit.report.plan import parse_threshold, threshold_text
from tests.report.test_verdict import leakage_section, result, verdict_of

DEMO_PATIENTS = {"members": 24, "nonmembers": 12, "fpr_ci": (0.0, 0.265), "fp": 0, "limited": True}


def level_of(p_value: float, **kwargs) -> LevelVerdict:
    """The patient level's verdict of one attack with these results (24 member and 12 non-member patients unless
    given) and this family-wise p-value."""
    results = [result("loss", level="group", **{**DEMO_PATIENTS, **kwargs})]
    tests = {**leakage_section({("loss", "group"): p_value}), "member_groups": kwargs.get("members", 24),
             "nonmember_groups": kwargs.get("nonmembers", 12), "permutations": 1000}
    return verdict_of(results, {"group": "patient"}, 1e-5, None, tests).levels["group"]


MODERATE, LOW = parse_threshold("patient:risk=moderate"), parse_threshold("patient:risk=low")


def test_a_leak_that_exposes_most_members_fails_moderate_though_it_reads_moderate():
    """The README's demo: 19 of 24 member patients exposed, 0 of 12 non-members accused, p = 0.002; 12 non-members
    keep it from reading high, and the gate fails it all the same."""
    level = level_of(0.002, tpr=0.792, tpr_ci=(0.578, 0.929), tp=19, epsilons=(0.7,))
    assert level.risk == "moderate"
    decision = decide(level, MODERATE)
    assert decision.decision == FAIL and "79.2% of member patients (19 of 24)" in decision.line, decision.line


@pytest.mark.parametrize(("epsilons", "expected", "says"), [
    ((0.7,), PASS, "reads moderate"),  # a calibrated threshold: epsilon 1.64 was within reach, so high could be read
    ((), UNDECIDED, "could never read high"),  # no calibrated threshold: nothing could have read high
])
def test_moderate_passes_only_where_the_counts_could_have_read_high(epsilons, expected, says):
    level = level_of(0.002, tpr=0.3, tpr_ci=(0.13, 0.53), tp=7, epsilons=epsilons)
    decision = decide(level, MODERATE)
    assert decision.decision == expected and says in decision.line, decision.line


def test_a_model_that_beat_no_chance_passes_moderate_and_cannot_be_decided_low():
    """A clean model on the demo's counts: inconclusive; it passes 'at most moderate' (high was within reach), but
    'low' cannot be decided: 12 non-member patients, about 581 needed."""
    level = level_of(0.65, tpr=0.17, tpr_ci=(0.05, 0.37), tp=4, epsilons=(0.1,))
    assert level.risk == "inconclusive"
    assert decide(level, MODERATE).decision == PASS
    low = decide(level, LOW)
    assert low.decision == UNDECIDED and "about 581 independent ones needed, 12 given" in low.line, low.line


def test_high_fails_both_and_low_passes_both():
    high = level_of(0.002, tpr=0.9, tpr_ci=(0.7, 0.98), tp=22, epsilons=(1.4,))
    assert high.risk == "high"
    assert decide(high, MODERATE).decision == decide(high, LOW).decision == FAIL
    low = level_of(0.4, members=2000, nonmembers=2000, fpr_ci=(0.005, 0.015), tpr=0.01, tpr_ci=(0.006, 0.015),
                   tp=20, fp=20, limited=False)
    assert low.risk == "low"
    assert decide(low, MODERATE).decision == decide(low, LOW).decision == PASS


def test_a_level_the_texts_alone_decide_cannot_be_decided():
    results = [result("loss", level="group", auc=0.66, auc_ci=(0.62, 0.7), tpr_ci=(0.08, 0.2), fpr_ci=(0.005, 0.016))]
    summary = verdict_of(results, {"group": "patient"}, 1e-5,
                      {"group": {"auc": 0.62, "auc_ci": [0.55, 0.69], "texts_separate": True}},
                      leakage_section({("loss", "group"): 0.001}))
    level = summary.levels["group"]
    assert level.shift and level.risk_from_attacks == "high"
    for threshold in (MODERATE, LOW):
        decision = decide(level, threshold)
        assert decision.decision == UNDECIDED and "texts alone" in decision.line


@pytest.mark.parametrize(("threshold", "expected"), [
    ("patient:auc=0.95", PASS),  # the upper end 0.9 is below
    ("patient:auc=0.85", FAIL),  # the upper end is above, and the interval [0.7, 0.9] could have been lower
    ("patient:auc:point=0.85", PASS),
    ("patient:auc:lower=0.65", FAIL),
    ("patient:tpr_at_1pct_fpr:point=0.1", FAIL),
    ("patient:tpr_at_1pct_fpr:upper=0.5", PASS),
])
def test_a_number_is_read_on_the_side_of_its_interval_the_threshold_names(threshold, expected):
    level = level_of(0.002, auc=0.8, auc_ci=(0.7, 0.9), tpr=0.2, tpr_ci=(0.07, 0.41), tp=5, epsilons=(0.5,))
    decision = decide(level, parse_threshold(threshold))
    assert decision.decision == expected, decision.line


def test_a_number_these_counts_could_never_meet_cannot_be_decided_unless_the_interval_is_wholly_over():
    """24 member patients: no TPR interval's upper end can be below 0.142 even with none exposed; 0.1 is then undecided
    where the interval reaches below it, a FAIL where it lies wholly above."""
    threshold = parse_threshold("patient:tpr_at_1pct_fpr=0.1")
    undecided = decide(level_of(0.3, tpr=0.04, tpr_ci=(0.001, 0.21), tp=1, epsilons=(0.1,)), threshold)
    assert undecided.decision == UNDECIDED and "learnt nothing would read 0.1425" in undecided.line, undecided.line
    assert decide(level_of(0.002, tpr=0.5, tpr_ci=(0.29, 0.71), tp=12, epsilons=(0.9,)), threshold).decision == FAIL


def test_a_level_or_a_number_the_report_lacks_cannot_be_decided():
    assert decide(None, MODERATE).decision == UNDECIDED
    level = level_of(0.3, epsilons=(0.1,)).model_copy(update={"tpr_at_1pct_fpr": None})
    assert decide(level, parse_threshold("patient:tpr_at_1pct_fpr=0.5")).decision == UNDECIDED


@pytest.mark.parametrize(("given", "written"), [
    ("patient:risk=moderate", "group:risk=moderate"), ("user:risk=low", "group:risk=low"),
    ("group:risk=low", "group:risk=low"), ("admission:auc=0.7", "subgroup:auc:upper=0.7"),
    ("sample:auc_upper=0.6", "sample:auc:upper=0.6"), ("sample:tpr_at_1pct_fpr:point=0.05", "sample:tpr_at_1pct_fpr:point=0.05"),
])
def test_a_threshold_takes_the_reports_level_names_and_is_written_one_way(given, written):
    assert threshold_text(parse_threshold(given)) == written


@pytest.mark.parametrize(("given", "says"), [
    ("patient:risk=high", "high would pass every model"), ("patient:risk=inconclusive", "low or moderate"),
    ("ward:risk=low", "no level 'ward'"), ("sample:recall=0.5", "METRIC one of"), ("sample:auc:middle=0.5", "SIDE"),
    ("sample:auc=1.5", "from 0 to 1"), ("sample:risk:upper=low", "low or moderate"),
])
def test_a_threshold_that_means_nothing_is_refused(given, says):
    with pytest.raises(InputError, match=says):
        parse_threshold(given)


def test_a_report_without_power_is_still_decided_by_its_risk():
    """A report written before levels recorded their power: its risk alone decides (no 'could never' reading)."""
    level = level_of(0.3, epsilons=()).model_copy(update={"power": None})
    assert decide(level, MODERATE).decision == PASS
    assert decide(level, LOW).decision == UNDECIDED
