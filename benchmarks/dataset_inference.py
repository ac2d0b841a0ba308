"""Dataset inference (`metrics/dataset_inference.py`) on an audit's own output: the members against the verdict's
non-members (report.json's `dataset_inference`), and the null on the same scores: patients never trained on (the
population and the verdict's non-members, each halved at random by patient) split in two, many times over, with the
p-values' Kolmogorov-Smirnov distance from uniform and how many fall below 0.05; beside them the same null tested per
note (groups ignored), which a person's correlated notes make reject too often. The null's repeats reuse one pool of
patients, so they are not independent: with few patients the KS test reads that dependence, not a fault of the test.

    python benchmarks/dataset_inference.py --audit runs/demo [--repeats 100] [--out docs/performance.md]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from markdown_section import machine_line, markdown_table, publish
from scipy.stats import kstest

from lmaudit.metrics.dataset_inference import dataset_inference


def score_columns(scores: pd.DataFrame, features: list[str]) -> list[str]:
    """scores.parquet's columns of the report's features ('attack on signal' is score_attack or score_attack_signal)."""
    named = {f"score_{name.split(' on ')[0]}" for name in features} | {f"score_{name.replace(' on ', '_')}"
                                                                        for name in features}
    return [column for column in scores.columns if column in named]


def null_p_values(unseen: pd.DataFrame, columns: list[str], repeats: int, by_group: bool) -> np.ndarray:
    """p-values of `repeats` random halves of the unseen patients (each role halved apart)."""
    p_values = []
    for seed in range(repeats):
        rng = np.random.default_rng(seed)
        halves = [rng.permutation(part["group_id"].unique()) for _, part in unseen.groupby("role")]
        chosen = np.concatenate([half[: len(half) // 2] for half in halves])
        groups = unseen["group_id"].to_numpy() if by_group else None
        p_values.append(dataset_inference(unseen[columns], unseen["group_id"].isin(chosen).to_numpy(), groups,
                                          "patient", seed).p_value)
    return np.array(p_values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--audit", type=Path, required=True, help="An audit's output folder (report.json, scores.parquet).")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    report = json.loads((args.audit / "report.json").read_text())
    section = report["dataset_inference"]
    scores = pd.read_parquet(args.audit / "scores.parquet")
    first = scores["nonmember_set"].dropna().iloc[0] if "nonmember_set" in scores else None
    unseen = scores[(scores["role"] == "population") | ((scores["role"] == "nonmember") & (
        scores["nonmember_set"] == first if first is not None else True))]
    columns = [c for c in score_columns(scores, section["features"]) if unseen[c].notna().all()]
    started = time.perf_counter()
    grouped = null_p_values(unseen, columns, args.repeats, by_group=True)
    seconds = (time.perf_counter() - started) / args.repeats
    by_note = null_p_values(unseen, columns, args.repeats, by_group=False)
    rows = [{"test": "members against the verdict's non-members (report.json)", "p-value": f"{section['p_value']:.2g}",
             "units held out (suspect / validation)": f"{section['n_test']['suspect']} / {section['n_test']['validation']}",
             "fewest a side for p < 0.1 / 0.01": f"{section['minimum_needed']['p<0.1']} / "
                                                 f"{section['minimum_needed']['p<0.01']}"}]
    for name, p_values in (("null, by patient (lmaudit)", grouped), ("null, by note (groups ignored)", by_note)):
        rows.append({"test": f"{name}: {args.repeats} random halves of {unseen['group_id'].nunique()} unseen patients",
                     "p-value": f"{(p_values < 0.05).sum()} of {args.repeats} below 0.05; KS from uniform p = "
                                f"{kstest(p_values, 'uniform').pvalue:.2g}",
                     "units held out (suspect / validation)": "", "fewest a side for p < 0.1 / 0.01": ""})
    text = (f"{machine_line()} Audit folder `{args.audit}` ({report['data']['groups'].get('member')} member patients), "
            f"{len(columns)} attack scores as features; one test takes {seconds * 1000:.0f} ms.\n\n" + markdown_table(rows))
    publish(text, args.out, "dataset-inference")


if __name__ == "__main__":
    main()
