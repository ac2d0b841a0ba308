"""Train a WordPiece tokenizer and small language models (BERT masked LM, GPT-2 causal LM) from scratch, saved as safetensors; resume after trained models."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from lmaudit.atomic import staged
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
from lmaudit.models.folders import read_training_summary
from lmaudit.models.inputs import per_sample_position_inputs
from lmaudit.models.pretrained import LoraSettings, load_checkpoint, with_lora
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.models.text import model_max_length, text_heads
from lmaudit.models.tokenizer import load_tokenizer, train_tokenizer

log = logging.getLogger(__name__)

SIZES = {
    # layers, hidden, heads, feed-forward width
    "tiny": (2, 64, 2, 256),
    "mini": (2, 128, 4, 512),
    "small": (4, 256, 4, 1024),
}


def mlm_config(size: str, vocab_size: int, max_length: int, pad_token_id: int, dropout: float = 0.1):
    """A BERT config of the named size."""
    from transformers import BertConfig

    layers, hidden, heads, feed_forward = SIZES[size]
    return BertConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=feed_forward, max_position_embeddings=max_length, pad_token_id=pad_token_id,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
    )


def length_bucketed_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator, pool_batches: int = 50) -> list[np.ndarray]:
    """Random batches of similar lengths: shuffle, sort within pools of `pool_batches` batches, shuffle batches.

    Padding inside a batch is what costs on CPU; this removes most of it and keeps the order random.
    """
    order = rng.permutation(len(lengths))
    pool = batch_size * pool_batches
    batches = []
    for start in range(0, len(order), pool):
        chunk = order[start : start + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


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


def checkpoint_folder(out_dir: str | Path, epoch: int) -> Path:
    """Where the checkpoint after `epoch` of the model trained into `out_dir` is saved: `<out_dir>-epoch-<epoch>`."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f"{out_dir.name}-epoch-{epoch}")


def missing_checkpoints(out_dir: str | Path, epochs: Sequence[int], run_length: int) -> list[int]:
    """The epochs among `epochs` whose checkpoint, from a run of `run_length` epochs, is not beside `out_dir`."""
    return [epoch for epoch in epochs
            if (read_training_summary(checkpoint_folder(out_dir, epoch)) or {}).get("checkpoint_of") != run_length]


def clm_config(size: str, vocab_size: int, max_length: int, tokenizer, dropout: float = 0.1):
    """A GPT-2 config of the named size (the same layer and width table as the MLMs)."""
    from transformers import GPT2Config

    layers, hidden, heads, _ = SIZES[size]
    return GPT2Config(
        vocab_size=vocab_size, n_positions=max_length, n_embd=hidden, n_layer=layers, n_head=heads,
        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id,
    )


def _build_model(kind: str, size: str, tokenizer, max_length: int, dropout: float):
    from transformers import BertForMaskedLM, GPT2LMHeadModel

    if kind == "mlm":
        return BertForMaskedLM(mlm_config(size, len(tokenizer), max_length, tokenizer.pad_token_id, dropout))
    return GPT2LMHeadModel(clm_config(size, len(tokenizer), max_length, tokenizer, dropout))


def default_learning_rate(init_from: str | Path | None, lora: LoraSettings | None) -> float:
    """AdamW's peak learning rate unless one is given: 2e-3 from scratch (tiny models), 5e-5 to fine-tune a checkpoint
    fully (BERT's and GPT-2's fine-tuning range), 2e-4 for LoRA adapters (the LoRA paper's range)."""
    if init_from is None:
        return 2e-3
    return 2e-4 if lora is not None else 5e-5


def starting_model(kind: str, texts: Sequence[str], tokenizer_dir: str | Path | None, init_from: str | Path | None,
                   lora: LoraSettings | None, max_length: int, vocab_size: int, build: Callable[[object], torch.nn.Module],
                   labels: list[str] | None = None, tokenization: str = "wordpiece") -> tuple[torch.nn.Module, object, int, dict]:
    """(model, tokenizer, max_length, what the summary records): a checkpoint's model and tokenizer (with LoRA adapters
    when asked; a classifier gets a new head for `labels`), or `build(tokenizer)` with the tokenizer of `tokenizer_dir` or
    one trained on `texts` (`tokenization`, `vocab_size`)."""
    if lora is not None and init_from is None:
        raise InputError("--lora needs --init-from: LoRA adapters fine-tune a pretrained model")
    if init_from is None:
        tokenizer = (load_tokenizer(tokenizer_dir) if tokenizer_dir is not None else train_tokenizer(texts, vocab_size, max_length, tokenization))
        return build(tokenizer), tokenizer, max_length, {}
    if tokenizer_dir is not None:
        raise InputError("--tokenizer with --init-from: a checkpoint brings its own tokenizer; give one of them")
    checkpoint = load_checkpoint(init_from, kind, labels)
    model = with_lora(checkpoint, kind, lora) if lora is not None else checkpoint.model
    max_length = min(max_length, model_max_length(checkpoint.model.config, checkpoint.tokenizer))
    record = {**checkpoint.record, "size": "pretrained", "dropout": None,
              "lora": None if lora is None else {**asdict(lora), "alpha": lora.alpha or 2 * lora.rank}}
    return model, checkpoint.tokenizer, max_length, record


def train_language_model(
    kind: Literal["mlm", "clm"],
    texts: Sequence[str],
    out_dir: str | Path,
    tokenizer_dir: str | Path | None = None,
    size: Literal["tiny", "mini", "small"] = "tiny",
    epochs: int = 30,
    seed: int = 0,
    batch_size: int = 32,
    learning_rate: float | None = None,
    max_length: int = 128,
    vocab_size: int = 4000,
    dropout: float = 0.1,
    progress: bool = False,
    label: str = "model",
    dp: DPSettings | None = None,
    groups: Sequence[str | None] | None = None,
    init_from: str | Path | None = None,
    lora: LoraSettings | None = None,
    checkpoints: Sequence[int] = (),
) -> TrainingSummary:
    """Train an LM of `kind` on `texts` and save it with its tokenizer: from scratch (a small model; the tokenizer
    trained here unless `tokenizer_dir`), or fine-tuned from the checkpoint `init_from`, fully or with `lora` adapters
    (then the adapter is saved). AdamW, linear warm-up and decay, length-bucketed batches; or, with `dp`, DP-SGD with
    Poisson batches (`groups` give each text's patient or user for the per-group cap). After each epoch listed in
    `checkpoints` (before the last), the model as it is then is saved beside `out_dir` (`checkpoint_folder`)."""
    from transformers import DataCollatorForLanguageModeling, get_linear_schedule_with_warmup

    quiet_transformers()
    torch.manual_seed(seed)
    if dp is not None:
        kept = cap_samples_per_group(list(groups) if groups is not None else [None] * len(texts), dp.max_samples_per_group, seed)
        texts = [texts[i] for i in kept]
    model, tokenizer, max_length, start = starting_model(
        kind, texts, tokenizer_dir, init_from, lora, max_length, vocab_size,
        lambda tokenizer: _build_model(kind, size, tokenizer, max_length, dropout))
    learning_rate = learning_rate or default_learning_rate(init_from, lora)
    encoded = tokenizer(text_heads(tokenizer, texts, max_length)[0], truncation=True, max_length=max_length)["input_ids"]
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=kind == "mlm", mlm_probability=0.15, seed=seed)
    order_rng = np.random.default_rng(seed)
    lengths = np.array([len(ids) for ids in encoded])
    steps_per_epoch = math.ceil(len(encoded) / batch_size)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, steps_per_epoch, steps_per_epoch * epochs)
    epoch_losses = []
    private = make_private(model, optimizer, len(encoded), batch_size, dp, seed) if dp is not None else None
    steps = 0
    started = time.monotonic()
    log.info("training %s (%s, %s): %d samples, %d epochs, batch size %d, learning rate %g%s", label, kind,
             start.get("size", size), len(encoded), epochs, batch_size, learning_rate,
             f", DP-SGD noise {dp.noise_multiplier:g}" if dp is not None else "")

    def summary_after(losses: list[float], **extra) -> TrainingSummary:
        return TrainingSummary(**{
            "kind": kind, "size": size, "n_samples": len(encoded), "epochs": len(losses), "seed": seed,
            "batch_size": batch_size, "learning_rate": learning_rate, "max_length": max_length,
            "final_train_loss": losses[-1], "epoch_losses": list(losses),
            "dp": dp_record(private, steps) if private else None, "dropout": dropout, **start, **extra})

    model.train()
    for epoch in tqdm(range(epochs), desc=f"training {label} ({size})", unit="epoch", disable=not progress or None):
        losses = []
        for batch_indices in private.batches() if private else length_bucketed_batches(lengths, batch_size, order_rng):
            batch = collator([{"input_ids": encoded[i]} for i in batch_indices])
            if private:
                logits = private.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                       **per_sample_position_inputs(model, batch["input_ids"])).logits
                loss = per_sample_losses(logits, batch["labels"], causal=kind == "clm").mean()
            else:
                loss = model(**batch).loss
            training_step(loss, model, optimizer, private)
            schedule.step()
            losses.append(loss.item())
            steps += 1
        epoch_losses.append(float(np.mean(losses)) if losses else float("nan"))
        log.log(logging.DEBUG if progress else logging.INFO, "training %s: epoch %d/%d, loss %.3f (%.0f s)", label,
                epoch + 1, epochs, epoch_losses[-1], time.monotonic() - started)
        if epoch + 1 in checkpoints and epoch + 1 < epochs:
            save_checkpoint(model.eval(), private, tokenizer, summary_after(epoch_losses, checkpoint_of=epochs),
                            checkpoint_folder(out_dir, epoch + 1))
            model.train()
    summary = summary_after(epoch_losses)
    save_model_folder((private.finished_model() if private else model).eval(), tokenizer, summary, Path(out_dir))
    log.info("trained %s: final loss %.3f after %d epochs in %.1f s; saved to %s", label, epoch_losses[-1], epochs,
             time.monotonic() - started, out_dir)
    return summary


def save_model_folder(model, tokenizer, summary, out: Path) -> None:
    """Save the model, its tokenizer and its training summary (a dataclass) all or nothing: a killed run never
    leaves a half-saved model."""
    if out.exists() and any(out.iterdir()) and not (out / SUMMARY_FILE).exists():
        raise InputError(f"{out}: exists and is not a model folder written by lmaudit; choose another --out")
    with staged(out) as (staging,):
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / SUMMARY_FILE).write_text(json.dumps(asdict(summary), indent=2))


def save_checkpoint(model, private: PrivateTraining | None, tokenizer, summary, out: Path) -> None:
    """Save the model as it is in the middle of training (a DP-SGD model with the tensors hidden from Opacus)."""
    with private.saveable() if private else nullcontext(model) as saved:
        save_model_folder(saved, tokenizer, summary, out)


def _agrees(recorded, wanted) -> bool:
    if isinstance(wanted, dict):
        return isinstance(recorded, dict) and all(_agrees(recorded.get(key), value) for key, value in wanted.items())
    return recorded == wanted


def train_unless_done(folder: str | Path, wanted: dict, train: Callable[[], object], missing: Sequence[int] = ()) -> None:
    """Call `train()` unless `folder` holds a model whose training summary agrees with every entry of `wanted`
    (a nested dict with every entry of its own) and no checkpoint is `missing` (epochs), so that a rerun resumes after
    the models it already trained."""
    done = read_training_summary(folder)
    if missing:  # trained again to save them (the model itself comes out the same: saving draws no random numbers)
        log.info("training %s again: its checkpoints after epochs %s are missing", folder, ", ".join(map(str, missing)))
        train()
    elif done is None or not _agrees(done, wanted):
        train()
    else:
        log.info("reusing %s: already trained the same way", folder)
