"""Train a language model (BERT masked LM, GPT-2 causal LM) from scratch or from a checkpoint, saved as safetensors."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from lmaudit.models.dp import dp_record, per_sample_losses, training_step
from lmaudit.models.heads import masked_lm_loss
from lmaudit.models.inputs import per_sample_position_inputs, secret_only_labels
from lmaudit.models.recipe import TrainingRecipe
from lmaudit.models.setup import kept_samples, length_bucketed_batches, refusing_out_of_memory, set_up_training
from lmaudit.models.text import text_heads
from lmaudit.models.trained import checkpoint_folder, save_checkpoint, save_model_folder

log = logging.getLogger(__name__)


@dataclass
class TrainingSummary:
    """What a training run did, written next to the model as lmaudit_training.json."""

    kind: str
    size: str
    n_samples: int
    epochs: int
    seed: int
    batch_size: int
    learning_rate: float
    max_length: int
    dropout: float | None
    final_train_loss: float
    epoch_losses: list[float]
    dp: dict | None = None
    init_from: str | None = None
    init_fingerprint: str | None = None
    lora: dict | None = None
    checkpoint_of: int | None = None  # a checkpoint saved after `epochs` of a run of this many epochs
    device: str = "cpu"
    precision: str = "fp32"


@refusing_out_of_memory
def train_language_model(kind: Literal["mlm", "clm"], texts: Sequence[str], out_dir: str | Path, recipe: TrainingRecipe,
                         groups: Sequence[str | None] | None = None, progress: bool = False,
                         label: str = "model") -> TrainingSummary:
    """Train an LM of `kind` on `texts` with `recipe` and save it with its tokenizer (an adapter, with LoRA): AdamW,
    linear warm-up and decay, length-bucketed batches; or, with DP-SGD, Poisson batches (`groups` give each text's
    patient or user for the per-group cap). After each epoch of the recipe's `checkpoints` (before the last), the model
    as it is then is saved beside `out_dir` (`checkpoint_folder`)."""
    from transformers import DataCollatorForLanguageModeling, get_linear_schedule_with_warmup

    texts = [texts[i] for i in kept_samples(recipe, groups, len(texts))]
    setup = set_up_training(kind, texts, recipe)
    model, private, epochs = setup.model, setup.private, recipe.epochs
    encoded = setup.tokenizer(text_heads(setup.tokenizer, texts, setup.max_length)[0], truncation=True,
                              max_length=setup.max_length)["input_ids"]
    collator = DataCollatorForLanguageModeling(setup.tokenizer, mlm=kind == "mlm", mlm_probability=0.15, seed=recipe.seed)
    order_rng = np.random.default_rng(recipe.seed)
    lengths = np.array([len(ids) for ids in encoded])
    steps_per_epoch = math.ceil(len(encoded) / recipe.batch_size)
    schedule = get_linear_schedule_with_warmup(setup.optimizer, steps_per_epoch, steps_per_epoch * epochs)
    epoch_losses, steps, started = [], 0, time.monotonic()
    size = setup.start.get("size", recipe.size)
    log.info("training %s (%s, %s): %d samples, %d epochs, batch size %d, learning rate %g%s", label, kind, size,
             len(encoded), epochs, recipe.batch_size, setup.learning_rate,
             setup.private.described() if setup.private else "")

    def summary_after(losses: list[float], **extra) -> TrainingSummary:
        return TrainingSummary(**{
            "kind": kind, "size": recipe.size, "n_samples": len(encoded), "epochs": len(losses), "seed": recipe.seed,
            "batch_size": recipe.batch_size, "learning_rate": setup.learning_rate, "max_length": setup.max_length,
            "final_train_loss": losses[-1], "epoch_losses": list(losses),
            "dp": dp_record(private, steps) if private else None, "dropout": recipe.dropout, "device": setup.device,
            "precision": setup.precision, **setup.start, **extra})

    # New-token canaries learn their secret alone (models/inputs.py:secret_only_labels); the notes learn every token.
    secret_ids = (torch.tensor(setup.tokenizer.convert_tokens_to_ids(list(recipe.reserved_tokens)), device=setup.device)
                  if recipe.reserved_tokens else None)
    model.train()
    for epoch in tqdm(range(epochs), desc=f"training {label} ({recipe.size})", unit="epoch", disable=not progress or None):
        losses = []
        for batch_indices in private.batches() if private else length_bucketed_batches(lengths, recipe.batch_size, order_rng):
            if not len(batch_indices):  # an empty Poisson draw is a DP-SGD step too: the noise alone, accounted
                private.empty_step()
                schedule.step()
                steps += 1
                continue
            batch = setup.on_device(collator([{"input_ids": encoded[i]} for i in batch_indices]))
            if secret_ids is not None:
                batch = secret_only_labels(batch, secret_ids, setup.tokenizer.mask_token_id if kind == "mlm" else None)
            with setup.forward_precision():
                if private:
                    logits = private.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                           **per_sample_position_inputs(model, batch["input_ids"])).logits
                    loss = per_sample_losses(logits.float(), batch["labels"], causal=kind == "clm").mean()
                elif kind == "mlm":
                    loss = masked_lm_loss(model, batch["input_ids"], batch["attention_mask"], batch["labels"])
                else:
                    loss = model(**batch).loss
            training_step(loss, model, setup.optimizer, private)
            schedule.step()
            losses.append(loss.item())
            steps += 1
        epoch_losses.append(float(np.mean(losses)) if losses else float("nan"))
        log.log(logging.DEBUG if progress else logging.INFO, "training %s: epoch %d/%d, loss %.3f (%.0f s)", label,
                epoch + 1, epochs, epoch_losses[-1], time.monotonic() - started)
        if epoch + 1 in recipe.checkpoints and epoch + 1 < epochs:
            save_checkpoint(model.eval(), private, setup.tokenizer, summary_after(epoch_losses, checkpoint_of=epochs),
                            checkpoint_folder(out_dir, epoch + 1))
            model.train()
    summary = summary_after(epoch_losses)
    save_model_folder((private.finished_model() if private else model).eval(), setup.tokenizer, summary, Path(out_dir))
    log.info("trained %s: final loss %.3f after %d epochs in %.1f s; saved to %s", label, epoch_losses[-1], epochs,
             time.monotonic() - started, out_dir)
    return summary
