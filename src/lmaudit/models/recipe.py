"""How a model is trained: one recipe for language models and classifiers alike, with its DP-SGD and LoRA settings.

No torch: the command line builds a recipe from its options, and a demo or study compares a trained model's summary with
the recipe it wants (`recorded`) before deciding to train again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from lmaudit.errors import InputError

# The sizes of the models trained from scratch: layers, hidden width, attention heads, feed-forward width.
SIZES = {
    "tiny": (2, 64, 2, 256),
    "mini": (2, 128, 4, 512),
    "small": (4, 256, 4, 1024),
}
ARCHITECTURES = ("bert", "lstm")
TRAINING_PRECISIONS = ("fp32", "bf16")  # of the forward passes; the weights and the optimizer's state stay fp32  # of the classifiers trained from scratch
DEFAULT_GRADIENT_CANARIES = 2000  # of --audit-dp: each one coordinate; more tighten the bound at no cost in steps


@dataclass(frozen=True)
class DPSettings:
    """DP-SGD settings: noise multiplier (sigma; None with `target_epsilon`: the sigma at which the whole run spends
    that epsilon at `delta`, found when training starts, `models/dp.py:resolve_noise`), per-sample clipping norm, delta,
    the per-group cap, and the gradient canaries of the white-box audit of DP-SGD itself (0: none;
    `models/gradient_canaries.py`)."""

    noise_multiplier: float | None
    max_grad_norm: float = 1.0
    delta: float = 1e-5
    max_samples_per_group: int | None = None
    gradient_canaries: int = 0
    target_epsilon: float | None = None

    def recorded(self) -> dict:
        """What a trained model's summary records of these settings (the sigma found for a target epsilon is the
        run's, so only the target is compared)."""
        return {key: value for key, value in asdict(self).items()
                if not (key == "noise_multiplier" and self.target_epsilon is not None)}

    def refuse_ungrouped(self, ungrouped: Sequence[bool], source: str) -> None:
        """InputError where the per-group cap is asked for and rows of `source` have no group_id (`ungrouped`, one flag
        per row in order): the cap cannot bound them, so the epsilon recorded would claim a bound per person that fails."""
        cap = self.max_samples_per_group
        lacking = [row for row, missing in enumerate(ungrouped, start=1) if missing]
        if cap is None or not lacking:
            return
        if len(lacking) == len(ungrouped):
            raise InputError(f"--max-samples-per-group {cap}: no row of {source} has a group_id, so none would be "
                             "capped; add a group_id column (the patient or user of each row), or drop "
                             "--max-samples-per-group")
        raise InputError(f"--max-samples-per-group {cap}: {len(lacking)} of the {len(ungrouped)} rows of {source} "
                         f"{'has' if len(lacking) == 1 else 'have'} no group_id (first: row {lacking[0]}), and a row "
                         "without one is never capped; fill in their group_id, or drop --max-samples-per-group")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapters on every linear layer of the transformer blocks: rank, scaling alpha (default 2 x rank), dropout."""

    rank: int = 8
    alpha: float | None = None
    dropout: float = 0.05


@dataclass(frozen=True)
class TrainingRecipe:
    """Everything that decides how a model trains besides its data.

    From scratch: a model of `size` (a classifier of `architecture`) on the tokenizer of `tokenizer_dir`, or on one
    trained on the texts (`tokenization`, at most `vocab_size` tokens). From a checkpoint: `init_from`, fully or with
    `lora` adapters; the checkpoint brings its own architecture and tokenizer. AdamW at `learning_rate` (None: the
    default of the start, `peak_learning_rate`) for `epochs` epochs (a classifier's at most: it stops after `patience`
    epochs without a better validation accuracy), batches of `batch_size`, inputs cut to `max_length` tokens; with `dp`,
    DP-SGD. After each epoch in `checkpoints` the model as it is then is saved beside it as well. `reserved_tokens` are
    added to the vocabulary and occur in no training text but the planted canaries' (new-token canaries), which learn
    them alone (`models/inputs.py:secret_only_labels`).
    """

    size: str = "tiny"
    epochs: int = 30
    seed: int = 0
    batch_size: int = 32
    learning_rate: float | None = None
    max_length: int = 128
    dropout: float = 0.1
    tokenizer_dir: str | Path | None = None
    tokenization: str = "wordpiece"
    vocab_size: int = 4000
    init_from: str | Path | None = None
    lora: LoraSettings | None = None
    dp: DPSettings | None = None
    checkpoints: tuple[int, ...] = ()
    architecture: str = "bert"
    patience: int = 5
    reserved_tokens: tuple[str, ...] = ()
    device: str = "auto"  # where it trains: cpu, cuda, or auto (cuda when available), as an audit's --device
    precision: str = "fp32"  # or bf16: bf16 autocast around each forward pass, the weights and optimizer in fp32

    def peak_learning_rate(self) -> float:
        """AdamW's peak learning rate: the recipe's, else 2e-3 from scratch (tiny models), 5e-5 to fine-tune a checkpoint
        fully (BERT's and GPT-2's fine-tuning range), 2e-4 for LoRA adapters (the LoRA paper's range)."""
        if self.learning_rate:
            return self.learning_rate
        if self.init_from is None:
            return 2e-3
        return 2e-4 if self.lora is not None else 5e-5

    def recorded(self, kind: str, n_texts: int) -> dict:
        """What the training summary of a `kind` model trained with this recipe on `n_texts` texts records of it: a
        trained model is reused only when its summary agrees with every entry."""
        pretrained = self.init_from is not None
        fields = {"kind": kind, "seed": self.seed, "batch_size": self.batch_size, "max_length": self.max_length,
                  "learning_rate": self.peak_learning_rate(), "dp": None if self.dp is None else self.dp.recorded(),
                  "init_from": str(self.init_from) if pretrained else None,
                  # A checkpoint brings its own size and dropout, which the summary records as such.
                  "size": "pretrained" if pretrained else self.size, "dropout": None if pretrained else self.dropout}
        if self.dp is None:  # DP-SGD caps each patient or user, so its count is not that of the texts given
            fields["n_samples"] = n_texts
        if kind != "classifier":
            return fields | {"epochs": self.epochs}
        fields |= {"max_epochs": self.epochs, "patience": self.patience}
        if not pretrained:
            fields["architecture"] = self.architecture
            if self.tokenizer_dir is None:
                fields |= {"tokenization": self.tokenization, "vocab_size": self.vocab_size}
        return fields
