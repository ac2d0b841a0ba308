"""Slices come from the data: every sample is in exactly one slice of each slicing, length bins are quantiles of the
audited samples (or the bounds given), and each slice recalibrates its population threshold on its own population."""

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks.base import AttackScores
from lmaudit.attacks.thresholds import population_threshold
from lmaudit.metrics.evaluate import evaluate_attack, population_thresholds
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.metrics.slices import MISSING_VALUE, length_edges, length_slice_names, sample_slices


def test_length_edges_are_the_audited_quantiles_rounded_up_to_whole_tokens():
    lengths = np.arange(1, 101)  # quantiles 1/3 and 2/3 of 1..100 are 34.0 and 67.0
    assert length_edges(lengths, 3) == [34, 67]
    assert length_edges(lengths, 4) == [26, 51, 76]  # 25.75, 50.5, 75.25 rounded up
    assert length_edges(lengths, 1) == [] and length_edges(np.array([]), 3) == []
    assert length_edges(lengths, 3, bounds=(60, 20, 20)) == [20, 60]  # given bounds win, sorted and deduplicated
    assert length_edges(np.full(10, 7), 3) == []  # one length: a single slice would repeat "all"


def test_length_slices_are_named_by_the_token_range_they_hold_and_cover_every_sample():
    lengths = np.array([3, 10, 19, 20, 59, 60, 400])
    names = length_slice_names(lengths, [20, 60])
    assert names.tolist() == ["length:3-19", "length:3-19", "length:3-19", "length:20-59", "length:20-59",
                              "length:60-400", "length:60-400"]


def test_sample_slices_bin_by_audited_quantiles_and_slice_by_columns():
    samples = pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(8)],
        "role": ["member"] * 3 + ["nonmember"] * 3 + ["population"] * 2,
        "length": [10, 20, 30, 40, 50, 60, 1, 1000],  # population lengths outside the audited range still get a slice
    })
    columns = pd.DataFrame({"site": ["A", "B", None, "A", " B ", "", "A", "B"]}, index=samples["sample_id"])
    slices = sample_slices(samples, EvaluationSettings(length_slices=2, slice_by=("site",)), columns)
    assert list(slices.columns) == ["length", "site"]
    # The median of the audited lengths 10..60 is 35: edge 35; a name gives the range of every sample in the bin.
    assert slices["length"].tolist() == ["length:1-30"] * 3 + ["length:40-1000"] * 3 + ["length:1-30", "length:40-1000"]
    assert slices["site"].tolist() == ["site:A", "site:B", f"site:{MISSING_VALUE}", "site:A", "site:B",
                                       f"site:{MISSING_VALUE}", "site:A", "site:B"]
    assert sample_slices(samples, EvaluationSettings(length_slices=0)).columns.tolist() == []


def test_each_slice_is_evaluated_with_its_own_population_threshold():
    rng = np.random.default_rng(1)
    roles = ["member"] * 40 + ["nonmember"] * 40 + ["population"] * 40
    frame = pd.DataFrame({"id": [f"s{i}" for i in range(120)], "role": roles, "group_id": None,
                          "score": rng.normal(size=120)})
    site = np.where(np.arange(120) % 2 == 0, "site:A", "site:B")
    slices = pd.DataFrame({"site": site}, index=frame["id"])
    attack = AttackScores(frame, attack="loss", signal="x", level="sample")
    results, skipped = evaluate_attack(attack, EvaluationSettings(bootstrap=20), slices)
    assert [r.slice for r in results] == ["all", "site:A", "site:B"] and skipped == []
    for result, name in zip(results[1:], ("site:A", "site:B"), strict=True):
        inside = frame[site == name]
        expected = population_threshold(inside.loc[inside["role"] == "population", "score"].to_numpy(), 0.1)
        assert result.thresholds[0].value == expected
        assert result.n_members == 20 and result.n_nonmembers == 20 and result.n_population == 20
    # Group-level attacks are not sliced by sample columns.
    group_attack = AttackScores(frame, attack="loss", signal="x", level="group")
    assert [r.slice for r in evaluate_attack(group_attack, EvaluationSettings(bootstrap=20), slices)[0]] == ["all"]


@pytest.mark.parametrize(("scores", "reason"), [
    (np.arange(7.0), "the population has 7 patients; a 10% threshold needs at least 10"),
    (np.array([]), "no population patients: give population data (never trained on) to calibrate thresholds"),
    (np.ones(30), "the highest population scores tie, so no threshold calls at most 10% of the 30 population patients "
                  "members"),
])
def test_a_threshold_the_population_cannot_calibrate_is_left_out_with_the_reason(scores, reason):
    thresholds, unavailable = population_thresholds(scores, (0.1,), "patients")
    assert thresholds == [] and unavailable == {"population_threshold_0.1": reason}
    calibrated, none_missing = population_thresholds(np.arange(10.0), (0.1,), "patients")
    assert [t.value for t in calibrated] == [9.0] and none_missing == {}
