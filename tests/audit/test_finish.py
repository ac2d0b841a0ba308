"""audit/finish.py's tables and sections, without a model: scores.parquet's one row per sample with one column per
sample-level attack (named by signal where an attack runs on several), the extraction matches per prefix length, and
report.json's dataset-inference section, or why it could not run."""

import json

import numpy as np
import pandas as pd

from lmaudit.attacks.base import AttackScores
from lmaudit.audit.finish import Findings, scores_table
from lmaudit.data.roles import MEMBER, NONMEMBER
from lmaudit.metrics.dataset_inference import dataset_inference_section
from lmaudit.metrics.per_class import classifier_per_class
from lmaudit.strict_json import json_ready


def scores(attack: str, signal: str, values: dict[str, float], level: str = "sample") -> AttackScores:
    frame = pd.DataFrame({"id": list(values), "role": MEMBER, "score": list(values.values())})
    return AttackScores(frame, attack=attack, signal=signal, level=level)


SAMPLES = pd.DataFrame({"sample_id": ["m1", "m2", "n1"], "role": [MEMBER, MEMBER, NONMEMBER],
                        "group_id": ["p", "p", "q"], "length": [10, 12, 9]})


def test_each_sample_level_attack_is_one_column_joined_on_the_sample_id():
    """Scores land on their own sample whatever the order of the attack's rows; a sample an attack did not score is
    NaN; an attack on one signal is score_<attack>, one on several score_<attack>_<signal> (else the columns would
    collide); group-level scores are no column; the samples' rows and order are kept; text only when given."""
    attacks = [scores("zlib", "clm_tokens", {"n1": 3.0, "m2": 2.0, "m1": 1.0}),
               scores("min_k", "clm_tokens", {"m1": 0.1, "m2": 0.2}),
               scores("min_k", "mlm_tokens", {"m2": 0.7, "n1": 0.9, "m1": 0.5}),
               scores("user_inference", "clm_tokens", {"p": 5.0, "q": 6.0}, level="group")]
    table = scores_table(SAMPLES, attacks, None)
    assert list(table.columns) == [*SAMPLES.columns, "score_zlib", "score_min_k_clm_tokens", "score_min_k_mlm_tokens"]
    assert table["sample_id"].tolist() == ["m1", "m2", "n1"]
    assert table["score_zlib"].tolist() == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(table["score_min_k_clm_tokens"], [0.1, 0.2, np.nan])
    assert table["score_min_k_mlm_tokens"].tolist() == [0.5, 0.7, 0.9]
    texts = pd.Series(["one", "two", "three"], index=SAMPLES["sample_id"])
    assert scores_table(SAMPLES, attacks[:1], texts)["text"].tolist() == ["one", "two", "three"]
    assert "text" not in table


def test_extraction_matches_become_one_column_per_match_and_prefix_length():
    """extraction_<exact|common_prefix|similarity>_prefix<k> on each sample's row; NaN where a text was too short for
    that prefix length (no row at it); token ids and log p_z stay out."""
    extraction = pd.DataFrame({
        "sample_id": ["m1", "m2", "n1", "m1"], "prefix_tokens": [8, 8, 8, 16], "exact": [True, False, False, True],
        "common_prefix": [4, 1, 0, 4], "similarity": [1.0, 0.5, 0.25, 1.0], "approximate": [True, False, False, True],
        "prefix": [[1]] * 4, "suffix": [[2]] * 4, "generated": [[2]] * 4, "log_p[greedy]": [0.0] * 4})
    table = scores_table(SAMPLES, [], None, extraction)
    added = [column for column in table.columns if column.startswith("extraction_")]
    assert sorted(added) == sorted(f"extraction_{m}_prefix{k}" for m in ("exact", "common_prefix", "similarity")
                                   for k in (8, 16))
    assert list(table.columns) == [*SAMPLES.columns, *added]
    assert table["extraction_common_prefix_prefix8"].tolist() == [4, 1, 0]
    np.testing.assert_array_equal(table["extraction_similarity_prefix16"].astype(float), [1.0, np.nan, np.nan])
    assert table["sample_id"].tolist() == ["m1", "m2", "n1"]
    # each match keeps a type of its own, missing values included, so that scores.parquet's columns are not objects
    assert {str(table[f"extraction_{m}_prefix16"].dtype) for m in ("exact", "common_prefix", "similarity")} == {
        "boolean", "Int64", "Float64"}
    assert table["extraction_exact_prefix16"].isna().sum() == 2
    pd.testing.assert_frame_equal(scores_table(SAMPLES, [], None, extraction.iloc[:0]), SAMPLES)


def findings(patients_per_side: int) -> Findings:
    """Members scored higher than non-members, one note per patient, `patients_per_side` patients per side."""
    n = patients_per_side
    ids = [f"m{i}" for i in range(n)] + [f"n{i}" for i in range(n)]
    samples = pd.DataFrame({"sample_id": ids, "role": [MEMBER] * n + [NONMEMBER] * n,
                            "group_id": [f"p{i}" for i in range(2 * n)], "length": 10})
    rng = np.random.default_rng(0)
    values = np.r_[rng.normal(2, 0.1, n), rng.normal(0, 0.1, n)]
    return Findings(samples, [scores("zlib", "clm_tokens", dict(zip(ids, values, strict=True)))], [])


def test_the_dataset_inference_section_says_why_it_could_not_run():
    """Three patients a side cannot be split into halves to learn from and test on: the section says so (counting
    the unit it is given, 'patient') instead of failing the whole report."""
    few = findings(3)
    section = dataset_inference_section(few.samples, few.attacks, "patient", seed=0)
    assert list(section) == ["unavailable"]
    assert "at least 4 suspect patients" in section["unavailable"]


def test_the_dataset_inference_section_counts_its_unit_and_is_strict_json():
    """Enough patients: the test's numbers, counted in patients; strict JSON once made ready (no NaN or numpy value).
    The report names its sets and rule (tests/report/test_build.py)."""
    many = findings(12)
    section = dataset_inference_section(many.samples, many.attacks, "patient", seed=0)
    assert section["unit"] == "patient" and "rule" not in section
    assert section["features"] == ["zlib on clm_tokens"] and section["p_value"] < 0.05
    json.dumps(json_ready(section), allow_nan=False)


def test_per_class_analyses_are_for_classifier_audits_only():
    """A language-model audit (no label column, no Algorithm 1) has no per_class section."""
    assert classifier_per_class(SAMPLES, [scores("zlib", "clm_tokens", {"m1": 1.0})]) is None
