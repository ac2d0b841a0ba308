"""Reproduce Table 2 (sample level) of Mireshghallah et al. 2022 from the authors' released scores.

Writes lmaudit scores files from the released per-sample losses, runs `lmaudit attack` on them,
replicates the released metric script (including its unpaired member subsampling) on the same
files, and prints the three side by side with the published numbers.

    python scripts/reproduce_released.py --released tests/fixtures/mlm-mia-released-scores --out runs/released
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

# Table 2 of the paper, sample level, long sequences (precision and recall in %).
PUBLISHED = {
    "mimic": {"loss_auc": 0.662, "ratio_auc": 0.900, "loss_mu_precision": 61.5, "loss_pop_precision": 61.2,
              "ratio_pop_precision": 88.9, "loss_mu_recall": 55.7, "loss_pop_recall": 15.6, "ratio_pop_recall": 79.2},
    "i2b2": {"loss_auc": 0.812, "ratio_auc": 0.881, "loss_mu_precision": 77.6, "loss_pop_precision": 79.6,
             "ratio_pop_precision": 87.5, "loss_mu_recall": 55.8, "loss_pop_recall": 39.0, "ratio_pop_recall": 69.9},
}
# Which released file plays which role (README of the released scores).
SETS = {
    "mimic": {"member": "samples_sub_id_long", "nonmember": "out_samples_sub_id_long",
              "population": "i2b2_samples_sub_id_long_2", "calibration_member": "samples_sub_id_long_2"},
    "i2b2": {"member": "samples_sub_id_long", "nonmember": "i2b2_samples_sub_id_long",
             "population": "i2b2_samples_sub_id_long_2", "calibration_member": "samples_sub_id_long_2"},
}


def load_pair(folder: Path, stem: str) -> tuple[np.ndarray, np.ndarray]:
    """Target and reference losses of one released set; line i of both files is one sample."""
    target = np.loadtxt(folder / f"{stem}.target.txt")
    reference = np.loadtxt(folder / f"{stem}.reference.txt")
    assert len(target) == len(reference), stem
    return target, reference


def scores_frame(folder: Path, setting: str) -> pd.DataFrame:
    """One lmaudit scores table (sample_id, role, target_loss, reference_loss) for a setting."""
    parts = []
    for role, stem in SETS[setting].items():
        target, reference = load_pair(folder, stem)
        parts.append(pd.DataFrame({
            "sample_id": [f"{stem}:{i + 1}" for i in range(len(target))],
            "role": role, "target_loss": target, "reference_loss": reference,
        }))
    return pd.concat(parts, ignore_index=True)


def released_metrics(folder: Path, setting: str, calibrate_on: str = "population", repeats: int = 10, seed: int = 2) -> dict:
    """The released get_sample_metrics.py, replicated: members subsampled to the non-member count
    with *independent* draws for target and reference losses, thresholds by sorted index.

    calibrate_on="nonmember" reproduces the script run without population files, when it takes
    the 10%-FPR thresholds from the audited non-members themselves.
    """
    roles = {role: load_pair(folder, stem) for role, stem in SETS[setting].items()}
    (member_t, member_r), (out_t, out_r) = roles["member"], roles["nonmember"]
    population_t, population_r = roles[calibrate_on]
    mu = roles["calibration_member"][0].mean()
    ratio_population = sorted(population_t - population_r, reverse=True)
    ratio_threshold = ratio_population[int(len(ratio_population) * 0.9) + 1]
    loss_population = sorted(population_t, reverse=True)
    loss_threshold = loss_population[int(len(loss_population) * 0.9) + 1]
    random.seed(seed)
    totals: dict[str, float] = {}
    for _ in range(repeats):
        member_target = np.array(random.sample(list(member_t), len(out_t)))
        member_reference = np.array(random.sample(list(member_r), len(out_t)))  # the unpaired draw
        ratio_in, ratio_out = member_target - member_reference, out_t - out_r
        labels = np.r_[np.ones(len(out_t)), np.zeros(len(out_t))]
        values = {
            "loss_auc": roc_auc_score(labels, -np.r_[member_target, out_t]),
            "ratio_auc": roc_auc_score(labels, -np.r_[ratio_in, ratio_out]),
        }
        for name, inside, outside, threshold in (
            ("loss_mu", member_target, out_t, mu), ("loss_pop", member_target, out_t, loss_threshold),
            ("ratio_pop", ratio_in, ratio_out, ratio_threshold),
        ):
            tp, fp = (inside < threshold).sum(), (outside < threshold).sum()
            values[f"{name}_precision"] = 100 * tp / (tp + fp)
            values[f"{name}_recall"] = 100 * tp / len(inside)
        for key, value in values.items():
            totals[key] = totals.get(key, 0.0) + value / repeats
    return totals


def lmaudit_metrics(report: dict) -> tuple[dict, dict]:
    """Table 2's cells from an lmaudit report: on all data, and balanced (mean of 10 subsets)."""
    full, balanced = {}, {}
    for result in report["results"]:
        if result["level"] != "sample" or result["slice"] != "all":
            continue
        name = "loss" if result["attack"] == "loss" else "ratio"
        full[f"{name}_auc"] = result["auc"]
        balanced[f"{name}_auc"] = result["balanced"]["auc_mean"]
        for threshold, summary in zip(result["thresholds"], result["balanced"]["thresholds"], strict=True):
            rule = {"mean_member_loss": "mu", "population": "pop"}[threshold["rule"]]
            if threshold["rule"] == "population" and threshold["alpha"] != 0.1:
                continue
            full[f"{name}_{rule}_precision"] = 100 * threshold["precision"]
            full[f"{name}_{rule}_recall"] = 100 * threshold["recall"]
            balanced[f"{name}_{rule}_precision"] = 100 * summary["precision_mean"]
            balanced[f"{name}_{rule}_recall"] = 100 * summary["recall_mean"]
    return full, balanced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--released", type=Path, default=Path("tests/fixtures/mlm-mia-released-scores"))
    parser.add_argument("--out", type=Path, default=Path("runs/released"))
    args = parser.parse_args()

    for setting in SETS:
        scores = args.out / f"long-{setting}.csv"
        scores.parent.mkdir(parents=True, exist_ok=True)
        scores_frame(args.released / "sample-loss", setting).to_csv(scores, index=False)
        subprocess.run([sys.executable, "-m", "lmaudit.cli", "attack", "--scores", str(scores),
                        "--out", str(args.out / setting)], check=True, stdout=subprocess.DEVNULL)
        report = json.loads((args.out / setting / "report.json").read_text())
        full, balanced = lmaudit_metrics(report)
        folder = args.released / "sample-loss"
        released = released_metrics(folder, setting)
        self_calibrated = released_metrics(folder, setting, calibrate_on="nonmember")
        print(f"\n{setting.upper()} non-members\n| cell | published | released script, population file | "
              "released script, thresholds from audited non-members | lmaudit balanced (paired) | lmaudit all data |")
        print("|---|---|---|---|---|---|")
        for key, published in PUBLISHED[setting].items():
            print(f"| {key} | {published} | {released[key]:.3f} | {self_calibrated[key]:.3f} | {balanced[key]:.3f} | {full[key]:.3f} |")


if __name__ == "__main__":
    main()
