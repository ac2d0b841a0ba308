"""How token ids become a model's input, for training and scoring alike: right padding, per-sample positions."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch


def pad_batch(sequences: Sequence[Sequence[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids right-padded to the longest sequence, and the attention mask (1 on real tokens)."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
        mask[row, : len(sequence)] = 1
    return ids, mask


def per_sample_position_inputs(model: torch.nn.Module, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Position and token-type ids of shape (B, T), as the model would make them for right-padded input.

    Left to itself a model embeds positions once, (1, T), for the whole batch, and the gradient at
    that embedding is then the batch's sum; per-sample gradients need one row per sample. Positions
    start after the padding index where the position embedding has one (RoBERTa and kin).
    """
    parameters = inspect.signature(model.forward).parameters
    extra = {}
    if "position_ids" in parameters:
        embeddings = getattr(getattr(model, "base_model", model), "embeddings", None)
        padding_idx = getattr(getattr(embeddings, "position_embeddings", None), "padding_idx", None)
        start = 0 if padding_idx is None else padding_idx + 1
        extra["position_ids"] = (start + torch.arange(input_ids.shape[1], device=input_ids.device)).expand_as(input_ids)
    if "token_type_ids" in parameters and getattr(model.config, "type_vocab_size", 0):
        extra["token_type_ids"] = torch.zeros_like(input_ids)
    return extra


def secret_only_labels(batch: dict, secret_ids: torch.Tensor, mask_token_id: int | None) -> dict:
    """The batch with each row that holds a secret token (a new-token canary's) learning those tokens only: labels -100
    elsewhere in the row, and, for a masked LM (`mask_token_id`), the secret tokens masked and the rest shown as they
    are. Panda et al. (ICLR 2025) train canaries so: their whole clipped gradient goes to the secret."""
    labels, ids = batch["labels"], batch["input_ids"]
    original = torch.where(labels != -100, labels, ids)  # a masked LM's collator masked some ids; its labels hold them
    secret = torch.isin(original, secret_ids)
    rows = secret.any(dim=1, keepdim=True)
    if not rows.any():
        return batch
    batch = dict(batch)
    batch["labels"] = torch.where(rows, torch.where(secret, original, -100), labels)
    if mask_token_id is not None:
        batch["input_ids"] = torch.where(rows, torch.where(secret, mask_token_id, original), ids)
    return batch
