"""White-box features (Jagannatha et al. 2021, Section 4.1.2): attention concentration and per-tensor
squared gradient norms of each sample's own loss.

Samples are batched by exact token length, so there is no padding to exclude and every sample of a
batch has the same number of masked or predicted positions. Per-sample gradients come from
torch.func (vmap over grad of a functional call), in chunks whose per-sample gradient copies fit
a memory budget; the model runs with eager attention, which both returns attention weights and
has batching rules for vmap.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from lmaudit.signals.masks import random_masks
from lmaudit.signals.mlm import EncodedSample, SignalSettings, encode, model_max_length

Family = Literal["mlm", "clm", "classifier"]
CONCENTRATION_STATISTICS = ("mean", "median", "p05", "p95")


def attention_concentration(attention: torch.Tensor) -> torch.Tensor:
    """C(a) = sum_i a_i log a_i of each attention row, with 0 log 0 = 0: shape (..., T, T) -> (..., T). Nats, <= 0."""
    return torch.special.xlogy(attention, attention).sum(-1)


def concentration_summary(concentration: torch.Tensor) -> torch.Tensor:
    """Mean, median, 5th and 95th percentile (linear interpolation) over the last axis: (..., T) -> (..., 4)."""
    quantiles = torch.quantile(concentration.double(), torch.tensor([0.5, 0.05, 0.95], dtype=torch.float64), dim=-1)
    return torch.cat([concentration.double().mean(-1, keepdim=True), quantiles.movedim(0, -1)], dim=-1)


def exact_length_groups(samples: Sequence[EncodedSample]) -> list[list[int]]:
    """Positions of samples grouped by exact input length (shortest first)."""
    groups: dict[int, list[int]] = defaultdict(list)
    for index, sample in enumerate(samples):
        groups[len(sample.input_ids)].append(index)
    return [groups[length] for length in sorted(groups)]


def _eager(model: torch.nn.Module) -> torch.nn.Module:
    if getattr(model.config, "_attn_implementation", "eager") != "eager" and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    return model


@torch.inference_mode()
def attention_features(model: torch.nn.Module, tokenizer, texts: Sequence[str], sample_ids: Sequence[str],
                       settings: SignalSettings, batch_tokens: int = 4096) -> tuple[np.ndarray, list[EncodedSample]]:
    """Per sample, layers x heads x (mean, median, p05, p95) of C(a) over its tokens, flattened; and the encodings."""
    model = _eager(model)
    device = next(model.parameters()).device
    samples = encode(tokenizer, texts, sample_ids, settings.max_length or model_max_length(model.config, tokenizer))
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    features = np.zeros((len(samples), layers * heads * len(CONCENTRATION_STATISTICS)))
    for group in exact_length_groups(samples):
        per_batch = max(1, batch_tokens // len(samples[group[0]].input_ids))
        for start in range(0, len(group), per_batch):
            batch = group[start : start + per_batch]
            ids = torch.from_numpy(np.stack([samples[i].input_ids for i in batch])).to(device)
            attentions = model(input_ids=ids, output_attentions=True).attentions  # layers x (B, H, T, T)
            stacked = torch.stack(attentions, dim=1).float()  # (B, L, H, T, T)
            summary = concentration_summary(attention_concentration(stacked))  # (B, L, H, 4)
            features[batch] = summary.reshape(len(batch), -1).cpu().numpy()
    return features, samples


def gradient_feature_names(model: torch.nn.Module) -> list[str]:
    """The trainable parameter tensors, in the order of the gradient features (tied tensors once)."""
    return [name for name, parameter in model.named_parameters() if parameter.requires_grad]


def _family_loss(model: torch.nn.Module, family: Family):
    """loss(params, buffers, input_ids (T,), target) of one sample, as the model family's signal defines it.

    mlm: target = (masked positions (l,), original tokens (l,)); input_ids already carry the mask
    tokens; mean NLL over the masked positions (Jagannatha's MLM loss, the energy with k = 1 and
    normalize = mean). clm: mean next-token NLL. classifier: target = the label index; cross-entropy.
    Embeddings are looked up here and passed as inputs_embeds, because transformers' input_ids
    checks are data-dependent Python control flow that vmap cannot trace.
    """
    embedding_name = next(name for name, p in model.named_parameters() if p is model.get_input_embeddings().weight)
    extra = {"use_cache": False} if family == "clm" else {}

    def loss(params, buffers, input_ids, target):
        embeds = torch.nn.functional.embedding(input_ids, params[embedding_name])[None]
        logits = functional_call(model, (params, buffers), args=(), kwargs={"inputs_embeds": embeds, **extra}).logits[0]
        if family == "classifier":
            return -torch.log_softmax(logits.float(), dim=-1)[target]
        if family == "clm":
            log_probs = torch.log_softmax(logits[:-1].float(), dim=-1)
            return -log_probs.gather(1, input_ids[1:, None]).mean()
        positions, tokens = target
        log_probs = torch.log_softmax(logits[positions].float(), dim=-1)
        return -log_probs.gather(1, tokens[:, None]).mean()

    return loss


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
                      settings: SignalSettings, batch_tokens: int = 4096, family: Family = "mlm",
                      labels: np.ndarray | None = None, memory_bytes: int = 1 << 30) -> tuple[np.ndarray, list[EncodedSample]]:
    """Per sample, the squared L2 norm of the gradient of its own loss for each trainable tensor; and the encodings.

    Per-sample gradients are computed together (vmap) for up to `batch_tokens` tokens and `memory_bytes`
    of gradient copies at a time.
    """
    model = _eager(model).eval()
    device = next(model.parameters()).device
    samples = encode(tokenizer, texts, sample_ids, settings.max_length or model_max_length(model.config, tokenizer))
    names = gradient_feature_names(model)
    params = {name: p.detach() for name, p in model.named_parameters() if name in set(names)}
    buffers = dict(model.named_buffers())
    n_values = sum(p.numel() for p in params.values())
    per_chunk = max(1, memory_bytes // (4 * n_values))
    per_sample_grad = vmap(grad(_family_loss(model, family)), in_dims=(None, None, 0, 0))
    features = np.zeros((len(samples), len(names)))
    for group in exact_length_groups(samples):
        chunk = max(1, min(per_chunk, batch_tokens // len(samples[group[0]].input_ids)))
        for start in range(0, len(group), chunk):
            batch = group[start : start + chunk]
            inputs, targets = _inputs_and_targets(samples, batch, family, settings, tokenizer.mask_token_id, labels)
            targets = tuple(t.to(device) for t in targets) if isinstance(targets, tuple) else targets.to(device)
            grads = per_sample_grad(params, buffers, inputs.to(device), targets)
            features[batch] = torch.stack([grads[name].flatten(1).double().pow(2).sum(1) for name in names], 1).cpu().numpy()
    return features, samples
