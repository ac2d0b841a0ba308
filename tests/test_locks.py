"""One run per output folder: a second run into a folder another run holds is refused in one line naming the holder;
the lock leaves nothing behind, survives a killed holder's stale file, and one process may nest it (a demo's audit)."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from lmaudit.errors import InputError
from lmaudit.locks import LOCK_NAME, output_lock
from tests.helpers import assert_one_line_error, run_cli

HOLD = "import sys; from lmaudit.locks import output_lock\nwith output_lock(sys.argv[1]):\n print('held', flush=True)\n sys.stdin.read()"


@pytest.fixture
def scores(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "scores.csv"
    pd.DataFrame({"sample_id": [f"s{i}" for i in range(40)], "role": ["member", "nonmember", "population", "population"] * 10,
                  "target_loss": rng.normal(size=40)}).to_csv(path, index=False)
    return path


def test_a_second_run_into_a_held_folder_is_refused_and_runs_once_the_holder_ends(scores, tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, output = run_cli("attack", "--scores", scores, "--out", out, "--bootstrap", 10)
        assert_one_line_error(code, output, str(out.resolve()), f"another lmaudit run (pid {holder.pid}, since",
                              "wait for it to finish or pass another --out")
        assert [p.name for p in out.iterdir()] == [LOCK_NAME]  # the refused run wrote nothing
    finally:
        holder.communicate("")
    assert holder.returncode == 0 and not out.exists()  # the holder created the folder, filled nothing: removed
    code, output = run_cli("attack", "--scores", scores, "--out", out, "--bootstrap", 10)
    assert code == 0, output
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json", "scores.parquet"]


def test_a_stale_lock_file_of_a_killed_run_does_not_block(tmp_path):
    (tmp_path / LOCK_NAME).write_text("pid 1, since 2026-01-01 00:00:00")  # the file stays; its lock died with the run
    with output_lock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text().startswith(f"pid {os.getpid()},")
    assert not (tmp_path / LOCK_NAME).exists()


def test_one_process_may_nest_the_lock_and_a_failed_run_leaves_no_folder(tmp_path):
    out = tmp_path / "new" / "out"
    with pytest.raises(InputError, match="bad input"):
        with output_lock(out):
            with output_lock(out / "."):  # the same folder, named another way
                assert (out / LOCK_NAME).exists()
            assert (out / LOCK_NAME).exists()  # still held by the outer block
            raise InputError("bad input")
    assert not (tmp_path / "new").exists()
