"""A study of your own from YAML (`lmaudit study --config study.yaml`): a grid of training and audit settings, one
target per combination, trained on the demo's notes or on your files and audited against one reference.

    study: lr-and-epochs          # a name for the study
    kind: mlm                     # mlm (MLM energy) or clm (mean next-token loss)
    size: smoke                   # the demo's data size and defaults (patients, epochs, masks, bootstrap)
    data:                         # optional: your files instead of the demo's notes (paths relative to this file)
      members: members.csv        #   the target trains on members and calibration_members
      calibration_members: cal.csv
      nonmembers: nonmembers.csv  #   or several sets: {mimic: a.csv, i2b2: b.csv}
      population: population.csv
      reference_train: public.csv #   the reference trains on these, never on an audited sample
    grid:                         # every combination is a cell; cells that differ in audit settings only
      epochs: [10, 30]            #   (k, normalize, signal) share their target
      learning_rate: [0.001, 0.003]
    x: epochs                     # the plot's x axis (default: the grid's first setting)
    series: learning_rate         # one line per value (default: the grid's second setting, if any)
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lmaudit.config import checked_nonmember_sets, read_yaml_settings, relative_to, validated
from lmaudit.data.corpus import load_corpus
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER, NONMEMBER, POPULATION
from lmaudit.signals.settings import SignalSettings
from lmaudit.studies.notes import TARGET_ROLES, NotesStudy, notes_study
from lmaudit.studies.runner import Cell, StudyPlan
from lmaudit.studies.setup import DEMO_SIZES, REFERENCE_TRAIN

# What a grid may vary: the target's training (train_language_model's settings, `model_size` its size) and the audit.
TRAINING_SETTINGS = ("model_size", "epochs", "learning_rate", "dropout", "batch_size")
# Masks per sample; the energy summed over the masked tokens or their mean; the signal itself (mlm_pll: each token
# masked alone, Mireshghallah et al.'s "normalised energy").
AUDIT_SETTINGS = ("k", "normalize", "signal")
GRID_SIGNALS = {"mlm": ("mlm_energy", "mlm_pll"), "clm": ("clm_loss",)}  # the first: the kind's signal by default
SIGNAL_OF_KIND = {kind: signals[0] for kind, signals in GRID_SIGNALS.items()}


class GridFiles(BaseModel):
    """Your corpus files, one per role, instead of the demo's notes."""

    model_config = ConfigDict(extra="forbid")
    members: str
    calibration_members: str | None = None
    nonmembers: str | dict[str, str] = Field(description="a file, or several sets of non-members by name (name: file), "
                                                         "each audited as `lmaudit audit` audits them")
    population: str
    reference_train: str = Field(description="texts the reference trains on: never an audited sample")

    @field_validator("nonmembers")
    @classmethod
    def _nonmember_set_names(cls, value: str | dict[str, str]) -> str | dict[str, str]:
        return checked_nonmember_sets(value)


class GridConfig(BaseModel):
    """A study file: a grid of settings over the demo's notes or your files."""

    model_config = ConfigDict(extra="forbid")
    study: str = Field("grid", pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    kind: Literal["mlm", "clm"] = "mlm"
    size: Literal["smoke", "full"] = "smoke"
    seed: int = 0
    data: GridFiles | None = None
    grid: dict[str, list[int | float | str]]
    x: str | None = None
    series: str | None = None

    @field_validator("grid")
    @classmethod
    def _known_settings(cls, grid: dict) -> dict:
        unknown = [key for key in grid if key not in TRAINING_SETTINGS + AUDIT_SETTINGS]
        if unknown:
            raise ValueError(f"cannot vary {', '.join(unknown)}; a grid varies {', '.join(TRAINING_SETTINGS + AUDIT_SETTINGS)}")
        if not grid or any(not values for values in grid.values()):
            raise ValueError("the grid needs at least one setting with at least one value")
        if not set(grid.get("normalize", [])) <= {"sum", "mean"}:
            raise ValueError("normalize takes sum (the energy summed over the masked tokens) or mean (their mean)")
        return grid

    @model_validator(mode="after")
    def _audit_settings_of_the_kind(self):
        unknown = [value for value in self.grid.get("signal", []) if value not in GRID_SIGNALS[self.kind]]
        if unknown:
            raise ValueError(f"signal {', '.join(map(str, unknown))}: a {self.kind} grid audits "
                             f"{' or '.join(GRID_SIGNALS[self.kind])}")
        if self.kind == "clm" and {"k", "normalize"} & set(self.grid):
            raise ValueError("k and normalize are a masked LM's (its masks and energy); a clm grid cannot vary them")
        if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in self.grid.get("k", [])):
            raise ValueError("k takes whole numbers of masks, 1 or more")
        return self

    @model_validator(mode="after")
    def _axes_in_grid(self):
        for name, axis in (("x", self.x), ("series", self.series)):
            if axis is not None and axis not in self.grid:
                raise ValueError(f"{name}: '{axis}' is not a setting of the grid")
        return self


def load_grid_config(path: str | Path) -> GridConfig:
    """Read a study YAML file (paths relative to its folder), or InputError naming the file and the field."""
    path = Path(path)
    values = read_yaml_settings(path, "study")
    if isinstance(values.get("data"), dict):
        values["data"] = {key: relative_to(path.parent, value) for key, value in values["data"].items()}
    return validated(values, str(path), GridConfig)


def _files_study(out: Path, files: GridFiles, size: str, seed: int, progress: bool,
                 length_bounds: tuple[int, ...] = ()) -> NotesStudy:
    """A NotesStudy over your files: each read and validated, the reference's texts as their own part."""
    from lmaudit.audit.corpus import load_audit_corpus
    from lmaudit.config import RoleFile

    roles = {MEMBER: files.members, POPULATION: files.population}
    if files.calibration_members:
        roles[CALIBRATION_MEMBER] = files.calibration_members
    sets = files.nonmembers if isinstance(files.nonmembers, dict) else {Path(files.nonmembers).stem: files.nonmembers}
    corpus = load_audit_corpus([RoleFile(role, path) for role, path in roles.items()] +
                               [RoleFile(NONMEMBER, path, name) for name, path in sets.items()])
    reference = load_corpus(files.reference_train).assign(role=REFERENCE_TRAIN)
    return NotesStudy(out, DEMO_SIZES[size], seed, pd.concat([corpus, reference], ignore_index=True),
                      {role: Path(path) for role, path in roles.items()}, progress, nonmembers=files.nonmembers,
                      length_bounds=length_bounds)


def plan_from_config(config: GridConfig, out: Path, progress: bool = False,
                     length_bounds: tuple[int, ...] = ()) -> StudyPlan:
    """One cell per combination of the grid's values, in the order the grid lists them; cells that differ only in
    audit settings share their target. `length_bounds`: see NotesStudy."""
    study = (_files_study(out, config.data, config.size, config.seed, progress, length_bounds) if config.data
             else notes_study(out, config.size, config.seed, progress, length_bounds=length_bounds))
    keys = list(config.grid)

    def cell(values: tuple) -> Cell:
        settings = dict(zip(keys, values, strict=True))
        name = "-".join(f"{key}={value}" for key, value in settings.items())
        training = {("size" if key == "model_size" else key): value for key, value in settings.items()
                    if key in TRAINING_SETTINGS}
        # In TRAINING_SETTINGS order, whatever the file's: grids that list the same settings name the same targets.
        target_name = "-".join(f"{key}={settings[key]}" for key in TRAINING_SETTINGS if key in settings)
        signal = {key: value for key, value in settings.items() if key in AUDIT_SETTINGS}

        def prepare(folder: Path):
            target = study.train(config.kind, f"target-{target_name or 'default'}", study.texts(*TARGET_ROLES),
                                 **training)
            reference = study.train(config.kind, "reference-" + config.kind, study.texts(REFERENCE_TRAIN),
                                    seed=config.seed + 1) if config.kind == "clm" else study.reference()
            audit = study.audit(folder, target, [reference], SIGNAL_OF_KIND[config.kind])
            return audit.model_copy(update={"signal": SignalSettings.model_validate(audit.signal.model_dump() | signal)})

        return Cell(name, settings, prepare)

    x = config.x or keys[0]
    return StudyPlan(
        study=config.study, description=config.description or f"A grid of {', '.join(keys)} ({config.kind}).",
        paper="(a study of your own)", cells=[cell(values) for values in itertools.product(*config.grid.values())],
        x=x, series=config.series or next((key for key in keys if key != x), None),
        setup={"kind": config.kind, "data": "your files" if config.data else f"the demo's notes ({config.size} size)",
               "seed": config.seed},
    )
