"""Model size x training length (Mireshghallah et al. 2022, Tables 4, 9 and 10): targets of two widths, each trained for a
third of the demo's epochs and for all of them, audited against the same in-domain reference: a preset grid, with the
paper's short and long samples analysed apart."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from lmaudit.studies.grid import GridConfig, plan_from_config
from lmaudit.studies.length_split import PAPER_LENGTH_BOUNDS, short_and_long
from lmaudit.studies.runner import StudyPlan
from lmaudit.studies.setup import DEMO_SIZES

SIZES = ("tiny", "mini")  # 2 layers of width 64 and 128 (models/train.py SIZES)


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """One cell per (model size, epochs)."""
    epochs = DEMO_SIZES[size].epochs
    grid = GridConfig(study="model-size", size=size, seed=seed, x="epochs", series="model_size",
                      grid={"model_size": list(SIZES), "epochs": [max(1, epochs // 3), epochs]})
    return dataclasses.replace(
        plan_from_config(grid, out, progress, length_bounds=PAPER_LENGTH_BOUNDS), analyse=short_and_long(out),
        description="Leakage of targets of two widths (2 layers of 64 and of 128), each trained for a third of the "
                    f"epochs and for all {epochs}, on the same members, audited against the same in-domain reference.",
        paper="larger and longer-trained targets leak slightly more (Table 4: the likelihood ratio's AUC 0.900 on "
              "Base, 0.905 on Large++; the loss attack's 0.662 and 0.700), the ratio far above the loss throughout.",
    )
