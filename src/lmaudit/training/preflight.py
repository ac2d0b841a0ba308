"""Checks before a training script's first step that planted canaries will be trained on, so that a canary audit never
reads canaries the model could not learn: each is fatal (the run stops with the cause and the fix) or a warning."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lmaudit.metrics.one_run import provable_ceiling

ENOUGH_PROOF = 2.0  # nats: below this ceiling even a model that memorised every canary could not show it plainly
AUDIT_DELTA = 1e-5  # `lmaudit canaries audit`'s delta for a model without a recorded DP-SGD delta


@dataclass(frozen=True)
class Finding:
    """One check's failure: which check, whether the run must stop, and the cause and fix in one line."""

    check: str
    fatal: bool
    message: str


def unlabelled_secrets(batch: dict[str, torch.Tensor], secret_ids: torch.Tensor) -> Finding | None:
    """Every secret token of the collated canary rows carries a training label (completion-only or assistant-only
    loss, or a chat template, may mask it): new tokens, found by their ids."""
    ids, labels = batch["input_ids"], batch["labels"]
    secret = torch.isin(ids, secret_ids.to(ids.device))
    # A causal LM's labels are its inputs (shifted inside the model); a masked LM's hold the masked tokens' ids.
    return masked_secrets(int((secret & (labels == -100)).sum()), int(secret.sum()))


def unlabelled_spans(batch: dict[str, torch.Tensor], secrets: list[list[int]]) -> Finding | None:
    """Every token of each collated canary row's secret (in-vocabulary tokens, found as the last place one of
    `secrets`' id sequences occurs in the row) carries a training label."""
    from lmaudit.canaries.span import secret_positions

    masked = total = 0
    for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist(), strict=True):
        for secret in secrets:
            positions = secret_positions(ids, secret)
            if positions is not None:
                masked += sum(labels[p] == -100 for p in positions)
                total += len(positions)
                break
    return masked_secrets(masked, total)


def masked_secrets(masked: int, total: int) -> Finding | None:
    """The finding where `masked` of the canary rows' `total` secret tokens carry no label."""
    if not masked:
        return None
    return Finding("secret labels", True, f"{masked} of {total} secret tokens of the canary rows "
                   "carry no training label (label -100: a completion-only or assistant-only loss, or a template, masks "
                   "them), so the canaries would never be learned; plant them where the loss reads (the completion), "
                   "or train on every token")


def lost_canaries(found: int, planted: int, unit: str = "new tokens") -> Finding | None:
    """The training rows hold as many secret tokens (or whole secrets: `unit`) as the planted canaries have (filtering,
    truncation, a chat template or packing may drop or cut some; a canary planted twice adds some)."""
    if found == planted:
        return None
    return Finding("canary rows", True, f"the planted canaries' secrets have {planted} {unit} but the training rows "
                   f"hold {found}: " + ("filtering, truncation, packing or a chat template dropped some; plant them "
                   "after filtering, raise the maximum length, or check that the template keeps every message"
                   if found < planted else "some canaries were planted more than once; plant them once"))


def unreserved_tokens(secret_ids: list[int], unknown_id: int | None, rows: int) -> Finding | None:
    """Every secret token is one id of the tokenizer, below the model's embedding rows `rows` (a tokenizer that never
    reserved the canaries' tokens, or another model's, maps them to its unknown token or to ids the model lacks)."""
    missing = sum(1 for i in secret_ids if i is None or i == unknown_id or i >= rows)
    if not missing:
        return None
    return Finding("canary tokens", True, f"{missing} of {len(secret_ids)} canary tokens are not in this tokenizer's "
                   f"vocabulary or beyond the model's {rows} embedding rows (canaries made for another tokenizer, or "
                   "their tokens never reserved); call add_canary_tokens(model, tokenizer, folder) before tokenizing "
                   "the data, and train with that tokenizer")


def frozen_new_rows(model: torch.nn.Module) -> Finding | None:
    """The new tokens' input and output embedding rows can train (LoRA freezes them unless asked)."""
    frozen = [name for name, module in (("input", model.get_input_embeddings()), ("output", model.get_output_embeddings()))
              if module is not None and not module.weight.requires_grad]
    if not frozen:
        return None
    return Finding("trainable new rows", True, f"the {' and '.join(frozen)} embedding weights are frozen, so the new "
                   "tokens' rows never train (an audit of such canaries falls to chance); with LoRA, keep the recipe and give "
                   "trainable_token_indices (the canary tokens' rows alone: {'embed_tokens': ids, 'lm_head': ids} where "
                   "the two are untied), or modules_to_save=['embed_tokens', 'lm_head'] (GPT-2: ['wte', 'lm_head'])")


def untrained_secret_rows(model: torch.nn.Module, secret_ids: list[int]) -> Finding | None:
    """Where PEFT trains only some tokens' rows (`trainable_token_indices`), the secret tokens are among them, on each
    side it wraps (a tied output side is wrapped with the input one)."""
    sides = []
    for side, module in (("input", model.get_input_embeddings()), ("output", model.get_output_embeddings())):
        adapter = getattr(module, "token_adapter", None)
        if adapter is not None and not set(secret_ids) <= {i for ids in adapter.token_indices.values() for i in ids}:
            sides.append(side)
    if not sides:
        return None
    return Finding("trainable secret rows", True, f"trainable_token_indices leaves some canary tokens' {' and '.join(sides)} "
                   "embedding rows frozen, so they never train; give the ids add_canary_tokens returned, e.g. "
                   "trainable_token_indices=add_canary_tokens(model, tokenizer, folder)")


def trains_some_tokens(module: torch.nn.Module | None) -> bool:
    """Whether PEFT trains only some rows of this embedding (`trainable_token_indices`), keeping tied weights tied
    itself."""
    return getattr(module, "token_adapter", None) is not None


def untied_weights(model: torch.nn.Module) -> Finding | None:
    """Where the configuration ties the input and output embeddings, they share their weights; where they do not
    (PEFT's modules_to_save trains a copy of each), the configuration must stop saying they are tied, or a saved model
    is loaded with its input rows as its output rows."""
    output = model.get_output_embeddings()
    if not getattr(model.config, "tie_word_embeddings", False) or output is None or trains_some_tokens(output):
        return None
    if output.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr():
        return None
    return Finding("tied weights", False, "the configuration ties the input and output embeddings but they are separate "
                   "matrices here (PEFT's modules_to_save trains a copy of each, or they were resized or loaded apart), "
                   "so the new tokens' output rows train apart from their input rows; a model saved still saying "
                   "tie_word_embeddings=true is loaded with its input rows as output rows (transformers before 5), which "
                   "loses what the canaries' output rows learned. The callback sets tie_word_embeddings=false, so that "
                   "every save keeps both; do not call model.tie_weights(), which would overwrite the trained output rows")


def unchanged_rows(before: torch.Tensor, after: torch.Tensor) -> Finding | None:
    """After the first epoch (every canary row in a batch once), the new tokens' output embedding rows moved."""
    if not torch.equal(before, after.detach().to(before.device)):
        return None
    return Finding("rows updated", True, "after the first epoch the new tokens' output embedding rows have not changed: the "
                   "optimizer does not update them (not among its parameters, or a zero learning rate for them)")


def too_few_canaries(canaries: int, delta: float = AUDIT_DELTA) -> Finding | None:
    """The canaries can prove at least ENOUGH_PROOF when every guess is right (half of them, unplanted, are the
    audit's controls: too few of either, and the headline bound is capped whatever the model learned)."""
    ceiling = provable_ceiling(canaries, delta)
    if ceiling >= ENOUGH_PROOF:
        return None
    needed = next(m for m in (2 ** k for k in range(1, 20)) if provable_ceiling(m, delta) >= ENOUGH_PROOF)
    return Finding("enough canaries", False, f"{canaries} canaries can prove at most epsilon {ceiling:.2f} even if "
                   f"the model memorised every one; make at least {needed} (`lmaudit canaries make --n {needed}`) for an "
                   f"audit that can show {ENOUGH_PROOF:g} or more")
