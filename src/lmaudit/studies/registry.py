"""Every named study: `lmaudit study NAME` runs one. A new study is one module of lmaudit.studies with a
`plan(out, size, seed, progress)` that returns a StudyPlan, and one entry here. Modules are imported when their study
runs, so the command line lists the studies without loading the training stack."""

from __future__ import annotations

import fnmatch
import importlib
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from lmaudit.errors import InputError
from lmaudit.locks import LOCK_NAME, output_lock

if TYPE_CHECKING:  # the runner loads when a study runs
    from lmaudit.studies.runner import StudyPlan


# The sizes every study (and the dp sweep) plans for: studies/setup.py DEMO_SIZES's, but for the demo's own 'quick' one.
STUDY_SIZES = ("smoke", "full")


@dataclass(frozen=True)
class StudySpec:
    """A named study: what it shows, the module (in lmaudit.studies) whose `plan` plans its cells, and the keyword
    arguments that choose this study among the module's (one module can plan several studies)."""

    name: str
    summary: str
    module: str
    options: dict = field(default_factory=dict)

    @property
    def plan(self) -> Callable:
        """The module's plan(out, size, seed, progress, **options) -> StudyPlan, with the study's options."""
        return partial(importlib.import_module(f"lmaudit.studies.{self.module}").plan, **self.options)


def _ablation(name: str, summary: str) -> StudySpec:
    return StudySpec(name, summary, "classifier_ablations", {"ablation": name})


STUDIES = [
    StudySpec("model-size", "target width x training epochs (Mireshghallah et al., Table 4)", "model_size"),
    StudySpec("reference-choice", "same-hospital, other-source and non-clinical references (Table 5)",
              "reference_choice"),
    StudySpec("name-insertion", "names prepended to the members' training notes, audited with and without them "
              "(Table 6)", "name_insertion"),
    StudySpec("epochs", "leakage after each training epoch of a masked LM, a causal LM and a classifier, and its "
              "maximum (Jagannatha et al., Figures 1-3)", "epochs"),
    StudySpec("dp", "leakage, epsilon and utility against the DP-SGD noise for a masked LM, a causal LM and a "
              "classifier, maximum over epochs, downstream utility of the masked LMs (Jagannatha et al., Tables 2-5); "
              "at full size the one-hour grid: fine-tuned, the language models for 3 epochs, at 4 noise levels", "dp"),
    StudySpec("dp-paper", "the dp study on the paper's whole grid: 7 noise levels and non-DP, from scratch and "
              "fine-tuned (about 10 hours at full size on 2 CPU cores)", "dp", {"grid": "paper"}),
    StudySpec("finetune", "a causal base trained on public notes or on user posts, fine-tuned on the members in full and "
              "with LoRA, every attack on fine-tunes against the base (the fine-tuning suite as a study)", "finetune"),
    StudySpec("rare-disease", "patient-level leakage per bucket of disease-profile probability (Jagannatha et al., "
              "Figures 22-24)", "rare_disease"),
    StudySpec("memorisation-predictor", "which member notes leak: a logistic regression on their digits, length, "
              "punctuation and rare tokens (Table 7)", "memorisation"),
    _ablation("samples-per-user", "a classifier's leakage against its users' number of posts, 3 runs each "
              "(Shejwalkar et al., Figure 2a)"),
    _ablation("users", "a classifier's leakage against its number of users, 3 runs each (Figure 2b)"),
    _ablation("classes", "a classifier's leakage against its number of labels, 3 runs each (Figure 2c)"),
    _ablation("tokenizer", "a classifier's leakage against its tokenizer: WordPiece or word-level, vocabulary size; "
              "what the tokenizer alone leaks, 3 runs each (Figure 4)"),
    _ablation("max-length", "a classifier's leakage against the tokens it reads per post, 3 runs each (Figure 5)"),
    _ablation("architecture", "a classifier's leakage as an LSTM, a BERT from scratch and a fine-tuned BERT, 3 runs "
              "each (Figure 3)"),
]


def study_spec(name: str) -> StudySpec:
    """The study called `name`, or InputError listing the studies."""
    for spec in STUDIES:
        if spec.name == name:
            return spec
    raise InputError(f"unknown study '{name}'; use one of {', '.join(s.name for s in STUDIES)} or --config FILE")


def only_cells(plan: StudyPlan, patterns: Sequence[str]) -> StudyPlan:
    """The plan with only the cells whose names match one of the shell-style `patterns` (all of them when none are
    given), or InputError naming the study's cells when none matches."""
    if not patterns:
        return plan
    cells = [cell for cell in plan.cells if any(fnmatch.fnmatchcase(cell.name, pattern) for pattern in patterns)]
    if not cells:
        names = ", ".join(cell.name for cell in plan.cells)
        raise InputError(f"--cells {' '.join(patterns)}: no cell of the study {plan.study} matches; its cells are {names}")
    return replace(plan, cells=cells)


def run_planned(plan: Callable[[Path], StudyPlan], out: str | Path, progress: bool, cells: Sequence[str],
                cell_figures: bool = False) -> dict:
    """Plan the study into `out` (`plan(out)` writes its data) and run it, or only its `cells` (patterns), each cell's
    page with figures if `cell_figures`. Patterns that match no cell are refused before anything runs, and a folder this
    call created is left as it was: absent."""
    from lmaudit.studies.runner import run_study

    out = Path(out)
    fresh = not out.exists()
    with output_lock(out):
        planned = plan(out)
        try:
            chosen = only_cells(planned, cells)
        except InputError:
            if fresh:  # only the study's data is in it yet, written by this call
                for child in out.iterdir():
                    if child.is_dir():
                        shutil.rmtree(child)
                    elif child.name != LOCK_NAME:
                        child.unlink()
            raise
        return run_study(chosen, out, progress, cell_figures)


def run_named_study(name: str, out: str | Path, size: str = "smoke", seed: int = 0, progress: bool = False,
                    cells: Sequence[str] = (), cell_figures: bool = False) -> dict:
    """Plan (writing the study's data into `out`) and run the study called `name`, or only its `cells` (patterns)."""
    spec = study_spec(name)
    return run_planned(lambda folder: spec.plan(folder, size, seed, progress), out, progress, cells, cell_figures)


def run_config_study(path: str | Path, out: str | Path, progress: bool = False, cells: Sequence[str] = (),
                     cell_figures: bool = False) -> dict:
    """Run the grid study a YAML file describes (studies/grid.py), or only its `cells` (patterns)."""
    from lmaudit.studies.grid import load_grid_config, plan_from_config

    config = load_grid_config(path)
    return run_planned(lambda folder: plan_from_config(config, folder, progress), out, progress, cells, cell_figures)
