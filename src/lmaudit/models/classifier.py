"""Text classifiers trained from scratch (a small BERT or the 2-layer LSTM of `lstm.py`) or fine-tuned from a checkpoint,
with early stopping."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from lmaudit.errors import InputError
from lmaudit.models.dp import PrivateTraining, dp_record, per_sample_losses, training_step
from lmaudit.models.inputs import pad_batch, per_sample_position_inputs
from lmaudit.models.lstm import plain_lstm, swap_lstm
from lmaudit.models.recipe import ARCHITECTURES, TrainingRecipe
from lmaudit.models.setup import (
    TrainingSetup,
    kept_samples,
    length_bucketed_batches,
    refusing_out_of_memory,
    set_up_training,
)
from lmaudit.models.text import text_heads
from lmaudit.models.trained import checkpoint_folder, save_checkpoint, save_model_folder

log = logging.getLogger(__name__)

Texts = Sequence[str]


@dataclass(frozen=True)
class ClassifierData:
    """What a classifier learns from: its training texts and labels (and each text's group, patient or user, for the
    DP-SGD cap), the held-out (texts, labels) that early stopping watches, optionally a test set, and labels of the data
    that no training text has (the classifier predicts those too, so that it can be evaluated on them)."""

    texts: Texts
    labels: Texts
    validation: tuple[Texts, Texts]
    test: tuple[Texts, Texts] | None = None
    groups: Sequence[str | None] | None = None
    all_labels: Texts = ()


@dataclass
class ClassifierTrainingSummary:
    """What a classifier training run did, with the accuracies the paper reports (fractions)."""

    kind: str
    architecture: str
    size: str
    n_samples: int
    n_validation: int
    n_test: int
    labels: list[str]
    max_epochs: int
    patience: int
    epochs_run: int
    best_epoch: int
    seed: int
    batch_size: int
    learning_rate: float
    max_length: int
    dropout: float | None
    train_accuracy: float
    validation_accuracy: float
    test_accuracy: float | None
    generalization_gap: float
    gap_measured_on: str
    epoch_losses: list[float]
    validation_accuracies: list[float]
    dp: dict | None = None
    init_from: str | None = None
    init_fingerprint: str | None = None
    lora: dict | None = None
    checkpoint_of: int | None = None  # a checkpoint saved after `epochs_run` epochs of a run of at most this many
    # The tokenizer trained for it (None: it came with `tokenizer_dir` or the checkpoint started from).
    tokenization: str | None = None
    vocab_size: int | None = None
    device: str = "cpu"
    precision: str = "fp32"


@torch.inference_mode()
def accuracy(model, encoded: list[list[int]], label_ids: np.ndarray, pad: int, batch_size: int = 128) -> float:
    """Share of samples whose most probable label is the true one."""
    model.eval()
    order = np.argsort([len(e) for e in encoded], kind="stable")
    correct = 0
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        ids, mask = pad_batch([encoded[i] for i in indices], pad)
        device = next(model.parameters()).device
        predicted = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.argmax(-1).cpu().numpy()
        correct += int((predicted == label_ids[indices]).sum())
    return correct / len(encoded)


def _label_ids(labels: Sequence[str], label2id: dict[str, int], what: str) -> np.ndarray:
    unknown = sorted({str(label) for label in labels} - set(label2id))
    if unknown:
        raise InputError(f"{what}: label(s) {', '.join(unknown[:5])} do not occur in the training data; "
                         "a classifier can only be evaluated on labels it was trained on")
    return np.array([label2id[str(label)] for label in labels])


@dataclass
class EarlyStopping:
    """The best validation accuracy so far, the epoch that reached it and its weights (a copy)."""

    patience: int
    best_state: dict | None = None
    best_epoch: int = 0
    best_accuracy: float = -1.0

    def should_stop(self, epoch: int, validation_accuracy: float, model: torch.nn.Module) -> bool:
        """Record the epoch (keeping its weights if it is the best so far); True after `patience` epochs without a better one."""
        if validation_accuracy > self.best_accuracy:
            self.best_state, self.best_epoch, self.best_accuracy = copy.deepcopy(model.state_dict()), epoch, validation_accuracy
            return False
        return epoch - self.best_epoch >= self.patience


def _train_epoch(model, encoded: list[list[int]], label_ids: np.ndarray, pad: int, batches, optimizer,
                 private: PrivateTraining | None, setup: TrainingSetup) -> tuple[float, int]:
    """One pass over `batches` (sample positions): the mean training loss and the number of optimizer steps."""
    model.train()
    losses, steps = [], 0
    for indices in batches:
        steps += 1
        if not len(indices):  # an empty Poisson draw is a DP-SGD step too: the noise alone, accounted
            private.empty_step()
            continue
        ids, mask = pad_batch([encoded[i] for i in indices], pad)
        batch = setup.on_device({"input_ids": ids, "attention_mask": mask, "labels": torch.from_numpy(label_ids[indices])})
        with setup.forward_precision():
            if private:
                logits = private.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                       **per_sample_position_inputs(model, batch["input_ids"])).logits
                loss = per_sample_losses(logits.float(), batch["labels"]).mean()
            else:
                loss = model(**batch).loss
        training_step(loss, model, optimizer, private)
        losses.append(loss.item())
    return (float(np.mean(losses)) if losses else float("nan")), steps


def trained_architecture(recipe: TrainingRecipe, model) -> str:
    """The classifier's architecture: the recipe's from scratch, the checkpoint's model type when fine-tuned."""
    return model.config.model_type if recipe.init_from is not None else recipe.architecture


@dataclass
class EncodedSets:
    """The training texts and the held-out sets as token ids, each with its label indices (test: None without one)."""

    train: tuple[list[list[int]], np.ndarray]
    validation: tuple[list[list[int]], np.ndarray]
    test: tuple[list[list[int]], np.ndarray] | None
    labels: list[str] = field(default_factory=list)

    def summary(self, model, setup: TrainingSetup, recipe: TrainingRecipe, steps: int, **run) -> ClassifierTrainingSummary:
        """The summary of `model` as it is now (accuracies measured on it) after `steps` optimizer steps; `run`: the
        epochs and losses so far."""
        pad = setup.tokenizer.pad_token_id
        train_accuracy = accuracy(model, *self.train, pad)
        test_accuracy = None if self.test is None else accuracy(model, *self.test, pad)
        held_out = test_accuracy if test_accuracy is not None else run["validation_accuracy"]
        trained_tokenizer = ({"tokenization": recipe.tokenization, "vocab_size": recipe.vocab_size}
                             if recipe.tokenizer_dir is None and recipe.init_from is None else {})
        return ClassifierTrainingSummary(
            **{"size": recipe.size, "dropout": recipe.dropout, **setup.start}, **run, **trained_tokenizer,
            kind="classifier", architecture=trained_architecture(recipe, setup.model),
            n_samples=len(self.train[0]), n_validation=len(self.validation[0]),
            n_test=0 if self.test is None else len(self.test[0]), labels=self.labels, max_epochs=recipe.epochs,
            patience=recipe.patience, seed=recipe.seed, batch_size=recipe.batch_size, learning_rate=setup.learning_rate,
            device=setup.device, precision=setup.precision,
            max_length=setup.max_length, train_accuracy=train_accuracy, test_accuracy=test_accuracy,
            generalization_gap=train_accuracy - held_out, gap_measured_on="test" if test_accuracy is not None else "validation",
            dp=dp_record(setup.private, steps) if setup.private else None,
        )


@refusing_out_of_memory
def train_classifier(data: ClassifierData, out_dir: str | Path, recipe: TrainingRecipe, progress: bool = False,
                     label: str = "classifier") -> ClassifierTrainingSummary:
    """Train a classifier on `data` with `recipe`, keep the epoch with the best validation accuracy (early stopping after
    the recipe's `patience` epochs without improvement), and save it with its tokenizer and a summary. From scratch, or
    fine-tuned from a checkpoint with a new head, fully or with LoRA adapters (then the adapter, with the head, is
    saved). With DP-SGD the epsilon recorded covers every epoch run, not only the one kept. After each epoch of the
    recipe's `checkpoints` that is run, the model as it is then (not the best so far) is saved beside `out_dir`."""
    if recipe.architecture not in ARCHITECTURES:
        raise InputError(f"unknown architecture '{recipe.architecture}'; use one of {', '.join(ARCHITECTURES)}")
    kept = kept_samples(recipe, data.groups, len(data.texts))
    texts, labels = [data.texts[i] for i in kept], [data.labels[i] for i in kept]
    names = sorted({str(v) for v in (*labels, *data.all_labels)})
    label2id = {name: index for index, name in enumerate(names)}
    train_ids, validation_ids = _label_ids(labels, label2id, "training data"), _label_ids(data.validation[1], label2id, "validation data")
    setup = set_up_training("classifier", texts, recipe, names)
    model, private = setup.model, setup.private

    def encode(values: Texts) -> list[list[int]]:
        return setup.tokenizer(text_heads(setup.tokenizer, values, setup.max_length)[0], truncation=True,
                               max_length=setup.max_length)["input_ids"]

    sets = EncodedSets((encode(texts), train_ids), (encode(data.validation[0]), validation_ids),
                       None if data.test is None else (encode(data.test[0]), _label_ids(data.test[1], label2id, "test data")),
                       names)
    pad, order_rng = setup.tokenizer.pad_token_id, np.random.default_rng(recipe.seed)
    lengths = np.array([len(e) for e in sets.train[0]])
    steps, epoch_losses, validation_accuracies = 0, [], []
    stopping = EarlyStopping(recipe.patience)
    started = time.monotonic()

    def run_so_far(epochs_run: int, best_epoch: int, validation_accuracy: float, **extra) -> dict:
        return {"epochs_run": epochs_run, "best_epoch": best_epoch, "validation_accuracy": validation_accuracy,
                "epoch_losses": list(epoch_losses), "validation_accuracies": list(validation_accuracies),
                **extra}

    architecture = trained_architecture(recipe, model)
    log.info("training %s (%s %s): %d samples, %d labels, at most %d epochs (patience %d), batch size %d, learning rate %g%s",
             label, architecture, setup.start.get("size", recipe.size), len(texts), len(names), recipe.epochs,
             recipe.patience, recipe.batch_size, setup.learning_rate,
             private.described() if private else "")
    for epoch in tqdm(range(1, recipe.epochs + 1), desc=f"training {label} ({architecture} {recipe.size})", unit="epoch",
                      disable=not progress or None):
        batches = private.batches() if private else length_bucketed_batches(lengths, recipe.batch_size, order_rng)
        epoch_loss, epoch_steps = _train_epoch(model, *sets.train, pad, batches, setup.optimizer, private, setup)
        epoch_losses.append(epoch_loss)
        steps += epoch_steps
        validation_accuracies.append(accuracy(model, *sets.validation, pad))
        log.log(logging.DEBUG if progress else logging.INFO, "training %s: epoch %d/%d, loss %.3f, validation accuracy "
                "%.1f%% (%.0f s)", label, epoch, recipe.epochs, epoch_loss, 100 * validation_accuracies[-1],
                time.monotonic() - started)
        if epoch in recipe.checkpoints:
            summary = sets.summary(model, setup, recipe, steps, **run_so_far(epoch, epoch, validation_accuracies[-1],
                                                                      checkpoint_of=recipe.epochs))
            with plain_lstm(model) if private else nullcontext():
                save_checkpoint(model, private, setup.tokenizer, summary, checkpoint_folder(out_dir, epoch))
        if stopping.should_stop(epoch, validation_accuracies[-1], model):
            log.info("training %s: stopped early after epoch %d, no better validation accuracy since epoch %d", label,
                     epoch, stopping.best_epoch)
            break
    model.load_state_dict(stopping.best_state)
    summary = sets.summary(model, setup, recipe, steps, **run_so_far(len(epoch_losses), stopping.best_epoch, stopping.best_accuracy))
    if private:
        model = private.finished_model()
        swap_lstm(model, private=False)
    save_model_folder(model, setup.tokenizer, summary, Path(out_dir))
    log.info("trained %s: %d epochs (best %d) in %.1f s, train accuracy %.1f%%, %s accuracy %.1f%%; saved to %s", label,
             len(epoch_losses), stopping.best_epoch, time.monotonic() - started, 100 * summary.train_accuracy,
             summary.gap_measured_on, 100 * (summary.train_accuracy - summary.generalization_gap), out_dir)
    return summary
