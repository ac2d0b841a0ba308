"""How long the blind baselines take (`metrics/blind.py:every_blind_score`: word and word-pair TF-IDF with a logistic
regression, the largest year, greedy rare n-grams; 5 folds grouped by patient) on generated notes: members and
non-members of one hospital, at several sizes up to 100,000 texts, as notes (about 18 words) and as longer texts (five
consecutive notes joined, about 90 words), with the bag-of-words alone beside them, the peak memory (the process's
largest resident set) and each classifier's AUC, which should be near 0.5 here; and on the MLM demo's data, members
against the same hospital's and the other hospital's non-members.

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
from lmaudit.metrics.blind import BLIND_FOLDS, blind_scores, every_blind_score

SEED = 0


def timed(function, *args, **kwargs):
    started = time.perf_counter()
    return function(*args, **kwargs), time.perf_counter() - started


def joined(notes, count: int = 5):
    """Longer texts: each note with the `count` - 1 notes after it joined (the first note's patient is the group)."""
    texts = notes["text"].to_numpy()
    longer = [" ".join(texts[i:i + count]) for i in range(len(texts))]
    return notes.assign(text=longer)


def run(notes, size: int, kind: str) -> dict:
    """The blind baselines on the first `size` texts, patients split into members and non-members by a coin: one row."""
    rows = notes.iloc[:size]
    patients = rows["group_id"].unique()
    members = set(np.random.default_rng(SEED).choice(patients, size=len(patients) // 2, replace=False))
    labels = rows["group_id"].isin(members).to_numpy()
    texts, groups = rows["text"].tolist(), rows["group_id"].to_numpy()
    _, words_seconds = timed(blind_scores, texts, labels, groups, seed=SEED)
    scores, seconds = timed(every_blind_score, texts, labels, groups, seed=SEED)
    aucs = ", ".join(f"{roc_auc_score(labels, values):.3f}" for values in scores.values())
    return {"texts": f"{size:,} {kind}", "words per text": f"{rows['text'].str.split().str.len().mean():.0f}",
            "patients": f"{len(patients):,}", "folds": BLIND_FOLDS, "all three (s)": f"{seconds:.1f}",
            "bag-of-words alone (s)": f"{words_seconds:.1f}", "texts per second": f"{size / seconds:,.0f}",
            "AUC (words, dates, rare n-grams)": aucs,
            "peak memory (GiB)": f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20:.2f}"}


def demo_rows(size: str) -> list[dict]:
    """The blind baseline on the MLM demo's data at `size`: members against each non-member set (the same hospital's
    patients, and the other hospital's), per note and per patient (the mean of a patient's out-of-fold scores), with
    the AUC's interval (metrics/uncertainty.py:auc_interval) and the words that say 'member' most."""
    import tempfile

    import pandas as pd

    from lmaudit.data.roles import MEMBER, NONMEMBER
    from lmaudit.metrics.blind import group_means, member_features
    from lmaudit.metrics.uncertainty import auc_interval
    from lmaudit.studies.setup import DEMO_SIZES, DEMO_SPLIT, split_and_write_roles, write_other_hospital_nonmembers

    notes = generate_notes(DEMO_SIZES[size].patients, SEED)
    with tempfile.TemporaryDirectory() as folder:
        split_and_write_roles(notes, DEMO_SPLIT, SEED, Path(folder))
        other = pd.read_parquet(write_other_hospital_nonmembers(notes, SEED, Path(folder)))
    members, rows = notes[notes["role"] == MEMBER], []
    for name, nonmembers in (("same hospital", notes[notes["role"] == NONMEMBER]), ("other hospital", other)):
        audited = pd.concat([members.assign(member=True), nonmembers.assign(member=False)], ignore_index=True)
        labels = audited["member"].to_numpy()
        every = every_blind_score(audited["text"].tolist(), labels, audited["group_id"].to_numpy(), seed=SEED)
        cells = {"units (notes / patients)": f"{len(labels)} / {audited['group_id'].nunique()}"}
        for classifier, scores in every.items():
            patients = group_means(scores, audited["group_id"])
            patient_labels = audited.groupby("group_id")["member"].first().loc[patients.index].to_numpy()
            for unit, (y, s) in (("note", (labels, scores)), ("patient", (patient_labels, patients.to_numpy()))):
                area = roc_auc_score(y, s)
                low, high = auc_interval(y, s, area, seed=SEED)
                cells.setdefault(f"AUC per {unit} [95%]", []).append(
                    f"{classifier.replace('_', ' ')} {area:.3f} [{low:.3f}, {high:.3f}]")
        cells = {column: value if isinstance(value, str) else "; ".join(value) for column, value in cells.items()}
        rows.append({"demo size": size, "non-members": name, **cells,
                     "words that say member": ", ".join(member_features(audited["text"].tolist(), labels, 3))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    notes = generate_notes(max(sizes) // 10, SEED)  # a patient writes about 17 notes: enough for the largest size
    while len(notes) < max(sizes):
        notes = generate_notes(2 * notes["group_id"].nunique(), SEED)
    rows = [run(notes, size, "notes") for size in sizes] + [run(joined(notes), max(sizes), "longer texts")]
    text = (f"{machine_line()} Generated notes, and longer texts of five consecutive notes joined; patients split "
            f"into members and non-members by a coin, seed {SEED}; peak memory is the process's, cumulative over the "
            f"rows.\n\n" + markdown_table(rows)
            + "\n\nOn the MLM demo's data, members against each non-member set (units in brackets):\n\n"
            + markdown_table([row for size in ("quick", "full") for row in demo_rows(size)]))
    publish(text, args.out, "blind-baseline")


if __name__ == "__main__":
    main()
