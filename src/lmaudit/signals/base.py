"""What every signal shares: its spec, its settings, tokenized samples, and the batching helpers scorers use.

A signal is a number (or vector) per sample in its natural unit, computed from one model. This
module imports no torch, so the configuration and the command line can list and validate signals
without loading it; the scorers themselves live one module per signal (see `registry.py`).
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from lmaudit.errors import InputError
from lmaudit.models.text import model_max_length, text_heads

PRECISIONS = ("fp32", "bf16", "auto")  # of the matrix multiplies; log-softmax is always fp32
DEVICES = ("cpu", "cuda", "auto")
ModelKind = Literal["mlm", "clm", "classifier", "any"]
Output = Literal["loss", "tokens", "log_probabilities", "features"]
# A per-token signal's stored value, per sample: these rows, one column per scored token, flattened.
TOKEN_FIELDS = ("log_prob", "mean", "std", "token_id")


@dataclass(frozen=True)
class SignalSpec:
    """A registered signal: what model it needs, what it outputs and in which unit, and where its scorer is.

    model_kind "any" means the model's own family (white-box features exist for every family).
    output "loss": one number per sample, lower = the model finds the sample likelier (audited as an LM);
    "tokens": per-token values of an LM (TOKEN_FIELDS), from which the sample's loss is their mean NLL;
    "log_probabilities": a classifier's log-probability of every label; "features": a feature vector.
    A scorer is named "module:function" and imported only when a model is scored, so listing the signals
    never imports torch. It is called as scorer(model, tokenizer, texts, sample_ids, settings, progress)
    and returns (values, encoded samples); `joint_scorer` does the same for several models that share a
    tokenizer, on the same batches. A label-dependent signal of a classifier (its gradient) also takes the
    samples' label indices, `labels=`, and is stored under the text and the label. `loss_signal`: for a per-token
    signal, the signal that gives only its loss (for passes that need no more). `squared_gradient_norms`: the feature
    vector holds squared gradient norms, whose roots are what GradNorm reads.
    """

    name: str
    model_kind: ModelKind
    output: Output
    unit: str
    description: str
    scorer: str
    joint_scorer: str | None = None
    default_normalize: Literal["sum", "mean"] | None = None
    needs_attention: bool = False
    label_dependent: bool = False
    loss_signal: str | None = None
    squared_gradient_norms: bool = False

    def scoring_function(self, joint: bool = False) -> Callable:
        """The scorer (or the joint scorer) itself."""
        module, function = (self.joint_scorer if joint else self.scorer).split(":")
        return getattr(importlib.import_module(module), function)


class SignalSettings(BaseModel):
    """Everything that determines a signal's value besides the model and the text, and the token budget of a batch
    (which does not change the value). Mask settings apply to the MLM signals only."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    signal: str = "mlm_energy"
    k: int = Field(10, ge=1)
    masks: Literal["random", "all"] = "random"
    normalize: Literal["sum", "mean"] | None = None
    mask_fraction: float = Field(0.15, gt=0, le=1)
    seed: int = 0
    max_length: int | None = Field(None, ge=3)
    all_masks_cap: int = Field(5000, ge=1)
    precision: Literal[PRECISIONS] = "fp32"
    batch_tokens: int = Field(4096, ge=64)

    def value_key(self) -> dict:
        """The settings a stored value depends on (all but the batch size)."""
        return self.model_dump(exclude={"batch_tokens"})


@dataclass(frozen=True)
class EncodedSample:
    """One tokenized sample: its ids (with special tokens) and where its content tokens sit."""

    sample_id: str
    input_ids: np.ndarray
    content_positions: np.ndarray
    n_tokens: int
    truncated: bool


def encode(tokenizer, texts: Sequence[str], sample_ids: Sequence[str], max_length: int) -> list[EncodedSample]:
    """Tokenize with truncation to `max_length`, recording the content length before truncation (counted in the part of
    a text that `text_heads` keeps: at least max_length tokens for a text that is truncated)."""
    heads, full = text_heads(tokenizer, texts, max_length)
    batch = tokenizer(heads, truncation=True, max_length=max_length, return_special_tokens_mask=True)
    encoded = []
    for sample_id, ids, special, untruncated in zip(sample_ids, batch["input_ids"], batch["special_tokens_mask"], full, strict=True):
        content = np.flatnonzero(np.asarray(special) == 0)
        if len(content) == 0:
            raise InputError(f"sample '{sample_id}': the tokenizer makes no tokens of its text; remove the sample")
        encoded.append(EncodedSample(
            sample_id=sample_id,
            input_ids=np.asarray(ids, dtype=np.int64),
            content_positions=content,
            n_tokens=len(untruncated),
            truncated=len(content) < len(untruncated),
        ))
    return encoded


def encode_for(model, tokenizer, texts: Sequence[str], sample_ids: Sequence[str], settings: SignalSettings) -> list[EncodedSample]:
    """Encode for one model: truncated to `settings.max_length`, else to what the model accepts."""
    return encode(tokenizer, texts, sample_ids, settings.max_length or model_max_length(model.config, tokenizer))


def has_fast_bf16(device_type: str) -> bool:
    """CUDA, or a CPU with native bf16 matrix instructions (AVX512_BF16 or AMX)."""
    if device_type == "cuda":
        return True
    try:
        with open("/proc/cpuinfo") as handle:
            flags = handle.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device_type: str) -> str:
    """'auto' becomes bf16 where the hardware has fast bf16, else fp32."""
    if precision == "auto":
        return "bf16" if has_fast_bf16(device_type) else "fp32"
    return precision


def length_sorted_batches(samples: Sequence[EncodedSample], batch_tokens: int, prefix_tokens: int = 0) -> list[list[int]]:
    """Sample positions in batches of similar length whose padded size (with `prefix_tokens` put before every sample)
    stays within `batch_tokens`."""
    order = sorted(range(len(samples)), key=lambda i: len(samples[i].input_ids))
    batches, current, longest = [], [], 0
    for index in order:
        longest = max(longest, prefix_tokens + len(samples[index].input_ids))
        if current and longest * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest = [], prefix_tokens + len(samples[index].input_ids)
        current.append(index)
    return batches + ([current] if current else [])


def exact_length_groups(samples: Sequence[EncodedSample]) -> list[list[int]]:
    """Positions of samples grouped by exact input length (shortest first): batches with no padding."""
    groups: dict[int, list[int]] = defaultdict(list)
    for index, sample in enumerate(samples):
        groups[len(sample.input_ids)].append(index)
    return [groups[length] for length in sorted(groups)]


def refuse_single_token(samples: Sequence[EncodedSample]) -> None:
    """A causal LM predicts nothing in a one-token sample: refuse it by name."""
    short = next((sample for sample in samples if len(sample.input_ids) < 2), None)
    if short is not None:
        raise InputError(f"sample '{short.sample_id}': one token only, so a causal LM predicts nothing in it; "
                         "remove the sample or give it more text")


def pack_token_values(statistics: np.ndarray, token_ids: np.ndarray) -> np.ndarray:
    """One sample's per-token values as stored: (3, T) log p, mean, std and the T token ids -> (4 * T,) float64."""
    return np.concatenate([np.asarray(statistics, dtype=np.float64), np.asarray(token_ids, dtype=np.float64)[None]]).ravel()


def unpack_token_values(stored: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Stored per-token values of n samples -> TOKEN_FIELDS name -> (n, T) array, NaN-padded to the longest sample."""
    rows = [np.asarray(value, dtype=np.float64).reshape(len(TOKEN_FIELDS), -1) for value in stored]
    width = max((row.shape[1] for row in rows), default=0)
    table = np.full((len(TOKEN_FIELDS), len(rows), width), np.nan)
    for index, row in enumerate(rows):
        table[:, index, : row.shape[1]] = row
    return dict(zip(TOKEN_FIELDS, table, strict=True))


def progress_bar(items: Iterable, total: int, description: str, enabled: bool, unit: str = "batch"):
    """A transient progress bar over `items` within one stored chunk (off unless `enabled` and on a terminal)."""
    return tqdm(items, total=total, desc=description, unit=unit, disable=not enabled or None, leave=False)
