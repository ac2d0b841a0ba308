"""How long the blind baseline takes (`metrics/blind.py`: word and character n-gram TF-IDF, a logistic regression,
5 folds grouped by patient) on generated notes: members and non-members of one hospital, at several sizes up to
100,000 texts, with its peak memory (the process's largest resident set) and its AUC, which should be near 0.5 here.

    python benchmarks/blind_baseline.py [--out docs/performance.md] [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
from markdown_section import machine_line, markdown_table, publish
from sklearn.metrics import roc_auc_score

from lmaudit.data.synth import generate_notes
from lmaudit.metrics.blind import BLIND_FOLDS, blind_scores

SEED = 0


def run(notes, size: int) -> dict:
    """The blind baseline on the first `size` notes, patients split into members and non-members by a coin: one row."""
    rows = notes.iloc[:size]
    patients = rows["group_id"].unique()
    members = set(np.random.default_rng(SEED).choice(patients, size=len(patients) // 2, replace=False))
    labels = rows["group_id"].isin(members).to_numpy()
    started = time.perf_counter()
    scores = blind_scores(rows["text"].tolist(), labels, rows["group_id"].to_numpy(), seed=SEED)
    seconds = time.perf_counter() - started
    return {"texts": f"{size:,}", "patients": f"{len(patients):,}", "folds": BLIND_FOLDS, "seconds": f"{seconds:.1f}",
            "texts per second": f"{size / seconds:,.0f}", "AUC": f"{roc_auc_score(labels, scores):.3f}",
            "peak memory (GiB)": f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20:.2f}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    notes = generate_notes(max(sizes) // 10, SEED)  # a patient writes about 17 notes: enough for the largest size
    while len(notes) < max(sizes):
        notes = generate_notes(2 * notes["group_id"].nunique(), SEED)
    rows = [run(notes, size) for size in sizes]
    text = (f"{machine_line()} Generated notes (mean {notes['text'].str.split().str.len().mean():.0f} words), "
            f"patients split into members and non-members by a coin, seed {SEED}; peak memory is the process's, "
            f"cumulative over the sizes.\n\n" + markdown_table(rows))
    publish(text, args.out, "blind-baseline")


if __name__ == "__main__":
    main()
