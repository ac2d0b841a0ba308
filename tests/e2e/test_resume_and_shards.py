"""A scoring process killed mid-way resumes without rescoring; shards split the work and merge in the store."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from lmaudit.signals.store import shard_positions
from tests.helpers import invoke


def score_arguments(model, data, out, cache, *extra):
    return ["score", "--target", str(model), "--data", str(data), "--k", "3", "--out", str(out), "--cache-dir", str(cache),
            *map(str, extra)]


def score_in_process(*arguments, threads: int | None = None):
    """`lmaudit score` in this process (importing torch in a new one costs seconds), on `threads` threads if given."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        invoke(*score_arguments(*arguments))
    finally:
        torch.set_num_threads(before)


def stored_rows(cache):
    parts = sorted(cache.rglob("part-*.parquet"))
    return parts, (pd.concat(pd.read_parquet(p) for p in parts) if parts else pd.DataFrame())


@pytest.fixture(scope="module")
def data_file(notes, tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "notes.csv"
    pd.concat([notes] * 3, ignore_index=True).assign(
        sample_id=lambda f: [f"s{i}" for i in range(len(f))]).to_csv(path, index=False)
    return path


def test_killed_run_resumes_and_matches_an_uninterrupted_run(tiny_model_dirs, data_file, tmp_path):
    cache = tmp_path / "cache"
    # Chunks of 2 samples on one thread: slow enough to be killed part-way. Every run below uses one thread too (the
    # killed process by OMP_NUM_THREADS, the in-process ones by torch), since float reductions may round differently
    # with another count.
    one_thread = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "lmaudit.cli", *score_arguments(
        tiny_model_dirs[0], data_file, tmp_path / "a.csv", cache, "--chunk-size", 2)], env=one_thread)
    deadline = time.time() + 120
    while len(stored_rows(cache)[0]) < 3 and time.time() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert process.poll() is None, "the run finished before it could be interrupted"
    process.send_signal(signal.SIGKILL)
    process.wait()
    parts_before, rows_before = stored_rows(cache)
    n_samples = len(pd.read_csv(data_file))
    assert 0 < len(rows_before) < n_samples
    score_in_process(tiny_model_dirs[0], data_file, tmp_path / "a.csv", cache, "--chunk-size", 2, threads=1)
    parts_after, rows_after = stored_rows(cache)
    assert set(parts_before) <= set(parts_after)
    # Nothing finished was scored again: every sample is stored exactly once.
    assert len(rows_after) == n_samples and rows_after["sample_id"].is_unique
    score_in_process(tiny_model_dirs[0], data_file, tmp_path / "b.csv", tmp_path / "fresh", "--chunk-size", 2, threads=1)
    resumed, uninterrupted = pd.read_csv(tmp_path / "a.csv"), pd.read_csv(tmp_path / "b.csv")
    # Same chunks, same batches: the resumed numbers are bit-identical, not merely close.
    pd.testing.assert_frame_equal(resumed, uninterrupted, check_exact=True)


def test_shards_are_disjoint_cover_all_and_balance_length():
    rng = np.random.default_rng(0)
    texts = ["x" * int(n) for n in rng.integers(10, 400, 1001)]
    ids = [f"s{i}" for i in range(1001)]
    parts = [shard_positions(texts, ids, (i, 4)) for i in range(4)]
    assert sorted(np.concatenate(parts).tolist()) == list(range(1001))
    work = [sum(len(texts[i]) for i in part) for part in parts]
    assert max(work) / min(work) < 1.01


def test_sharded_runs_merge_into_the_unsharded_result(tiny_model_dirs, data_file, tmp_path):
    cache = tmp_path / "cache"

    def score(out, cache, *extra):
        score_in_process(tiny_model_dirs[0], data_file, out, cache, *extra)

    for index in range(3):
        score(tmp_path / f"shard{index}.csv", cache, "--shard", f"{index}/3")
    shards = pd.concat(pd.read_csv(tmp_path / f"shard{i}.csv") for i in range(3))
    assert shards["sample_id"].is_unique and len(shards) == len(pd.read_csv(data_file))
    parts = sorted(cache.rglob("part-*.parquet"))
    score(tmp_path / "all.csv", cache)
    assert sorted(cache.rglob("part-*.parquet")) == parts  # the merged run computed nothing
    score(tmp_path / "direct.csv", tmp_path / "fresh")
    merged = pd.read_csv(tmp_path / "all.csv")
    pd.testing.assert_frame_equal(merged, pd.read_csv(tmp_path / "direct.csv"))
    pd.testing.assert_frame_equal(shards.set_index("sample_id").loc[merged["sample_id"]].reset_index(), merged)
