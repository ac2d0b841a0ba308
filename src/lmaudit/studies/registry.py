"""Every named study: `lmaudit study NAME` runs one. A new study is one module of lmaudit.studies with a
`plan(out, size, seed, progress)` that returns a StudyPlan, and one entry here. Modules are imported when their study
runs, so the command line lists the studies without loading the training stack."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.locks import output_lock


@dataclass(frozen=True)
class StudySpec:
    """A named study: what it shows, and the module (in lmaudit.studies) whose `plan` plans its cells."""

    name: str
    summary: str
    module: str

    @property
    def plan(self) -> Callable:
        """The module's plan(out, size, seed, progress) -> StudyPlan."""
        return importlib.import_module(f"lmaudit.studies.{self.module}").plan


STUDIES = [
    StudySpec("model-size", "target width x training epochs (Mireshghallah et al., Table 4)", "model_size"),
    StudySpec("reference-choice", "same-hospital, other-source and non-clinical references (Table 5)",
              "reference_choice"),
    StudySpec("name-insertion", "names prepended to the members' training notes, audited with and without them "
              "(Table 6)", "name_insertion"),
    StudySpec("epochs", "leakage after each training epoch of a masked LM, a causal LM and a classifier, and its "
              "maximum (Jagannatha et al., Figures 2-4)", "epochs"),
    StudySpec("dp", "leakage, epsilon and utility against the DP-SGD noise for a masked LM, a causal LM and a "
              "classifier, from scratch and fine-tuned, maximum over epochs (Jagannatha et al., Tables 2-3)", "dp"),
    StudySpec("rare-disease", "patient-level leakage per bucket of disease-profile probability (Jagannatha et al., "
              "Figures 22-24)", "rare_disease"),
    StudySpec("memorisation-predictor", "which member notes leak: a logistic regression on their digits, length, "
              "punctuation and rare tokens (Table 7)", "memorisation"),
]


def study_spec(name: str) -> StudySpec:
    """The study called `name`, or InputError listing the studies."""
    for spec in STUDIES:
        if spec.name == name:
            return spec
    raise InputError(f"unknown study '{name}'; use one of {', '.join(s.name for s in STUDIES)} or --config FILE")


def run_named_study(name: str, out: str | Path, size: str = "smoke", seed: int = 0, progress: bool = False) -> dict:
    """Plan (writing the study's data into `out`) and run the study called `name`."""
    from lmaudit.studies.runner import run_study

    spec = study_spec(name)
    with output_lock(out):
        return run_study(spec.plan(Path(out), size, seed, progress), out, progress)


def run_config_study(path: str | Path, out: str | Path, progress: bool = False) -> dict:
    """Run the grid study a YAML file describes (studies/grid.py)."""
    from lmaudit.studies.grid import load_grid_config, plan_from_config
    from lmaudit.studies.runner import run_study

    config = load_grid_config(path)
    with output_lock(out):
        return run_study(plan_from_config(config, Path(out), progress), out, progress)
