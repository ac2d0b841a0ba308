"""Short and long samples (Mireshghallah et al. 2022, Section 4.2 and Tables 3, 9 and 10): the paper reports its
attacks on samples of more than 20 tokens and, apart, on those of 10 to 20, each at the population thresholds for 10%
and 1% false positives. A study's audits slice at PAPER_LENGTH_BOUNDS; this analysis tabulates those slices."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

PAPER_LENGTH_BOUNDS = (21,)  # short: at most 20 tokens; long: more than 20 (the paper: 10-20 and 20-60)
SPLIT_ATTACKS = ("loss", "likelihood_ratio")
ANALYSIS_NAME = "short and long samples (Mireshghallah et al. Tables 9-10)"
SLICE_PREFIX = "length:"


def length_split_row(result: dict) -> dict:
    """AUC, and precision and recall at the population's 10% and 1% FPR thresholds, of one sliced result."""
    population = {t["alpha"]: t for t in result["thresholds"] if t["rule"] == "population"}
    row = {"samples": result["n_members"] + result["n_nonmembers"], "AUC": result["auc"]}
    for alpha, label in ((0.1, "10%"), (0.01, "1%")):
        threshold = population.get(alpha)
        row[f"precision at pop. {label}"] = threshold["precision"] if threshold else None
        row[f"recall at pop. {label}"] = threshold["recall"] if threshold else None
    return row


def short_and_long(out: Path) -> Callable[[list[dict]], dict]:
    """A StudyPlan's `analyse`: per cell (its report in out/cells/<cell>), attack and length slice, length_split_row."""

    def analyse(records: list[dict]) -> dict:
        rows = {}
        for record in records:
            report = json.loads((Path(out) / "cells" / record["cell"] / "report.json").read_text(encoding="utf-8"))
            if tuple(report["config"]["evaluation"]["length_bounds"]) != PAPER_LENGTH_BOUNDS:
                # A cell kept from a run before the study sliced at the paper's bounds: its slices are other ones.
                return {ANALYSIS_NAME: f"cell {record['cell']} was audited without the paper's length split; run the "
                                       "study into a new folder"}
            for result in report["results"]:
                if (result["level"] == "sample" and result["attack"] in SPLIT_ATTACKS
                        and result["slice"].startswith(SLICE_PREFIX)):
                    tokens = result["slice"].removeprefix(SLICE_PREFIX)
                    rows[f"{record['cell']}: {result['attack']}, {tokens} tokens"] = length_split_row(result)
        return {ANALYSIS_NAME: rows}

    return analyse
