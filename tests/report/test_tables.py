"""The report's summary tables pick the right cells: feature x attack (classifier) and attack x level (LMs), from the
typed records a report reads back as."""

from types import SimpleNamespace

from lmaudit.metrics.results import TprRecord
from lmaudit.report.document import RankedAttack
from lmaudit.report.tables import feature_attack_table, largest_bound, level_table
from tests.helpers import typed_result as result
from tests.helpers import typed_threshold as threshold


def test_level_table_puts_levels_side_by_side_with_the_mu_advantage():
    mu = threshold("mean_member_loss", advantage=0.3)
    population = threshold("population", advantage=0.9)
    results = [
        result("loss", "clm_loss", "sample", 0.7, [population, mu]),
        result("loss", "clm_loss", "sample", 0.6, [mu], slice_name="length:short"),
        result("loss", "clm_loss", "group", 0.9, [threshold("mean_member_loss", advantage=0.5)]),
        result("likelihood_ratio", "clm_loss", "sample", 0.8, [population]),
    ]
    rows = level_table(results)
    assert rows == [
        {"attack": "loss", "signal": "clm_loss", "levels": {"sample": {"auc": 0.7, "advantage": 0.3},
                                                             "group": {"auc": 0.9, "advantage": 0.5}}},
        {"attack": "likelihood_ratio", "signal": "clm_loss", "levels": {"sample": {"auc": 0.8, "advantage": None}}},
    ]
    assert level_table(results[:2]) == []  # one level only: nothing to put side by side


def test_feature_attack_table_reads_auc_and_shadow_accuracy():
    results = [
        result("sample_threshold", "loss", "sample", 0.66, [threshold("shadow", accuracy=0.61)]),
        result("user_logistic", "loss", "group", 0.91, [threshold("shadow", accuracy=0.87)]),
        result("loss", "mlm_energy", "sample", 0.55),
    ]
    assert feature_attack_table(results) == [{"feature": "loss", "attacks": {
        "sample_threshold": {"auc": 0.66, "accuracy": 0.61}, "user_logistic": {"auc": 0.91, "accuracy": 0.87}}}]


def test_ranking_lines_keep_columns_apart_for_long_names():
    from lmaudit.report.tables import ranking_lines

    point = TprRecord(tpr=0.1, fpr=0.0, tp=3, fp=1, tpr_ci=(0.0, 0.3), resolution_limited=False)
    rows = [RankedAttack(attack=attack, signal=signal, auc=0.6, auc_ci=(0.5, 0.7), tpr_at_fpr={"0.01": point, "0.001": point},
                         n_members=10, n_nonmembers=10, description="", paper="", access="black-box")
            for attack, signal in (("logistic_calibration", "attention_concentration"), ("loss", "x"))]
    lines = ranking_lines(SimpleNamespace(ranking={"sample": rows}, results=[]))
    column = lines[0].index("AUC [95% CI]")
    assert all(line[column:].startswith("0.600 [0.500, 0.700]") and line[column - 1] == " " for line in lines[2:])


def test_the_largest_bound_skips_thresholds_no_population_calibrated():
    """An uncalibrated threshold's bound is NaN (null in report.json): the largest is over the others, None if none."""
    bounds = [threshold("population", epsilon=0.4), threshold("mean_member_loss"), threshold("population", epsilon=1.2)]
    assert largest_bound(result("loss", "x", "sample", 0.6, bounds)) == 1.2
    assert largest_bound(result("loss", "x", "sample", 0.6, [threshold("mean_member_loss")])) is None
    assert largest_bound(result("loss", "x", "sample", 0.6)) is None
