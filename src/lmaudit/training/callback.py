"""`CanaryCallback`: a transformers `TrainerCallback` (Trainer, and TRL's SFTTrainer, with or without PEFT) that checks
before the first step that planted new-token canaries will be learned, checks after the first epoch that their rows moved, and
records what was planted beside every saved checkpoint and the final model, as `lmaudit train --canaries` does, so that
`lmaudit canaries audit` works on the saved model and refuses another canary folder."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from transformers import TrainerCallback

from lmaudit.canaries.make import record_planted
from lmaudit.errors import InputError
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.training.planting import canary_texts, new_token_folder
from lmaudit.training.preflight import (
    Finding,
    frozen_new_rows,
    lost_canaries,
    unchanged_rows,
    unlabelled_secrets,
    untied_weights,
)

log = logging.getLogger(__name__)


class CanaryCheckFailed(InputError):
    """A check found that the planted canaries would not be trained on: the run stops before it wastes its time."""


def stop_on(findings: list[Finding | None]) -> None:
    """Log the warnings; raise CanaryCheckFailed with the first fatal finding's cause and fix."""
    for finding in (f for f in findings if f is not None):
        if finding.fatal:
            raise CanaryCheckFailed(f"canary check '{finding.check}': {finding.message}")
        log.warning("canary check '%s': %s", finding.check, finding.message)


class CanaryCallback(TrainerCallback):
    """Checks and records the new-token canaries of `folder` (planted with `canary_texts`, their tokens reserved with
    `add_canary_tokens`, whose ids are `secret_ids`) in a transformers training run."""

    def __init__(self, folder: str | Path, secret_ids: list[int]) -> None:
        self.folder = new_token_folder(folder)
        self.secret_ids = torch.tensor(secret_ids)
        self.planted = len(canary_texts(folder))
        self.rows_before: torch.Tensor | None = None
        self.steps_per_epoch = 1

    def canary_batch(self, dataloader) -> tuple[dict[str, torch.Tensor] | None, int]:
        """The training rows that hold a secret token, collated as the trainer collates them, and their count."""
        secret = set(self.secret_ids.tolist())
        rows = [row for row in dataloader.dataset if secret & set(list(row["input_ids"]))]
        return (dataloader.collate_fn(rows) if rows else None), len(rows)

    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
        """Before the first step: every secret labelled, no canary row lost, the new rows trainable, weights tied."""
        batch, rows = self.canary_batch(train_dataloader)
        stop_on([lost_canaries(rows, self.planted), frozen_new_rows(model), untied_weights(model),
                 unlabelled_secrets(batch, self.secret_ids) if batch is not None else None])
        # The output rows: a secret learned on its own labels is predicted through them (its input rows may see no
        # gradient: a masked LM's secret is masked, a causal LM's last secret token predicts no label).
        self.rows_before = model.get_output_embeddings().weight[self.secret_ids].detach().cpu().clone()
        self.steps_per_epoch = max(1, len(train_dataloader) // max(1, args.gradient_accumulation_steps))
        log.info("canary checks passed: %d new-token canaries planted, every secret labelled, their rows trainable",
                 self.planted)

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        """After the first whole epoch (every canary row has been in a batch): the new tokens' rows moved."""
        if self.rows_before is not None and state.global_step >= self.steps_per_epoch:
            weights = model.get_output_embeddings().weight
            stop_on([unchanged_rows(self.rows_before, weights[self.secret_ids.to(weights.device)])])
            self.rows_before = None

    def on_save(self, args, state, control, **kwargs):
        """Beside each checkpoint: what was planted."""
        self.record(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    def on_train_end(self, args, state, control, **kwargs):
        """Beside the run's output folder (where `trainer.save_model()` saves by default): what was planted."""
        self.record(Path(args.output_dir))

    def record(self, model_folder: str | Path) -> None:
        """Write into `model_folder`'s lmaudit_training.json the canaries planted (design, count, the folder's and the
        key's fingerprints), creating the file for a model lmaudit did not train."""
        model_folder = Path(model_folder)
        model_folder.mkdir(parents=True, exist_ok=True)
        summary = model_folder / SUMMARY_FILE
        if not summary.is_file():
            summary.write_text(json.dumps({"trained_by": "a user's script, with lmaudit.training.CanaryCallback"}),
                               encoding="utf-8")
        record_planted(model_folder, self.folder)
