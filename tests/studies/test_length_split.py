"""The paper's short and long samples: a sliced result's row read by hand, and a kept cell of another split refused."""

import json

from lmaudit.studies.length_split import ANALYSIS_NAME, length_split_row, short_and_long


def sliced_result(slice_name: str, auc: float) -> dict:
    return {"attack": "loss", "signal": "mlm_energy", "level": "sample", "slice": slice_name, "auc": auc,
            "n_members": 30, "n_nonmembers": 12,
            "thresholds": [
                {"rule": "population", "alpha": 0.1, "precision": 0.75, "recall": 0.2},
                {"rule": "mean_member_loss", "alpha": None, "precision": 0.5, "recall": 0.9},
                {"rule": "population", "alpha": 0.01, "precision": None, "recall": 0.0}]}


def test_a_row_is_the_auc_and_the_population_thresholds_precision_and_recall():
    assert length_split_row(sliced_result("length:10-20", 0.61)) == {
        "samples": 42, "AUC": 0.61, "precision at pop. 10%": 0.75, "recall at pop. 10%": 0.2,
        "precision at pop. 1%": None, "recall at pop. 1%": 0.0}


def write_cell(out, name, bounds, results):
    folder = out / "cells" / name
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({"config": {"evaluation": {"length_bounds": bounds}},
                                                    "results": results}))


def test_the_analysis_keeps_length_slices_of_the_two_attacks_only(tmp_path):
    other = dict(sliced_result("length:21-60", 0.7), attack="zlib")
    write_cell(tmp_path, "a", [21], [sliced_result("all", 0.5), sliced_result("length:10-20", 0.6),
                                     sliced_result("length:21-60", 0.7), other])
    rows = short_and_long(tmp_path)([{"cell": "a"}])[ANALYSIS_NAME]
    assert list(rows) == ["a: loss, 10-20 tokens", "a: loss, 21-60 tokens"]
    assert [row["AUC"] for row in rows.values()] == [0.6, 0.7]


def test_a_cell_sliced_otherwise_is_named_not_tabulated(tmp_path):
    write_cell(tmp_path, "old", [], [sliced_result("length:10-17", 0.6)])
    assert "cell old was audited without the paper's length split" in short_and_long(tmp_path)([{"cell": "old"}])[ANALYSIS_NAME]
