"""Benchmark the AUC an audit computes about a thousand times (each slice's AUC and its balanced repeats): lmaudit's
(Mann-Whitney U) against scikit-learn's roc_auc_score on the same scores, in the same run, and check they agree.

    python benchmarks/auc.py [--out docs/performance.md] [--calls 1000]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
from markdown_section import markdown_table, replace_section
from sklearn.metrics import roc_auc_score

from lmaudit.metrics.roc import auc


def seconds_per_call(function, labels: np.ndarray, scores: np.ndarray, calls: int) -> float:
    """The mean wall time of one call, after one warm-up call."""
    function(labels, scores)
    started = time.perf_counter()
    for _ in range(calls):
        function(labels, scores)
    return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for n in (100, 1000, 10000):  # per side; rounded scores, so members and non-members tie
        labels = np.r_[np.ones(n, bool), np.zeros(n, bool)]
        scores = np.round(np.r_[rng.normal(0.5, 1, n), rng.normal(0, 1, n)], 2)
        assert abs(auc(labels, scores) - roc_auc_score(labels, scores)) < 1e-12
        ours, sklearn = (seconds_per_call(f, labels, scores, args.calls) for f in (auc, roc_auc_score))
        rows.append({"members + non-members": f"{2 * n:,}", "roc_auc_score ms": f"{1000 * sklearn:.2f}",
                     "lmaudit auc ms": f"{1000 * ours:.2f}", "speed-up": f"{sklearn / ours:.1f}x"})
    header = (f"Machine: {platform.machine()}, {os.cpu_count()} threads; Python {platform.python_version()}. Mean of "
              f"{args.calls} calls each, same scores, same run; the two AUCs agree to 1e-12.\n\n")
    text = header + markdown_table(rows)
    print(text)
    if args.out:
        replace_section(args.out, "auc", text)


if __name__ == "__main__":
    main()
