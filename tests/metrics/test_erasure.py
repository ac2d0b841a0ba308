"""The erasure audit's numbers (metrics/erasure.py) against slow references written from the definitions (scikit-learn's
AUC, every relabelling enumerated, hand-computed PrivLeak), and the verdict's false-alarm rate under a realistic null
(several notes per subject sharing a subject effect, ragged counts, ties, few holdout subjects) and its power when
the forget subjects' texts still score higher (docs/statistics.md)."""

from itertools import combinations

import numpy as np
import pytest
from scipy.stats import binom
from sklearn.metrics import roc_auc_score

from lmaudit.metrics.erasure import (
    CANNOT_DECIDE,
    NOT_DETECTED,
    STILL_DETECTABLE,
    UNLEARNING_DETECTABLE,
    auc_change,
    decide,
    equivalence,
    erasure_findings,
    mean_change,
    paired_aucs,
    privleak,
    privleak_interval,
    separation,
    standardised_aucs,
    subject_separations,
)
from lmaudit.studies.erasure_null import ErasureScenario, change_rate, equivalence_rate, simulated_erasure, verdict_rates

LEVEL = 0.05


def simulate(rng: np.random.Generator, forget: int = 1, holdout: int = 39, notes: int = 5, shift: float = 0.0,
             before_shift: float = 1.0, icc: float = 0.3) -> dict:
    """One simulated audit of the null laboratory (studies/erasure_null.py): `forget` erased and `holdout` never-trained
    subjects, a forget subject's `notes` notes, the after model's forget notes shifted by `shift` standard deviations
    (0: nothing of them remains), the before model's by `before_shift`; scores rounded to tenths."""
    scenario = ErasureScenario("test", forget, holdout, notes, icc, shift, before_shift)
    run = simulated_erasure(scenario, rng)
    return {"groups": run["groups"], "is_forget": run["is_forget"], "after": run["probes"]["after"],
            "before": run["before"]}


def verdicts(run: dict, permutations: int = 199, probes: tuple[str, ...] = ("after",)) -> list:
    """The pooled and per-subject findings of one simulated audit."""
    return erasure_findings({name: run[name] for name in probes}, run["before"], run["groups"], run["is_forget"],
                            LEVEL, permutations)


def test_standardised_aucs_are_each_subject_against_every_other_text():
    """Each subject's AUC equals scikit-learn's for its texts against all the others (ties 1/2)."""
    rng = np.random.default_rng(0)
    scores = np.round(rng.normal(size=40), 1)
    codes = rng.integers(0, 6, size=40)
    aucs, z = standardised_aucs(scores, codes)
    for code in range(6):
        own = codes == code
        assert aucs[code] == pytest.approx(roc_auc_score(own, scores))
        n, m = own.sum(), (~own).sum()
        assert z[code] == pytest.approx((aucs[code] - 0.5) / np.sqrt((n + m + 1) / (12 * n * m)))


def test_a_subjects_p_value_is_its_rank_among_the_holdout_subjects():
    """The p-value is the share of the H + 1 subjects (the forget one with every holdout one) whose standardised AUC,
    each against the texts of all the others, is at least the forget subject's: computed here by a loop."""
    run = simulate(np.random.default_rng(1), forget=2, holdout=9, shift=1.0)
    found = subject_separations(run["after"], run["groups"], run["is_forget"])
    for entry in found:
        rows = (run["groups"] == entry.subject) | ~run["is_forget"]
        groups, scores = run["groups"][rows], run["after"][rows]
        z = {}
        for name in set(groups):
            own = groups == name
            n, m = own.sum(), (~own).sum()
            z[name] = (roc_auc_score(own, scores) - 0.5) / np.sqrt((n + m + 1) / (12 * n * m))
        assert entry.p_higher == pytest.approx(np.mean([value >= z[entry.subject] - 1e-12 for value in z.values()]))
        assert entry.p_lower == pytest.approx(np.mean([value <= z[entry.subject] + 1e-12 for value in z.values()]))
        assert entry.auc == pytest.approx(roc_auc_score(groups == entry.subject, scores))
        assert entry.texts == (run["groups"] == entry.subject).sum()


def test_the_pooled_p_values_match_every_relabelling_of_the_subjects():
    """With 2 forget and 6 holdout subjects there are 28 ways to choose the forget pair: the exact one-sided p-values are
    the shares of them whose standardised AUC, (AUC - 1/2) / sqrt((n + m + 1) / (12 n m)) with the pair's n texts, is
    at least (at most) the observed one; 20,000 random relabellings come within 0.015."""
    run = simulate(np.random.default_rng(2), forget=2, holdout=6, notes=3, shift=0.8)
    groups, scores = run["groups"], run["after"]
    names = sorted(set(groups))

    def standardised(chosen: np.ndarray) -> float:
        n, m = chosen.sum(), (~chosen).sum()
        return (roc_auc_score(chosen, scores) - 0.5) / np.sqrt((n + m + 1) / (12 * n * m))

    observed = standardised(run["is_forget"])
    every = [standardised(np.isin(groups, pair)) for pair in combinations(names, 2)]
    found = separation("after", scores, groups, run["is_forget"], 20000, 3, 50)
    assert found.auc == pytest.approx(roc_auc_score(run["is_forget"], scores))
    assert found.p_higher == pytest.approx(np.mean([z >= observed - 1e-12 for z in every]), abs=0.015)
    assert found.p_lower == pytest.approx(np.mean([z <= observed + 1e-12 for z in every]), abs=0.015)
    assert 0 < found.p_higher < 1
    assert (found.forget_subjects, found.holdout_subjects) == (2, 6)
    assert found.auc_ci[0] <= found.auc <= found.auc_ci[1]


def test_privleak_is_musé_s_relative_auc_difference():
    """Hand-computed: not unlearnt (AUC 1 against a retrained 0.5) -100; as retrained 0; over-unlearnt (0) +100; and
    a retrained model at 0.6 with the after model at 0.8: ((0.2 - 0.4) / 0.4) x 100 = -50."""
    assert privleak(1.0, 0.5) == pytest.approx(-100)
    assert privleak(0.5, 0.5) == pytest.approx(0)
    assert privleak(0.0, 0.5) == pytest.approx(100)
    assert privleak(0.8, 0.6) == pytest.approx(-50)


def test_bootstrap_draws_are_paired_across_models():
    """The same subjects are drawn for every score: the draws of one score given twice are equal, and PrivLeak of a
    model against itself is 0 in every draw."""
    run = simulate(np.random.default_rng(3), forget=3, shift=0.5)
    draws = paired_aucs({"a": run["after"], "b": run["after"].copy(), "c": run["before"]}, run["groups"],
                        run["is_forget"], 200, 4)
    assert np.array_equal(draws["a"], draws["b"])
    assert not np.array_equal(draws["a"], draws["c"])
    same = privleak_interval(run["after"], run["after"], run["groups"], run["is_forget"], 200, 4)
    assert same.value == pytest.approx(0) and same.ci == pytest.approx((0, 0))


def test_equivalence_holds_for_the_same_model_and_not_for_a_held_subject():
    """An after model equal to the retrained one is within any margin; an after model that still separates the forget
    texts (AUC far above the retrained model's) is not, and the before model fails it too (the test has power); with
    one erased subject it is not tested, however close the models."""
    run = simulate(np.random.default_rng(4), forget=5, holdout=40, shift=1.5, before_shift=1.5)
    retrained = simulate(np.random.default_rng(4), forget=5, holdout=40, shift=0.0)["after"]
    same = equivalence(retrained, run["before"], retrained, run["groups"], run["is_forget"], 0.05, LEVEL, 200)
    assert same.equivalent and same.difference == pytest.approx(0) and same.before_equivalent is False
    held = equivalence(run["after"], run["before"], retrained, run["groups"], run["is_forget"], 0.05, LEVEL, 200)
    assert not held.equivalent and held.difference > 0.3
    against_half = equivalence(run["after"], None, None, run["groups"], run["is_forget"], 0.05, LEVEL, 200)
    assert against_half.difference == pytest.approx(roc_auc_score(run["is_forget"], run["after"]) - 0.5)
    assert against_half.before_equivalent is None
    one = simulate(np.random.default_rng(4), forget=1, holdout=40)
    alone = equivalence(one["after"], None, one["after"], one["groups"], one["is_forget"], 0.4, LEVEL, 200)
    assert not alone.equivalent and np.isnan(alone.difference_ci).all()  # one subject: the bootstrap cannot tell


def test_mean_change_and_auc_change_by_hand():
    """The means and their change are plain means; the AUC change is the difference of scikit-learn's AUCs."""
    before, after = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.5, 2.5, 3.0, 5.0])
    groups = np.array(["a", "a", "b", "c"])
    change = mean_change("loss", before, after, groups, 100)
    assert (change.before, change.after, change.change) == pytest.approx((2.5, 3.0, 0.5))
    assert change.change_ci[0] <= change.change <= change.change_ci[1]
    first = np.array([True, True, False, False])
    moved = auc_change("auc", after, before[::-1], groups, first, 100)
    assert moved.change == pytest.approx(roc_auc_score(first, before[::-1]) - roc_auc_score(first, after))


def test_decide_corrects_the_family_by_max_t_over_the_same_null_rows():
    """Two probes and the lower test on the same 20 null rows (the observed first): each test's family-wise p-value is
    the share of rows whose largest standardised statistic (each test centred and scaled over the rows) reaches the
    test's own, computed here by loops. A copy of a probe costs nothing, and a subject far above every null row gets
    the smallest p-value the rows allow, 1/20, however many tests there are."""
    rng = np.random.default_rng(5)
    null = rng.normal(size=20)
    null[0] = 6.0
    statistics = np.column_stack([null, null])
    finding = decide(statistics, ["after", "copy"], null, 0.05, LEVEL, None)
    columns = [null, null, -null]
    standard = [(column - column.mean()) / column.std() for column in columns]
    largest = [max(column[row] for column in standard) for row in range(20)]
    expected = [np.mean([largest[row] >= column[0] for row in range(20)]) for column in standard]
    assert list(finding.family_p_values.values()) == pytest.approx(expected)
    assert finding.family_p_values["after"] == finding.family_p_values["copy"] == pytest.approx(1 / 20)
    assert finding.finding == STILL_DETECTABLE and finding.before_p_value == pytest.approx(1 / 20)


def test_decide_words_each_outcome():
    """Still detectable where a probe's test rejects, the unlearning detectable where the lower one does, cannot
    decide where the smallest p-value the tests can give is above the level, not detected otherwise."""
    up = np.r_[10.0, np.linspace(-1, 1, 99)][:, None]
    assert decide(up, ["after"], up[:, 0], 0.01, LEVEL, None).finding == STILL_DETECTABLE
    lower = decide(-up, ["after"], up[:, 0], 0.01, LEVEL, "s1")
    assert lower.finding == UNLEARNING_DETECTABLE and lower.rests_on == ["after, lower"] and lower.found_before
    middle = np.r_[0.0, np.linspace(-1, 1, 99)][:, None]
    assert decide(middle, ["after"], middle[:, 0], 0.01, LEVEL, None).finding == NOT_DETECTED
    assert decide(up[:10], ["after"], up[:10, 0], 0.1, LEVEL, None).finding == CANNOT_DECIDE


@pytest.mark.parametrize("scenario", [
    ErasureScenario("one subject of 10 notes, 39 holdout, ICC 0.3", 1, 39, 10),
    ErasureScenario("3 subjects of 4 notes, 39 holdout, ICC 0.6", 3, 39, 4, icc=0.6),
    ErasureScenario("one subject of 5 notes, 19 holdout, 3 probes", 1, 19, 5, probes=2)])
def test_nothing_left_is_not_detected_at_the_level(scenario):
    """300 audits in which the after model treats the forget subjects as never-trained ones (retraining): a detection,
    pooled or of the one subject, is a false alarm; each count stays below the 99.9% quantile of Binomial(300, 0.05)
    (docs/statistics.md: measured at 4,000 audits per design)."""
    for rate in verdict_rates(scenario, 300, LEVEL, 199, seed=21):
        assert rate.events <= binom.ppf(0.999, rate.runs, LEVEL), rate


def test_the_change_and_the_equivalence_keep_their_level():
    """The change test fires at most at the level when before and after treat the forget subjects alike, and finds a
    retraining's change (before +1.5 sd, after 0) nearly always; equivalence within 0.05 is claimed at most at the
    level at the margin's boundary, and mostly where nothing remains in a design of 20 subjects within 0.1 (measured 33
    of 40; within 0.05 it needs about 100 subjects, docs/statistics.md)."""
    alike = ErasureScenario("alike", 2, 39, 8, shift=1.0, before_shift=1.0)
    assert change_rate(alike, 300, LEVEL, 199, seed=31).events <= binom.ppf(0.999, 300, LEVEL)
    assert change_rate(ErasureScenario("retrained", 2, 39, 8), 100, LEVEL, 199, seed=32).events >= 90
    boundary = ErasureScenario("boundary", 20, 80, 10, icc=0.1)
    assert equivalence_rate(boundary, 200, True, 0.1, seed=33).events <= binom.ppf(0.999, 200, LEVEL)
    assert equivalence_rate(boundary, 50, False, 0.1, seed=34).events >= 30


def test_a_subject_still_held_is_found_and_named():
    """A subject of 10 notes whose after scores stay 1.5 standard deviations up (no unlearning, as before), on a score
    that a reference has calibrated (little subject effect left: ICC 0.05): still detectable in at least 80 of 100
    audits (measured 91 of 100 at another seed; docs/statistics.md), and the power seen on the before model."""
    rng = np.random.default_rng(22)
    found = [verdicts(simulate(rng, forget=1, notes=10, shift=1.5, before_shift=1.5, icc=0.05)) for _ in range(100)]
    assert sum(findings[0].finding == STILL_DETECTABLE for findings in found) >= 80
    assert sum(findings[1].finding == STILL_DETECTABLE and findings[1].found_before for findings in found) >= 75


def test_over_unlearning_is_itself_detectable():
    """Forget texts pushed 1.5 standard deviations below never-trained ones (gradient ascent run too far): the
    unlearning itself is detectable in at least 80 of 100 audits (calibrated scores, ICC 0.05; measured 91 of 100 at
    another seed)."""
    rng = np.random.default_rng(23)
    found = [verdicts(simulate(rng, forget=1, notes=10, shift=-1.5, icc=0.05)) for _ in range(100)]
    assert sum(findings[0].finding == UNLEARNING_DETECTABLE for findings in found) >= 80


def test_too_few_holdout_subjects_cannot_decide():
    """With 9 holdout subjects one subject's p-value is at least 1/10, above 0.05 / 2: that subject's verdict is
    'cannot decide', however far its texts stand out."""
    run = simulate(np.random.default_rng(24), forget=1, holdout=9, notes=10, shift=3.0)
    assert verdicts(run)[1].finding == CANNOT_DECIDE


def test_a_probe_testing_some_texts_only_is_tested_under_the_same_relabellings():
    """A probe with NaN scores (texts it does not test, as the relearning probe's relearned half) gives the statistics
    of its tested texts alone, under the same relabellings as a probe of every text: with the other half's scores
    changed arbitrarily, the pooled statistics are unchanged."""
    from lmaudit.metrics.erasure import pooled_statistics, subject_statistics

    run = simulate(np.random.default_rng(6), forget=2, holdout=12, notes=6, shift=0.7)
    half = np.arange(len(run["after"])) % 2 == 0
    partial = np.where(half, run["after"], np.nan)
    other = np.where(half, run["after"], run["after"] + 100)
    kept = pooled_statistics(partial, run["groups"], run["is_forget"], 99, 0)
    expected = pooled_statistics(run["after"][half], run["groups"][half], run["is_forget"][half], 99, 0)
    assert np.allclose(kept, expected, equal_nan=True)
    assert not np.allclose(kept, pooled_statistics(other, run["groups"], run["is_forget"], 99, 0))
    subject = run["groups"][run["is_forget"]][0]
    assert np.allclose(subject_statistics(partial, run["groups"], run["is_forget"], subject),
                       subject_statistics(run["after"][half], run["groups"][half], run["is_forget"][half], subject))


def test_extraction_shares_count_texts_and_subjects_by_hand():
    """Forget: subject a has 2 of 3 texts reproduced, b none of 1; holdout: c 1 of 2. Texts 2 of 4 and 1 of 2;
    subjects 1 of 2 and 1 of 1; the per-subject intervals are Clopper-Pearson's on those counts (scipy's)."""
    from scipy.stats import binomtest

    from lmaudit.metrics.erasure_extraction import extraction_shares

    shares = extraction_shares("after", np.array([1, 1, 0, 0, 1, 0], bool),
                               np.array([1, 1, 1, 1, 0, 0], bool), np.array(["a", "a", "a", "b", "c", "c"]))
    assert (shares.forget_texts.exposed, shares.forget_texts.units) == (2, 4)
    assert (shares.holdout_texts.exposed, shares.holdout_texts.units) == (1, 2)
    assert (shares.forget_subjects.exposed, shares.forget_subjects.units) == (1, 2)
    assert (shares.holdout_subjects.exposed, shares.holdout_subjects.units) == (1, 1)
    exact = binomtest(1, 2).proportion_ci(0.95, method="exact")
    assert shares.forget_subjects.interval == pytest.approx((exact.low, exact.high))
