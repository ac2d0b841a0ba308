"""What the language-model studies share: the demo's generated notes split into roles by patient, models trained with
the demo's recipe unless already trained (all on the first reference's tokenizer, so that masks pair), one signal store
for every cell, and the audit of a cell."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from lmaudit.config import AuditConfig
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER, NONMEMBER, POPULATION
from lmaudit.models.source import ModelSource
from lmaudit.report.document import ReportDocument, load_report
from lmaudit.signals.store import default_cache_dir
from lmaudit.studies.runner import Cell
from lmaudit.studies.setup import (
    DEMO_SIZES,
    REFERENCE_TRAIN,
    DemoSize,
    demo_recipe,
    train_language_model_unless_done,
    write_note_roles,
)

TARGET_ROLES = (MEMBER, CALIBRATION_MEMBER)  # the target trains on both; calibration members fit the learned attacks


@dataclass(frozen=True)
class NotesStudy:
    """The demo's notes in `out`/data, models in `out`/models, one store in `out`/cache."""

    out: Path
    size: DemoSize
    seed: int
    notes: pd.DataFrame
    files: dict[str, Path]
    progress: bool = False
    nonmembers: str | dict[str, str] | None = None  # the audits' non-members: files[NONMEMBER] unless given (sets)
    reserved_tokens: tuple[str, ...] = ()  # in every model's vocabulary (the DP study's new-token canaries)
    length_bounds: tuple[int, ...] = ()  # the audits' length slices at these token counts (default: length tertiles)

    def texts(self, *roles: str) -> list[str]:
        """The texts of the notes in `roles`."""
        return self.notes.loc[self.notes["role"].isin(roles), "text"].tolist()

    @property
    def tokenizer_source(self) -> Path:
        """The first reference, whose tokenizer (trained on its own patients' notes) every model of the study uses."""
        return self.out / "models" / "reference"

    def train(self, kind: str, name: str, texts: list[str], seed: int | None = None, groups: list | None = None,
              **changes) -> Path:
        """out/models/NAME: an LM of `kind` trained on `texts` with the demo's recipe (`changes`, TrainingRecipe fields,
        override it; `groups`: each text's patient, for DP-SGD's cap) unless already trained the same way; on the first
        reference's tokenizer unless `tokenizer_dir` is among the changes, or fine-tuned from `init_from` (a model of
        the study, so on that tokenizer too)."""
        folder = self.out / "models" / name
        recipe = replace(demo_recipe(self.size.epochs), seed=self.seed if seed is None else seed,
                         reserved_tokens=self.reserved_tokens, **changes)
        if folder != self.tokenizer_source and recipe.init_from is None and recipe.tokenizer_dir is None:
            self.reference()
            recipe = replace(recipe, tokenizer_dir=self.tokenizer_source)
        train_language_model_unless_done(kind, texts, folder, recipe, name, self.progress, groups)
        return folder

    def reference(self, kind: str = "mlm") -> Path:
        """The in-domain reference: trained like the target on the reference patients' notes, with its own seed."""
        folder = self.tokenizer_source
        train_language_model_unless_done(kind, self.texts(REFERENCE_TRAIN), folder,
                                         replace(demo_recipe(self.size.epochs), seed=self.seed + 1,
                                                 reserved_tokens=self.reserved_tokens), "reference", self.progress)
        return folder

    def demo_cell(self) -> Cell:
        """The one cell of a study that analyses the demo's audit: the target trained on the target roles, audited
        against the in-domain reference."""
        def prepare(folder: Path) -> AuditConfig:
            target = self.train("mlm", "target", self.texts(*TARGET_ROLES))
            return self.audit(folder, target, [self.reference()])

        return Cell("target", {"target": "demo"}, prepare)

    def cell_outputs(self, record: dict) -> tuple[ReportDocument, pd.DataFrame]:
        """A finished cell's report (report.json, typed) and scores.parquet table."""
        folder = self.out / "cells" / record["cell"]
        return load_report(folder), pd.read_parquet(folder / "scores.parquet")

    def audit(self, folder: Path, target: Path, references: list[Path], signal: str = "mlm_energy",
              files: dict[str, Path] | None = None) -> AuditConfig:
        """The audit of one cell into `folder`: the target against the references on the study's roles (or `files`),
        sharing the study's signal store."""
        given = files or {}
        files = {**self.files, **given}
        nonmembers = self.nonmembers if self.nonmembers is not None and NONMEMBER not in given else str(files[NONMEMBER])
        return AuditConfig(
            target=str(target), reference=[str(r) for r in references], members=str(files[MEMBER]),
            nonmembers=nonmembers, population=str(files[POPULATION]),
            calibration_members=str(files[CALIBRATION_MEMBER]) if CALIBRATION_MEMBER in files else None, out=str(folder),
            cache_dir=str(default_cache_dir(self.out)),
            signal={"signal": signal, "k": self.size.k, "seed": self.seed},
            evaluation={"bootstrap": self.size.bootstrap, "seed": self.seed,
                        **({"length_bounds": self.length_bounds} if self.length_bounds else {})},
        )


def held_out_loss(model_dir: Path | ModelSource, signal: str, sample_ids: list[str], texts: list[str], k: int, seed: int,
                  cache: Path) -> float:
    """The model's mean loss per token (nats) on held-out texts: `signal` (mlm_energy: masked tokens, k masks each;
    clm_loss: every next token) averaged per text, then over the texts."""
    from lmaudit.signals.compute import Scoring, model_signal
    from lmaudit.signals.settings import SignalSettings

    settings = SignalSettings(signal=signal, k=k, normalize="mean", seed=seed)
    return float(model_signal(model_dir, sample_ids, texts, settings, Scoring(cache))["value"].mean())


def notes_study(out: str | Path, size: str, seed: int, progress: bool = False,
                reserved_tokens: tuple[str, ...] = (), length_bounds: tuple[int, ...] = ()) -> NotesStudy:
    """Generate the demo's notes for `size` and write their roles (by patient, seeded) to out/data; every model of the
    study reserves `reserved_tokens` in its vocabulary; every audit slices by length at `length_bounds` if given."""
    out = Path(out)
    notes, files = write_note_roles(size, seed, out / "data")
    return NotesStudy(out, DEMO_SIZES[size], seed, notes, files, progress, reserved_tokens=reserved_tokens,
                      length_bounds=length_bounds)
