"""lmaudit_training.json, which `canaries audit` trusts, has one model, one reader and one writer: a write keeps the
fields it does not set, replaces the file whole (no temporary left, the old file intact when the write fails), refuses
a field the model does not name, is strict JSON, and an infinite accountant's epsilon (a run without noise) reads back
as infinity, not as a missing value."""

from __future__ import annotations

import json
import math
from dataclasses import fields

import pytest

from lmaudit.errors import InputError
from lmaudit.models.classifier import ClassifierTrainingSummary
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.models.train import TrainingSummary
from lmaudit.models.training_file import TrainingRecord, read_training_summary, update_training_summary
from lmaudit.training.dp_watch import merge_record

DP = {"noise_multiplier": 1.0, "max_grad_norm": 1.0, "delta": 1e-5, "sample_rate": 0.01, "steps": 100,
      "poisson_sampling": True, "epsilon_rdp": 2.5, "epsilon_prv": 2.1}


def written(folder) -> dict:
    """The file as JSON reads it, refusing what strict JSON has not (NaN, Infinity)."""
    def refuse(token):
        raise AssertionError(f"{token} in {SUMMARY_FILE}: not strict JSON")
    return json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"), parse_constant=refuse)


def test_an_update_keeps_the_other_fields(tmp_path):
    (tmp_path / SUMMARY_FILE).write_text(json.dumps({"trained_by": "lmaudit train clm", "epochs": 3}))
    update_training_summary(tmp_path, {"dp": DP})
    assert written(tmp_path) == {"trained_by": "lmaudit train clm", "epochs": 3, "dp": DP}
    assert [path.name for path in tmp_path.iterdir()] == [SUMMARY_FILE]


def test_a_folder_without_the_file_starts_from_what_the_caller_creates_or_is_refused(tmp_path):
    with pytest.raises(InputError, match=f"{SUMMARY_FILE}: missing"):
        update_training_summary(tmp_path, {"canaries": []})
    assert read_training_summary(tmp_path) is None
    update_training_summary(tmp_path, {"canaries": []}, created={"trained_by": "a user's script"})
    assert written(tmp_path) == {"trained_by": "a user's script", "canaries": []}
    assert read_training_summary(tmp_path).trained_by == "a user's script"


def test_a_write_that_the_model_refuses_leaves_the_old_file_whole(tmp_path):
    (tmp_path / SUMMARY_FILE).write_text(json.dumps({"trained_by": "lmaudit"}))
    with pytest.raises(ValueError, match="dp.steps"):
        update_training_summary(tmp_path, {"dp": {**DP, "steps": "many"}})
    with pytest.raises(ValueError, match="epoch_count"):
        update_training_summary(tmp_path, {"epoch_count": 3})  # a misspelt field is refused, not kept
    assert written(tmp_path) == {"trained_by": "lmaudit"}
    assert [path.name for path in tmp_path.iterdir()] == [SUMMARY_FILE]


@pytest.mark.parametrize("content, fragment", [(b"{\"trained_by\": \xff", "not the file lmaudit writes"),
                                                (b"{\"epochs\": \"three\"}", "epochs:"),
                                                (b"{\"trained_by\": \"x\", \"colour\": 1}", "colour:")])
def test_an_unreadable_or_misshapen_file_is_one_line_naming_it_and_the_field(tmp_path, content, fragment):
    (tmp_path / SUMMARY_FILE).write_bytes(content)
    with pytest.raises(InputError, match=f"{SUMMARY_FILE}: .*{fragment}") as raised:
        read_training_summary(tmp_path)
    assert "\n" not in str(raised.value)


def test_the_dp_watch_record_of_a_run_without_noise_reads_back_infinite_from_strict_json(tmp_path):
    """Noise 0 has an infinite accountant's epsilon, which the canary audit compares its bounds with: it must read back
    as infinity (null would read as "not computed", and the comparison would fail), from a file without `Infinity`."""
    merge_record(tmp_path, {**DP, "noise_multiplier": 0.0, "epsilon_prv": math.inf, "epsilon_rdp": math.inf})
    assert written(tmp_path)["dp"]["epsilon_rdp"] == "Infinity"
    record = read_training_summary(tmp_path)
    assert record.dp.epsilon_prv == math.inf and record.dp.epsilon_rdp == math.inf
    assert record.trained_by == "a user's script, with lmaudit.training.watch_dp_sgd"


def test_a_file_an_earlier_release_wrote_with_python_infinity_still_reads(tmp_path):
    (tmp_path / SUMMARY_FILE).write_text('{"dp": ' + json.dumps({**DP, "epsilon_rdp": math.inf}) + "}")
    assert read_training_summary(tmp_path).dp.epsilon_rdp == math.inf


def test_every_field_a_training_run_records_is_a_field_of_the_file():
    """`lmaudit train` writes its summaries' fields: the file's model names each one, so no run is refused at the end."""
    recorded = {field.name for summary in (TrainingSummary, ClassifierTrainingSummary) for field in fields(summary)}
    assert recorded <= set(TrainingRecord.model_fields)
