"""Text classifiers trained from scratch (a small BERT or the 2-layer LSTM of `lstm.py`) or fine-tuned from a checkpoint,
with early stopping."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from lmaudit.errors import InputError
from lmaudit.models import quiet_transformers
from lmaudit.models.dp import (
    DPSettings,
    PrivateTraining,
    cap_samples_per_group,
    dp_record,
    make_private,
    per_sample_losses,
    training_step,
)
from lmaudit.models.inputs import pad_batch, per_sample_position_inputs
from lmaudit.models.lstm import LSTMClassifierConfig, LSTMForSequenceClassification
from lmaudit.models.pretrained import LoraSettings
from lmaudit.models.text import text_heads
from lmaudit.models.train import (
    SIZES,
    checkpoint_folder,
    default_learning_rate,
    length_bucketed_batches,
    mlm_config,
    save_checkpoint,
    save_model_folder,
    starting_model,
)

log = logging.getLogger(__name__)


def swap_lstm(model: torch.nn.Module, private: bool) -> None:
    """Give an LSTM classifier Opacus's DPLSTM (private=True), whose per-sample gradients Opacus can compute,
    or the plain LSTM back; both hold the same weights under the same names and compute the same outputs."""
    from opacus.layers import DPLSTM

    if not isinstance(model, LSTMForSequenceClassification):
        return
    config = model.config
    kind = DPLSTM if private else torch.nn.LSTM
    replacement = kind(config.hidden_size, config.hidden_size, num_layers=config.num_layers, batch_first=True,
                       dropout=config.dropout if config.num_layers > 1 else 0.0)
    state = model.lstm.state_dict()
    if isinstance(model.lstm, DPLSTM):
        # In DP-SGD training its LSTM-named aliases are hidden from Opacus (make_private): read its cells' own weights.
        state = {model.lstm.old_to_new.get(name, name): value.detach() for name, value in model.lstm.named_parameters()}
    replacement.load_state_dict(state)
    model.lstm = replacement


@contextmanager
def plain_lstm(model: torch.nn.Module) -> Iterator[None]:
    """While the block runs, the plain LSTM in place of a DP-SGD run's DPLSTM (whose state holds every weight under
    two names, which safetensors refuses to save); the DPLSTM, which Opacus and the optimizer hold, is put back after."""
    private_lstm = getattr(model, "lstm", None)
    swap_lstm(model, private=False)
    try:
        yield
    finally:
        if private_lstm is not None:
            model.lstm = private_lstm


ARCHITECTURES = ("bert", "lstm")


def classifier_model(architecture: str, size: str, tokenizer, labels: Sequence[str], max_length: int, dropout: float):
    """An untrained classifier of the named architecture and size, with label names in its config."""
    from transformers import BertForSequenceClassification

    id2label = dict(enumerate(labels))
    label2id = {name: index for index, name in id2label.items()}
    if architecture == "bert":
        config = mlm_config(size, len(tokenizer), max_length, tokenizer.pad_token_id, dropout)
        config.update({"num_labels": len(labels), "id2label": id2label, "label2id": label2id})
        return BertForSequenceClassification(config)
    _, hidden, _, _ = SIZES[size]
    return LSTMForSequenceClassification(LSTMClassifierConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, num_layers=2, dropout=dropout, pad_token_id=tokenizer.pad_token_id,
        num_labels=len(labels), id2label=id2label, label2id=label2id,
    ))


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


@torch.inference_mode()
def accuracy(model, encoded: list[list[int]], label_ids: np.ndarray, pad: int, batch_size: int = 128) -> float:
    """Share of samples whose most probable label is the true one."""
    model.eval()
    order = np.argsort([len(e) for e in encoded], kind="stable")
    correct = 0
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        ids, mask = pad_batch([encoded[i] for i in indices], pad)
        predicted = model(input_ids=ids, attention_mask=mask).logits.argmax(-1).numpy()
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
                 private: PrivateTraining | None) -> tuple[float, int]:
    """One pass over `batches` (sample positions): the mean training loss and the number of optimizer steps."""
    model.train()
    losses = []
    for indices in batches:
        ids, mask = pad_batch([encoded[i] for i in indices], pad)
        targets = torch.from_numpy(label_ids[indices])
        if private:
            logits = private.model(input_ids=ids, attention_mask=mask, **per_sample_position_inputs(model, ids)).logits
            loss = per_sample_losses(logits, targets).mean()
        else:
            loss = model(input_ids=ids, attention_mask=mask, labels=targets).loss
        training_step(loss, model, optimizer, private)
        losses.append(loss.item())
    return (float(np.mean(losses)) if losses else float("nan")), len(losses)


def train_classifier(
    texts: Sequence[str],
    labels: Sequence[str],
    out_dir: str | Path,
    validation: tuple[Sequence[str], Sequence[str]],
    test: tuple[Sequence[str], Sequence[str]] | None = None,
    architecture: Literal["bert", "lstm"] = "bert",
    size: Literal["tiny", "mini", "small"] = "tiny",
    max_epochs: int = 30,
    patience: int = 5,
    seed: int = 0,
    batch_size: int = 32,
    learning_rate: float | None = None,
    max_length: int = 128,
    vocab_size: int = 4000,
    dropout: float = 0.1,
    tokenizer_dir: str | Path | None = None,
    progress: bool = False,
    label: str = "classifier",
    dp: DPSettings | None = None,
    groups: Sequence[str | None] | None = None,
    init_from: str | Path | None = None,
    lora: LoraSettings | None = None,
    checkpoints: Sequence[int] = (),
    tokenization: str = "wordpiece",
    all_labels: Sequence[str] = (),
) -> ClassifierTrainingSummary:
    """Train a classifier, keep the epoch with the best validation accuracy (early stopping after
    `patience` epochs without improvement), and save it with its tokenizer and a summary. From scratch (`architecture`,
    `size`), or fine-tuned from the checkpoint `init_from` with a new head, fully or with `lora` adapters (then the
    adapter, with the head, is saved). With `dp`, DP-SGD with Poisson batches; the epsilon recorded covers every epoch
    run, not only the one kept. After each epoch in `checkpoints` that is run, the model as it is then (not the best
    so far) is saved beside `out_dir` (`checkpoint_folder`). A tokenizer trained here is fitted on `texts`: WordPiece
    or word-level (`tokenization`), of at most `vocab_size` tokens. The classifier predicts every label of `labels` and
    `all_labels` (a label of the data that no training sample has is then still one the model can be evaluated on)."""
    if architecture not in ARCHITECTURES:
        raise InputError(f"unknown architecture '{architecture}'; use one of {', '.join(ARCHITECTURES)}")
    quiet_transformers()
    torch.manual_seed(seed)
    if dp is not None:
        kept = cap_samples_per_group(list(groups) if groups is not None else [None] * len(texts), dp.max_samples_per_group, seed)
        texts, labels = [texts[i] for i in kept], [labels[i] for i in kept]
    names = sorted({str(v) for v in (*labels, *all_labels)})
    label2id = {name: index for index, name in enumerate(names)}
    train_ids, validation_ids = _label_ids(labels, label2id, "training data"), _label_ids(validation[1], label2id, "validation data")
    model, tokenizer, max_length, start = starting_model(
        "classifier", texts, tokenizer_dir, init_from, lora, max_length, vocab_size,
        lambda tokenizer: classifier_model(architecture, size, tokenizer, names, max_length, dropout), names, tokenization)
    trained_tokenizer = {"tokenization": tokenization, "vocab_size": vocab_size} if tokenizer_dir is None and init_from is None else {}
    if init_from is not None:
        architecture = model.config.model_type
    learning_rate = learning_rate or default_learning_rate(init_from, lora)

    def encode(values: Sequence[str]) -> list[list[int]]:
        return tokenizer(text_heads(tokenizer, values, max_length)[0], truncation=True, max_length=max_length)["input_ids"]

    encoded, validation_encoded = encode(texts), encode(validation[0])
    test_encoded = None if test is None else (encode(test[0]), _label_ids(test[1], label2id, "test data"))
    pad, lengths, order_rng = tokenizer.pad_token_id, np.array([len(e) for e in encoded]), np.random.default_rng(seed)
    if dp is not None:
        swap_lstm(model, private=True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate, weight_decay=0.01)
    private = make_private(model, optimizer, len(encoded), batch_size, dp, seed) if dp is not None else None
    steps, epoch_losses, validation_accuracies = 0, [], []
    stopping = EarlyStopping(patience)
    started = time.monotonic()

    def summary_now(epochs_run: int, best_epoch: int, validation_accuracy: float,
                    checkpoint_of: int | None = None) -> ClassifierTrainingSummary:
        """The summary of the model as it is now (accuracies measured on it), after `epochs_run` epochs."""
        train_accuracy = accuracy(model, encoded, train_ids, pad)
        test_accuracy = None if test_encoded is None else accuracy(model, *test_encoded, pad)
        held_out = test_accuracy if test_accuracy is not None else validation_accuracy
        return ClassifierTrainingSummary(
            **{"size": size, "dropout": dropout, **start},
            kind="classifier", architecture=architecture, n_samples=len(encoded), n_validation=len(validation_encoded),
            n_test=0 if test is None else len(test[0]), labels=names, max_epochs=max_epochs, patience=patience,
            epochs_run=epochs_run, best_epoch=best_epoch, seed=seed, batch_size=batch_size,
            learning_rate=learning_rate, max_length=max_length, train_accuracy=train_accuracy,
            validation_accuracy=validation_accuracy, test_accuracy=test_accuracy,
            generalization_gap=train_accuracy - held_out, gap_measured_on="test" if test_accuracy is not None else "validation",
            epoch_losses=list(epoch_losses), validation_accuracies=list(validation_accuracies),
            dp=dp_record(private, steps) if private else None, checkpoint_of=checkpoint_of, **trained_tokenizer,
        )

    log.info("training %s (%s %s): %d samples, %d labels, at most %d epochs (patience %d), batch size %d, learning rate %g%s",
             label, architecture, start.get("size", size), len(encoded), len(names), max_epochs, patience, batch_size,
             learning_rate, f", DP-SGD noise {dp.noise_multiplier:g}" if dp is not None else "")
    for epoch in tqdm(range(1, max_epochs + 1), desc=f"training {label} ({architecture} {size})", unit="epoch",
                      disable=not progress or None):
        batches = private.batches() if private else length_bucketed_batches(lengths, batch_size, order_rng)
        epoch_loss, epoch_steps = _train_epoch(model, encoded, train_ids, pad, batches, optimizer, private)
        epoch_losses.append(epoch_loss)
        steps += epoch_steps
        validation_accuracies.append(accuracy(model, validation_encoded, validation_ids, pad))
        log.log(logging.DEBUG if progress else logging.INFO, "training %s: epoch %d/%d, loss %.3f, validation accuracy "
                "%.1f%% (%.0f s)", label, epoch, max_epochs, epoch_loss, 100 * validation_accuracies[-1],
                time.monotonic() - started)
        if epoch in checkpoints:
            summary = summary_now(epoch, epoch, validation_accuracies[-1], checkpoint_of=max_epochs)
            with plain_lstm(model) if private else nullcontext():
                save_checkpoint(model, private, tokenizer, summary, checkpoint_folder(out_dir, epoch))
        if stopping.should_stop(epoch, validation_accuracies[-1], model):
            log.info("training %s: stopped early after epoch %d, no better validation accuracy since epoch %d", label,
                     epoch, stopping.best_epoch)
            break
    model.load_state_dict(stopping.best_state)
    summary = summary_now(len(epoch_losses), stopping.best_epoch, stopping.best_accuracy)
    if private:
        model = private.finished_model()
        swap_lstm(model, private=False)
    save_model_folder(model, tokenizer, summary, Path(out_dir))
    log.info("trained %s: %d epochs (best %d) in %.1f s, train accuracy %.1f%%, %s accuracy %.1f%%; saved to %s", label,
             len(epoch_losses), stopping.best_epoch, time.monotonic() - started, 100 * summary.train_accuracy,
             summary.gap_measured_on, 100 * (summary.train_accuracy - summary.generalization_gap), out_dir)
    return summary
