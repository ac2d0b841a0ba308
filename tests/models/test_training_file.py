"""lmaudit_training.json, which `canaries audit` trusts, has one reader and one writer: a write keeps the keys it does
not set, replaces the file whole (no temporary left, the old file intact when the write fails), and is strict JSON
(NaN written as null, never as the bare NaN that strict readers refuse)."""

from __future__ import annotations

import json
import math

import pytest

from lmaudit.errors import InputError
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.models.training_file import read_training_summary, update_training_summary
from lmaudit.training.dp_watch import merge_record


def strict_load(text: str):
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_an_update_keeps_the_other_keys_and_writes_strict_json(tmp_path):
    (tmp_path / SUMMARY_FILE).write_text(json.dumps({"trained_by": "lmaudit train clm", "epochs": 3}))
    update_training_summary(tmp_path, {"dp": {"epsilon": math.nan, "delta": 1e-5}})
    written = strict_load((tmp_path / SUMMARY_FILE).read_text(encoding="utf-8"))
    assert written == {"trained_by": "lmaudit train clm", "epochs": 3, "dp": {"epsilon": None, "delta": 1e-5}}
    assert [path.name for path in tmp_path.iterdir()] == [SUMMARY_FILE]


def test_a_folder_without_the_file_starts_from_what_the_caller_creates_or_is_refused(tmp_path):
    with pytest.raises(InputError, match=f"{SUMMARY_FILE}: missing"):
        update_training_summary(tmp_path, {"canaries": []})
    assert read_training_summary(tmp_path) is None
    update_training_summary(tmp_path, {"canaries": []}, created={"trained_by": "a user's script"})
    assert read_training_summary(tmp_path) == {"trained_by": "a user's script", "canaries": []}


def test_a_write_that_fails_leaves_the_old_file_whole(tmp_path):
    (tmp_path / SUMMARY_FILE).write_text(json.dumps({"trained_by": "lmaudit"}))
    with pytest.raises(TypeError):
        update_training_summary(tmp_path, {"dp": {"unwritable": object()}})
    assert read_training_summary(tmp_path) == {"trained_by": "lmaudit"}
    assert [path.name for path in tmp_path.iterdir()] == [SUMMARY_FILE]


def test_an_unreadable_file_is_one_line_naming_it(tmp_path):
    (tmp_path / SUMMARY_FILE).write_bytes(b"{\"trained_by\": \xff")
    with pytest.raises(InputError, match=f"{SUMMARY_FILE}: not a JSON file lmaudit wrote"):
        read_training_summary(tmp_path)


def test_the_dp_watch_record_with_a_missing_number_stays_strict_json(tmp_path):
    """A DP-SGD watch whose noise check could not run records its deviation as NaN: written as null."""
    merge_record(tmp_path, {"verdict": "consistent", "noise_deviation": math.nan})
    written = strict_load((tmp_path / SUMMARY_FILE).read_text(encoding="utf-8"))
    assert written["dp"] == {"verdict": "consistent", "noise_deviation": None}
    assert written["trained_by"] == "a user's script, with lmaudit.training.watch_dp_sgd"
