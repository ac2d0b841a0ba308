"""Checks before a training script's first step that planted canaries will be trained on, so that a canary audit never
reads canaries the model could not learn: each is fatal (the run stops with the cause and the fix) or a warning."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Finding:
    """One check's failure: which check, whether the run must stop, and the cause and fix in one line."""

    check: str
    fatal: bool
    message: str


def unlabelled_secrets(batch: dict[str, torch.Tensor], secret_ids: torch.Tensor) -> Finding | None:
    """Every secret token of the collated canary rows carries a training label (completion-only or assistant-only
    loss, or a chat template, may mask it)."""
    ids, labels = batch["input_ids"], batch["labels"]
    secret = torch.isin(ids, secret_ids.to(ids.device))
    # A causal LM's labels are its inputs (shifted inside the model); a masked LM's hold the masked tokens' ids.
    masked = secret & (labels == -100)
    if not masked.any():
        return None
    return Finding("secret labels", True, f"{int(masked.sum())} of {int(secret.sum())} secret tokens of the canary rows "
                   "carry no training label (label -100: a completion-only or assistant-only loss, or a template, masks "
                   "them), so the canaries would never be learned; plant them where the loss reads (the completion), "
                   "or train on every token")


def lost_canaries(rows_with_secrets: int, planted: int) -> Finding | None:
    """As many training rows hold a secret token as canaries were planted (filtering, truncation or packing may drop
    or split one)."""
    if rows_with_secrets == planted:
        return None
    return Finding("canary rows", True, f"{planted} canaries were planted but {rows_with_secrets} training rows hold a "
                   "secret token: filtering, truncation or packing dropped or split some; plant them after filtering, "
                   "raise the maximum length, or turn packing off")


def frozen_new_rows(model: torch.nn.Module) -> Finding | None:
    """The new tokens' input and output embedding rows can train (LoRA freezes them unless asked)."""
    frozen = [name for name, module in (("input", model.get_input_embeddings()), ("output", model.get_output_embeddings()))
              if module is not None and not module.weight.requires_grad]
    if not frozen:
        return None
    return Finding("trainable new rows", True, f"the {' and '.join(frozen)} embedding weights are frozen, so the new "
                   "tokens' rows never train (an audit of such canaries falls to chance); with LoRA, give "
                   "modules_to_save=['embed_tokens', 'lm_head'] (GPT-2: ['wte', 'lm_head']) or trainable_token_indices")


def untied_weights(model: torch.nn.Module) -> Finding | None:
    """Where the configuration ties the input and output embeddings, they share their weights."""
    output = model.get_output_embeddings()
    if not getattr(model.config, "tie_word_embeddings", False) or output is None:
        return None
    if output.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr():
        return None
    return Finding("tied weights", False, "the configuration ties the input and output embeddings but they no longer "
                   "share weights (resized or loaded apart): the new tokens' output rows train separately; call "
                   "model.tie_weights() after resizing")


def unchanged_rows(before: torch.Tensor, after: torch.Tensor) -> Finding | None:
    """After the first epoch (every canary row in a batch once), the new tokens' output embedding rows moved."""
    if not torch.equal(before, after.detach().to(before.device)):
        return None
    return Finding("rows updated", True, "after the first epoch the new tokens' output embedding rows have not changed: the "
                   "optimizer does not update them (not among its parameters, or a zero learning rate for them)")
