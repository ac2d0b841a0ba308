"""`CanaryCallback`: a transformers `TrainerCallback` (Trainer, and TRL's SFTTrainer, with or without PEFT) that checks
before the first step that planted canaries will be learned (every planted secret in the training rows, each of its
tokens labelled; for new-token canaries also their rows reserved and trainable, and moved after the first epoch), and
records what was planted beside every saved checkpoint and the final model, as `lmaudit train --canaries` does, so that
`lmaudit canaries audit` works on the saved model and refuses another canary folder."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback

from lmaudit.canaries.make import read_canary_set, record_planted, reserved_tokens
from lmaudit.errors import InputError
from lmaudit.training.planting import plantable_folder, planted_secrets
from lmaudit.training.preflight import (
    Finding,
    frozen_new_rows,
    lost_canaries,
    too_few_canaries,
    unchanged_rows,
    unlabelled_secrets,
    unlabelled_spans,
    unreserved_tokens,
    untied_weights,
    untrained_secret_rows,
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


def sharded(args, model: torch.nn.Module) -> bool:
    """Whether the weights are sharded over processes (FSDP, DeepSpeed ZeRO-3), so that this process cannot read the
    new tokens' rows."""
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled

    return bool(getattr(args, "fsdp", None)) or is_deepspeed_zero3_enabled() or \
        model.get_input_embeddings().weight.numel() == 0


def untie_config(model: torch.nn.Module) -> None:
    """Say in the model's configuration (and its text model's) that the input and output embeddings are apart, as they
    are: a save then keeps both, and no loader ties the trained output rows back to the input ones."""
    config = model.config
    for part in {id(c): c for c in (config, config.get_text_config())}.values():
        part.tie_word_embeddings = False


def placement(args, model: torch.nn.Module) -> dict[str, str]:
    """Where and in which precision the run trains, as lmaudit's own training summary says it: its device type and
    'bf16', 'fp16' or the weights' own dtype."""
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    precision = "bf16" if args.bf16 else "fp16" if args.fp16 else {"float32": "fp32", "bfloat16": "bf16"}.get(dtype, dtype)
    return {"device": args.device.type, "precision": precision}


def occurrences(rows: list, secrets: list[list[int]]) -> tuple[list[int], int]:
    """The training rows (indices) that hold one of the planted secrets' id sequences, and how many secrets they hold
    in all (each row counted once per distinct secret it holds)."""
    from lmaudit.canaries.span import id_bytes, sequence_starts

    wanted = [id_bytes(np.asarray(secret, np.int64)) for secret in dict.fromkeys(map(tuple, secrets))]
    holding, found = [], 0
    for index, ids in enumerate(rows):
        row = id_bytes(ids)
        held = sum(bool(sequence_starts(row, secret)) for secret in wanted)
        if held:
            holding.append(index)
            found += held
    return holding, found


def token_ids(rows) -> list:
    """Each training row's token ids (a `datasets.Dataset`'s column read at once, else row by row)."""
    if hasattr(rows, "column_names"):
        return rows["input_ids"]
    return [row["input_ids"] for row in rows]


class CanaryCallback(TrainerCallback):
    """Checks and records the canaries of `folder` (planted with `plant_canaries`; new-token ones with their tokens
    reserved by `add_canary_tokens`) in a transformers training run; the secrets' ids are read from the trainer's
    tokenizer."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = plantable_folder(folder)
        self.in_vocabulary = read_canary_set(folder).kind != "new_token"
        self.tokens = list(reserved_tokens(folder))
        self.count = read_canary_set(folder).count
        self.planted_tokens = sum(len(secret.split()) for secret in planted_secrets(folder))
        self.secret_ids = torch.tensor([], dtype=torch.long)
        self.rows_before: torch.Tensor | None = None
        self.steps_per_epoch = 1
        self.placement: dict[str, str] = {}

    def canary_batch(self, dataloader) -> tuple[dict[str, torch.Tensor] | None, int]:
        """The training rows that hold a secret token, collated as the trainer collates them, and the secret tokens
        the training rows hold in all."""
        rows = dataloader.dataset
        held = [np.isin(np.asarray(ids), self.secret_ids.numpy()).sum() for ids in token_ids(rows)]
        with_secrets = [rows[i] for i in np.flatnonzero(held)]
        return (dataloader.collate_fn(with_secrets) if with_secrets else None), int(sum(held))

    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, processing_class=None, **kwargs):
        """Before the first step: the canaries' tokens reserved, every secret labelled, none lost, the new rows
        trainable, and a configuration that no longer ties embeddings which train apart (the data checks alone, with a
        warning, where the weights are sharded)."""
        self.placement = placement(args, model)
        tokenizer = getattr(processing_class, "tokenizer", processing_class)  # a processor holds its tokenizer
        if self.in_vocabulary:
            self.check_in_vocabulary(tokenizer, train_dataloader)
            return
        ids = tokenizer.convert_tokens_to_ids(self.tokens)
        stop_on([unreserved_tokens(ids, tokenizer.unk_token_id, model.get_input_embeddings().weight.shape[0])])
        self.secret_ids = torch.tensor(ids)
        batch, found = self.canary_batch(train_dataloader)
        stop_on([lost_canaries(found, self.planted_tokens), too_few_canaries(self.count),
                 unlabelled_secrets(batch, self.secret_ids) if batch is not None else None])
        if sharded(args, model):
            log.warning("canary checks: the weights are sharded (FSDP or ZeRO-3), so the new tokens' rows cannot be "
                        "checked here; after training, run `lmaudit canaries audit --target %s --canaries %s`",
                        args.output_dir, self.folder)
            return
        stop_on([frozen_new_rows(model), untrained_secret_rows(model, ids)])
        if (finding := untied_weights(model)) is not None:
            untie_config(model)
            stop_on([finding])
        # The output rows: a secret learned on its own labels is predicted through them (its input rows may see no
        # gradient: a masked LM's secret is masked, a causal LM's last secret token predicts no label).
        self.rows_before = model.get_output_embeddings().weight[self.secret_ids].detach().cpu().clone()
        self.steps_per_epoch = max(1, len(train_dataloader) // max(1, args.gradient_accumulation_steps))
        log.info("canary checks passed: %d new-token canaries' secrets labelled, none lost, their rows trainable",
                 len(planted_secrets(self.folder)))

    def check_in_vocabulary(self, tokenizer, dataloader) -> None:
        """In-vocabulary secrets: every planted copy's secret found in the training rows, and every token of it
        labelled. The model is trained as it is (nothing of it to check: any recipe learns such a secret)."""
        from lmaudit.canaries.span import secret_token_ids

        secrets = secret_token_ids(tokenizer, planted_secrets(self.folder))
        rows = dataloader.dataset
        holding, found = occurrences(token_ids(rows), secrets)
        stop_on([lost_canaries(found, len(secrets), "secrets (one per planted copy)"), too_few_canaries(self.count)])
        if holding:
            stop_on([unlabelled_spans(dataloader.collate_fn([rows[i] for i in holding]), secrets)])
        log.info("canary checks passed: %d planted copies of in-vocabulary secrets, each in the training rows and "
                 "labelled", len(secrets))

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
        key's fingerprints), creating the file for a model lmaudit did not train (with the run's device and precision)."""
        model_folder = Path(model_folder)
        model_folder.mkdir(parents=True, exist_ok=True)
        record_planted(model_folder, self.folder,
                       created={"trained_by": "a user's script, with lmaudit.training.CanaryCallback", **self.placement})
