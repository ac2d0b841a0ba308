"""White-box features (Jagannatha et al. 2021, Section 4.1.2): attention concentration and per-tensor
squared gradient norms of each sample's own loss.

Samples are batched by exact token length, so there is no padding to exclude and every sample of a
batch has the same number of masked or predicted positions. The per-sample gradient norms come
from one batched backward pass (`gradnorms.py`); attention weights need eager attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from lmaudit.errors import InputError
from lmaudit.models.config_json import family_of
from lmaudit.models.heads import input_device
from lmaudit.models.inputs import per_sample_position_inputs
from lmaudit.signals.base import EncodedSample, encode_for, exact_length_groups, progress_bar, refuse_single_token
from lmaudit.signals.gradnorms import UnsupportedLayer, per_sample_squared_norms
from lmaudit.signals.masks import random_masks
from lmaudit.signals.registry import resolved
from lmaudit.signals.settings import SignalSettings

Family = Literal["mlm", "clm", "classifier"]
CONCENTRATION_STATISTICS = ("mean", "median", "p05", "p95")


def attention_concentration(attention: torch.Tensor) -> torch.Tensor:
    """C(a) = sum_i a_i log a_i of each attention row, with 0 log 0 = 0: shape (..., T, T) -> (..., T). Nats, <= 0."""
    return torch.special.xlogy(attention, attention).sum(-1)


def concentration_summary(concentration: torch.Tensor) -> torch.Tensor:
    """Mean, median, 5th and 95th percentile (linear interpolation) over the last axis: (..., T) -> (..., 4)."""
    quantiles = torch.quantile(concentration.double(), torch.tensor([0.5, 0.05, 0.95], dtype=torch.float64,
                                                                          device=concentration.device), dim=-1)
    return torch.cat([concentration.double().mean(-1, keepdim=True), quantiles.movedim(0, -1)], dim=-1)


def _eager(model: torch.nn.Module) -> torch.nn.Module:
    if getattr(model.config, "_attn_implementation", "eager") != "eager" and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    return model


def attention_features(model: torch.nn.Module, tokenizer, texts: Sequence[str], sample_ids: Sequence[str],
                       settings: SignalSettings, progress: bool = False) -> tuple[np.ndarray, list[EncodedSample]]:
    """Per sample, layers x heads x (mean, median, p05, p95) of C(a) over its tokens, flattened; and the encodings."""
    settings = resolved(settings, input_device(model).type)
    samples = encode_for(model, tokenizer, texts, sample_ids, settings)
    return attention_features_of(model, samples, settings.batch_tokens, progress), samples


@torch.inference_mode()
def attention_features_of(model: torch.nn.Module, samples: Sequence[EncodedSample], batch_tokens: int = 4096,
                          progress: bool = False) -> np.ndarray:
    """attention_features for encoded samples: (samples, layers * heads * 4)."""
    model = _eager(model).eval()
    device = input_device(model)
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    features = np.zeros((len(samples), layers * heads * len(CONCENTRATION_STATISTICS)))
    groups = exact_length_groups(samples)
    for group in progress_bar(groups, len(groups), "attention, by length", progress, unit="length"):
        per_batch = max(1, batch_tokens // len(samples[group[0]].input_ids))
        for start in range(0, len(group), per_batch):
            batch = group[start : start + per_batch]
            ids = torch.from_numpy(np.stack([samples[i].input_ids for i in batch])).to(device)
            attentions = model(input_ids=ids, output_attentions=True).attentions  # layers x (B, H, T, T)
            # One layer at a time: (B, H, T) concentrations, then (B, H, 4) statistics.
            summary = torch.stack([concentration_summary(attention_concentration(layer.float())) for layer in attentions], 1)
            features[batch] = summary.reshape(len(batch), -1).cpu().numpy()
    return features


def gradient_feature_names(model: torch.nn.Module) -> list[str]:
    """The trainable parameter tensors, in the order of the gradient features (tied tensors once)."""
    return [name for name, parameter in model.named_parameters() if parameter.requires_grad]


def _batch_losses(model: torch.nn.Module, family: Family, input_ids: torch.Tensor, target,
                  explicit_positions: bool = True) -> torch.Tensor:
    """Each sample's own loss (B,), as the model family's signal defines it.

    mlm: target = (masked positions (B, l), original tokens (B, l)); input_ids already carry the
    mask tokens; mean NLL over the masked positions (Jagannatha's MLM loss: the energy with k = 1
    and normalize = mean). clm: mean next-token NLL. classifier: target = label indices; cross-entropy.
    """
    extra = per_sample_position_inputs(model, input_ids) if explicit_positions else {}
    extra |= {"use_cache": False} if family == "clm" else {}
    logits = model(input_ids=input_ids, **extra).logits
    if family == "classifier":
        return -torch.log_softmax(logits.float(), dim=-1).gather(1, target[:, None])[:, 0]
    if family == "clm":
        log_probs = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        return -log_probs.gather(2, input_ids[:, 1:, None])[..., 0].mean(1)
    positions, tokens = target
    selected = logits.gather(1, positions[..., None].expand(-1, -1, logits.shape[-1]))
    return -torch.log_softmax(selected.float(), dim=-1).gather(2, tokens[..., None])[..., 0].mean(1)


@torch.inference_mode()
def _explicit_positions_agree(model: torch.nn.Module, input_ids: torch.Tensor) -> bool:
    """Whether the model gives the same logits with the explicit ids as with its own (checked once per model)."""
    extra = per_sample_position_inputs(model, input_ids)
    if not extra:
        return True
    own, explicit = model(input_ids=input_ids).logits, model(input_ids=input_ids, **extra).logits
    return bool(torch.allclose(own.float(), explicit.float(), rtol=1e-4, atol=1e-5))


def _one_backward_per_sample(model: torch.nn.Module, losses_of, names: list[str], count: int) -> torch.Tensor:
    """The fallback for layers without a batched rule: one backward pass per sample."""
    parameters = dict(model.named_parameters())
    rows = []
    for index in range(count):
        # cuDNN refuses the backward pass of an RNN in eval mode; the plain kernels give the same gradient.
        with torch.enable_grad(), torch.backends.cudnn.flags(enabled=False):
            grads = torch.autograd.grad(losses_of([index]).sum(), [parameters[n] for n in names], allow_unused=True)
        rows.append(torch.stack([g.double().pow(2).sum() if g is not None else torch.zeros((), dtype=torch.float64)
                                 for g in grads]))
    return torch.stack(rows)


def _inputs_and_targets(samples: Sequence[EncodedSample], batch: list[int], family: Family, settings: SignalSettings,
                        mask_token_id: int | None, labels: np.ndarray | None):
    ids = torch.from_numpy(np.stack([samples[i].input_ids for i in batch]))
    if family == "classifier":
        return ids, torch.from_numpy(labels[batch])
    if family == "clm":
        return ids, torch.zeros(len(batch), dtype=torch.long)
    positions = torch.from_numpy(np.stack([
        samples[i].content_positions[random_masks(samples[i].sample_id, len(samples[i].content_positions), 1, settings.seed,
                                                  settings.mask_fraction)[0]]
        for i in batch
    ]))
    tokens = ids.gather(1, positions)
    masked = ids.scatter(1, positions, mask_token_id)
    return masked, (positions, tokens)


def gradient_features(model: torch.nn.Module, tokenizer, texts: Sequence[str], sample_ids: Sequence[str],
                      settings: SignalSettings, progress: bool = False, labels: np.ndarray | None = None,
                      memory_bytes: int = 1 << 30) -> tuple[np.ndarray, list[EncodedSample]]:
    """Per sample, the squared L2 norm of the gradient of its own loss for each trainable tensor; and the encodings.

    The loss is the model family's (`_batch_losses`); a classifier's needs the samples' label indices
    (`labels`). Samples share a backward pass up to `settings.batch_tokens` tokens and about
    `memory_bytes` of per-sample intermediates.
    """
    settings = resolved(settings, input_device(model).type)
    samples = encode_for(model, tokenizer, texts, sample_ids, settings)
    features = gradient_features_of(model, samples, settings, tokenizer.mask_token_id, labels, memory_bytes, progress)
    return features, samples


def gradient_features_of(model: torch.nn.Module, samples: Sequence[EncodedSample], settings: SignalSettings,
                         mask_token_id: int | None = None, labels: np.ndarray | None = None, memory_bytes: int = 1 << 30,
                         progress: bool = False) -> np.ndarray:
    """gradient_features for encoded samples: (samples, trainable tensors)."""
    family = family_of([type(model).__name__])
    if family is None:
        raise InputError(f"{type(model).__name__} is not a masked LM, causal LM or sequence classifier; "
                         "gradient features need one of those")
    model = model.eval()
    device = input_device(model)
    names = gradient_feature_names(model)
    # Per-sample float64 intermediates (a formed weight gradient, output-layer gradients) stay within about
    # the size of the largest tensor: bound how many samples share a backward pass.
    largest = max(p.numel() for p in model.parameters())
    per_chunk = max(1, memory_bytes // (8 * largest))
    if family == "clm":
        refuse_single_token(samples)
    features = np.zeros((len(samples), len(names)))
    explicit = None
    groups = exact_length_groups(samples)
    for group in progress_bar(groups, len(groups), "gradients, by length", progress, unit="length"):
        chunk = max(1, min(per_chunk, settings.batch_tokens // len(samples[group[0]].input_ids)))
        for start in range(0, len(group), chunk):
            batch = group[start : start + chunk]
            inputs, targets = _inputs_and_targets(samples, batch, family, settings, mask_token_id, labels)
            inputs = inputs.to(device)
            targets = tuple(t.to(device) for t in targets) if isinstance(targets, tuple) else targets.to(device)

            if explicit is None:  # explicit per-sample positions, unless they would change what the model computes
                explicit = _explicit_positions_agree(model, inputs[:1])

            def losses_of(rows, inputs=inputs, targets=targets, explicit=explicit):
                picked = tuple(t[rows] for t in targets) if isinstance(targets, tuple) else targets[rows]
                return _batch_losses(model, family, inputs[rows], picked, explicit)

            try:
                norms = per_sample_squared_norms(model, lambda: losses_of(slice(None)), names)
            except UnsupportedLayer:
                norms = _one_backward_per_sample(model, losses_of, names, len(batch))
            features[batch] = norms.cpu().numpy()
    return features
