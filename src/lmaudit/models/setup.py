"""What language-model and classifier training share before their first step: the samples DP-SGD keeps, the starting
model (from scratch, or a checkpoint fully or with LoRA adapters), the optimizer, DP-SGD, and length-bucketed batches."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from lmaudit.errors import InputError
from lmaudit.models import quiet_transformers
from lmaudit.models.architectures import classifier_model, language_model
from lmaudit.models.dp import PrivateTraining, cap_samples_per_group, make_private, resolve_noise
from lmaudit.models.load import resolve_device
from lmaudit.models.lstm import swap_lstm
from lmaudit.models.pretrained import load_checkpoint, with_lora
from lmaudit.models.recipe import TRAINING_PRECISIONS, TrainingRecipe
from lmaudit.models.text import model_max_length
from lmaudit.models.tokenizer import load_tokenizer, reserve_tokens, train_tokenizer


@dataclass
class TrainingSetup:
    """A model ready for its first step: the model (with LoRA adapters when asked), its tokenizer, the input length it
    trains on, what the training summary records about its start, the learning rate, the optimizer and, under
    DP-SGD, the private model, optimizer and batches; the device it trains on and its forward passes' precision."""

    model: torch.nn.Module
    tokenizer: object
    max_length: int
    start: dict
    learning_rate: float
    optimizer: torch.optim.Optimizer
    private: PrivateTraining | None
    device: str = "cpu"
    precision: str = "fp32"

    def on_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A batch's tensors where the model trains (batches are built on the CPU)."""
        return {key: value.to(self.device, non_blocking=True) for key, value in batch.items()}

    def forward_precision(self) -> torch.autocast:
        """The forward passes' precision: bf16 autocast on the training device, or none (fp32)."""
        return torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16, enabled=self.precision == "bf16")


def kept_samples(recipe: TrainingRecipe, groups: Sequence[str | None] | None, n_samples: int) -> np.ndarray:
    """Positions of the training samples that train: all of them, or under DP-SGD at most the recipe's cap per group
    (patient, user; a seeded choice), so that one person's contribution is bounded."""
    if recipe.dp is None:
        return np.arange(n_samples)
    return cap_samples_per_group(list(groups) if groups is not None else [None] * n_samples,
                                 recipe.dp.max_samples_per_group, recipe.seed)


def starting_model(kind: str, texts: Sequence[str], recipe: TrainingRecipe,
                   labels: list[str] | None = None) -> tuple[torch.nn.Module, object, int, dict]:
    """(model, tokenizer, max_length, what the summary records): a checkpoint's model and tokenizer (with LoRA adapters
    when asked; a classifier gets a new head for `labels`), or a new model of the recipe's size (a classifier of its
    architecture, for `labels`) on the recipe's tokenizer or one trained on `texts`."""
    if recipe.lora is not None and recipe.init_from is None:
        raise InputError("--lora needs --init-from: LoRA adapters fine-tune a pretrained model")
    if recipe.init_from is None:
        tokenizer = (reserve_tokens(load_tokenizer(recipe.tokenizer_dir), recipe.reserved_tokens)
                     if recipe.tokenizer_dir is not None else
                     train_tokenizer(texts, recipe.vocab_size, recipe.max_length, recipe.tokenization,
                                     recipe.reserved_tokens))
        if kind == "classifier":
            model = classifier_model(recipe.architecture, recipe.size, tokenizer, labels, recipe.max_length, recipe.dropout)
        else:
            model = language_model(kind, recipe.size, tokenizer, recipe.max_length, recipe.dropout)
        return model, tokenizer, recipe.max_length, {}
    if recipe.tokenizer_dir is not None:
        raise InputError("--tokenizer with --init-from: a checkpoint brings its own tokenizer; give one of them")
    checkpoint = load_checkpoint(recipe.init_from, kind, labels)
    if recipe.reserved_tokens:
        if recipe.lora is not None:
            raise InputError("new-token canaries with --lora: LoRA leaves the embeddings frozen, so the new tokens would "
                             "never train; plant --design secret canaries, or fine-tune fully")
        reserve_tokens(checkpoint.tokenizer, recipe.reserved_tokens)
        # New rows start at the mean of the others (transformers' default), so a planted token has no head start.
        checkpoint.model.resize_token_embeddings(len(checkpoint.tokenizer))
    model = with_lora(checkpoint, kind, recipe.lora) if recipe.lora is not None else checkpoint.model
    max_length = min(recipe.max_length, model_max_length(checkpoint.model.config, checkpoint.tokenizer))
    lora = None if recipe.lora is None else {**asdict(recipe.lora), "alpha": recipe.lora.alpha or 2 * recipe.lora.rank}
    record = {**checkpoint.record, "size": "pretrained", "dropout": None, "lora": lora}
    return model, checkpoint.tokenizer, max_length, record


def set_up_training(kind: str, texts: Sequence[str], recipe: TrainingRecipe, labels: list[str] | None = None) -> TrainingSetup:
    """The starting model of a `kind` model ('mlm', 'clm', 'classifier' with `labels`) to be trained on `texts` (the
    kept ones), its AdamW optimizer (weight decay 0.01, on the weights that train), and DP-SGD when the recipe asks."""
    if recipe.precision not in TRAINING_PRECISIONS:
        raise InputError(f"--dtype {recipe.precision}: training runs in {' or '.join(TRAINING_PRECISIONS)} (fp16 would need "
                         "loss scaling); give --dtype bf16 for half-precision forward passes")
    device = resolve_device(recipe.device)
    quiet_transformers()
    torch.manual_seed(recipe.seed)
    model, tokenizer, max_length, start = starting_model(kind, texts, recipe, labels)
    if recipe.dp is not None:
        swap_lstm(model, private=True)  # Opacus computes per-sample gradients of its DPLSTM, not of torch's LSTM
    model.to(device)  # before the optimizer and DP-SGD see its parameters
    learning_rate = recipe.peak_learning_rate()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate, weight_decay=0.01, foreach=True)
    private = (make_private(model, optimizer, len(texts), recipe.batch_size,
                            resolve_noise(recipe.dp, len(texts), recipe.batch_size, recipe.epochs), recipe.seed)
               if recipe.dp is not None else None)
    return TrainingSetup(model=model, tokenizer=tokenizer, max_length=max_length, start=start,
                         learning_rate=learning_rate, optimizer=optimizer, private=private, device=device,
                         precision=recipe.precision)


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


OUT_OF_MEMORY = ("training ran out of GPU memory; give a smaller --batch-size or --max-length, --dtype bf16, --lora "
                 "(with --init-from), or --device cpu")


def refusing_out_of_memory(train: Callable) -> Callable:
    """`train`, with a GPU's out-of-memory error turned into the one-line InputError that says what to change."""
    @functools.wraps(train)
    def guarded(*args, **kwargs):
        try:
            return train(*args, **kwargs)
        except torch.cuda.OutOfMemoryError:
            raise InputError(OUT_OF_MEMORY) from None
    return guarded
