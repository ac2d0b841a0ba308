"""Trained model folders: a model saved whole with its tokenizer and training summary, the checkpoints saved beside it,
and the reuse of a model already trained with the recipe asked for, so that a rerun resumes after it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from lmaudit.atomic import staged
from lmaudit.errors import InputError
from lmaudit.models.recipe import TrainingRecipe
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.models.training_file import read_training_summary, write_training_summary

if TYPE_CHECKING:
    from lmaudit.models.dp import PrivateTraining

log = logging.getLogger(__name__)


def checkpoint_folder(out_dir: str | Path, epoch: int) -> Path:
    """Where the checkpoint after `epoch` of the model trained into `out_dir` is saved: `<out_dir>-epoch-<epoch>`."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f"{out_dir.name}-epoch-{epoch}")


def missing_checkpoints(out_dir: str | Path, epochs: Sequence[int], run_length: int) -> list[int]:
    """The epochs among `epochs` whose checkpoint, from a run of `run_length` epochs, is not beside `out_dir`."""
    return [epoch for epoch in epochs
            if getattr(read_training_summary(checkpoint_folder(out_dir, epoch)), "checkpoint_of", None) != run_length]


def save_model_folder(model, tokenizer, summary, out: Path) -> None:
    """Save the model, its tokenizer and its training summary (a dataclass) all or nothing: a killed run never
    leaves a half-saved model."""
    if out.exists() and any(out.iterdir()) and not (out / SUMMARY_FILE).exists():
        raise InputError(f"{out}: exists and is not a model folder written by lmaudit; choose another --out")
    with staged(out) as (staging,):
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        write_training_summary(staging, asdict(summary))


def save_checkpoint(model, private: PrivateTraining | None, tokenizer, summary, out: Path) -> None:
    """Save the model as it is in the middle of training (a DP-SGD model with the tensors hidden from Opacus)."""
    with private.saveable() if private else nullcontext(model) as saved:
        save_model_folder(saved, tokenizer, summary, out)


def agrees(recorded, wanted) -> bool:
    """Whether a recorded value (a training record's, or a field's) holds `wanted`: equal, or, for a dict, every entry
    of `wanted` agreeing (nested)."""
    if isinstance(recorded, BaseModel):
        recorded = recorded.model_dump()
    if isinstance(wanted, dict):
        return isinstance(recorded, dict) and all(agrees(recorded.get(key), value) for key, value in wanted.items())
    return recorded == wanted


def refuse_another_model(out: str | Path, kind: str, recipe: TrainingRecipe, n_texts: int, overwrite: bool = False) -> None:
    """Refuse to train into a folder that holds another run's results: an audit's report, or a model trained otherwise
    than with `recipe` on `n_texts` texts (InputError naming the first setting that differs), unless `overwrite`. The
    same training again goes on (and trains again)."""
    out = Path(out)
    if overwrite or not out.is_dir():
        return
    if (out / "report.json").is_file():
        raise InputError(f"{out}: holds an audit's report, not a model; choose another --out")
    summary = read_training_summary(out)
    if summary is None:  # a folder of other files: save_model_folder refuses it
        return
    differing = [key for key, value in recipe.recorded(kind, n_texts).items()
                 if not agrees(getattr(summary, key), value)]
    if differing:
        raise InputError(f"{out}: holds a model trained otherwise (its {differing[0]} differs); choose another --out, or "
                         "give --overwrite to replace it")


def train_unless_done(folder: str | Path, kind: str, recipe: TrainingRecipe, n_texts: int,
                      train: Callable[[], object]) -> None:
    """Call `train()` unless `folder` holds a `kind` model whose training summary records `recipe` on `n_texts` texts
    (`TrainingRecipe.recorded`) and every checkpoint the recipe asks for is beside it."""
    # A classifier saves a checkpoint at any epoch it runs; a language model's last epoch is the model itself.
    asked = [epoch for epoch in recipe.checkpoints if kind == "classifier" or epoch < recipe.epochs]
    missing = missing_checkpoints(folder, asked, recipe.epochs)
    done = read_training_summary(folder)
    if missing:  # trained again to save them (the model itself comes out the same: saving draws no random numbers)
        log.info("training %s again: its checkpoints after epochs %s are missing", folder, ", ".join(map(str, missing)))
        train()
    elif done is None or not agrees(done, recipe.recorded(kind, n_texts)):
        train()
    else:
        log.info("reusing %s: already trained the same way", folder)
