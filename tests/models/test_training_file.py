"""lmaudit_training.json, which `canaries audit` trusts, has one reader and one writer: a write keeps the keys it does
not set, replaces the file whole (no temporary left, the old file intact when the write fails), and an infinite
accountant's epsilon (a run without noise) reads back as infinity, not as a missing value."""

from __future__ import annotations

import json
import math

import pytest

from lmaudit.errors import InputError
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.models.training_file import read_training_summary, update_training_summary
from lmaudit.training.dp_watch import merge_record


def test_an_update_keeps_the_other_keys(tmp_path):
    (tmp_path / SUMMARY_FILE).write_text(json.dumps({"trained_by": "lmaudit train clm", "epochs": 3}))
    update_training_summary(tmp_path, {"dp": {"epsilon_rdp": 2.5, "delta": 1e-5}})
    written = json.loads((tmp_path / SUMMARY_FILE).read_text(encoding="utf-8"))
    assert written == {"trained_by": "lmaudit train clm", "epochs": 3, "dp": {"epsilon_rdp": 2.5, "delta": 1e-5}}
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


def test_the_dp_watch_record_of_a_run_without_noise_reads_back_infinite(tmp_path):
    """Noise 0 has an infinite accountant's epsilon, which the canary audit compares its bounds with: it must read back
    as infinity (null would read as "not computed", and the comparison would fail)."""
    merge_record(tmp_path, {"epsilon_prv": math.inf, "epsilon_rdp": math.inf, "delta": 1e-5})
    written = read_training_summary(tmp_path)
    assert written["dp"]["epsilon_prv"] == math.inf and written["dp"]["epsilon_rdp"] == math.inf
    assert written["trained_by"] == "a user's script, with lmaudit.training.watch_dp_sgd"
