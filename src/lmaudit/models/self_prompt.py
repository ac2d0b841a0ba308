"""SPV-MIA's self-prompt reference (Fu et al., NeurIPS 2024): the public base model fine-tuned on text the target
itself writes. Each prompt is the first `prompt_tokens` (16) tokens of a public text, which the target continues by
sampling (top-k 50, temperature 1, the authors' `generate` defaults) to that text's own length; the base is then
fine-tuned on the prompts with their continuations. The reference so learns the target's distribution without any
audited text, and what it has not learned is what the target memorised.

The authors fine-tune the reference for 2 epochs at lr 5e-5 (their target: 10 epochs at 1e-4); `self_prompt_recipe`
keeps that ratio to a full fine-tune's recipe when one is known (the fine-tuning suite's) and the authors' values
otherwise. The reference is always a full fine-tune, a LoRA target's too.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.models.recipe import TrainingRecipe
from lmaudit.models.source import DEFAULT_PLACEMENT, ModelSource, Placement

SAMPLING = {"temperature": 1.0, "top_k": 50, "top_p": 1.0}
PROMPT_TOKENS = 16
# The authors' reference: 2 epochs at 5e-5, against their target's 10 at 1e-4 (a fifth of the epochs, half the rate).
PAPER_EPOCHS = 2
PAPER_LEARNING_RATE = 5e-5
EPOCH_SHARE = 0.2
LEARNING_RATE_SHARE = 0.5


@dataclass(frozen=True)
class SelfPromptSettings:
    """How the self-prompt texts are made: prompts of `prompt_tokens` tokens, sampling seeded by `seed`."""

    prompt_tokens: int = PROMPT_TOKENS
    seed: int = 0
    batch_size: int = 32


def self_prompt_recipe(target: TrainingRecipe | None, base: str | Path, seed: int) -> TrainingRecipe:
    """The reference's recipe: a full fine-tune of `base`, for EPOCH_SHARE of the epochs of `target` (a full fine-tune's
    recipe) at LEARNING_RATE_SHARE of its learning rate; the authors' 2 epochs at 5e-5 without one."""
    if target is None:
        return TrainingRecipe(epochs=PAPER_EPOCHS, learning_rate=PAPER_LEARNING_RATE, seed=seed, init_from=base)
    return replace(target, epochs=max(1, round(target.epochs * EPOCH_SHARE)), seed=seed, init_from=base, lora=None,
                   learning_rate=target.peak_learning_rate() * LEARNING_RATE_SHARE, checkpoints=())


def self_prompt_texts(target: ModelSource, prompts: Sequence[str], settings: SelfPromptSettings = SelfPromptSettings(),
                      placement: Placement = DEFAULT_PLACEMENT) -> list[str]:
    """The target's texts: each prompt's first `prompt_tokens` tokens and the target's sampled continuation, as long as
    the prompt's own text (within the model's positions). A prompt of no more tokens than that is left out."""
    import torch

    from lmaudit.models.generation import continuations
    from lmaudit.models.load import load_causal_lm
    from lmaudit.models.text import model_max_length, pad_token, text_ids

    loaded = load_causal_lm(target, placement)
    limit = model_max_length(loaded.model.config, loaded.tokenizer)
    special = set(loaded.tokenizer.all_special_ids)
    # each prompt: its start token, if the tokenizer adds one, and `prompt_tokens` tokens of its text
    heads, full = [], []
    for ids in text_ids(loaded.tokenizer, prompts):
        start = next((i for i, token in enumerate(ids) if token not in special), len(ids)) + settings.prompt_tokens
        if start < min(len(ids), limit):  # a continuation within the model's positions
            heads.append(ids[:start])
            full.append(ids[:limit])
    if not full:
        raise InputError(f"no prompt text is longer than {settings.prompt_tokens} tokens; give longer public texts")
    torch.manual_seed(zlib.crc32(f"self-prompt:{settings.seed}".encode()))
    longest = max(len(ids) - len(head) for ids, head in zip(full, heads, strict=True))
    generated = continuations(loaded.model, heads, longest, pad_token(loaded.tokenizer), loaded.tokenizer.eos_token_id,
                              settings.batch_size, SAMPLING)
    texts = [loaded.tokenizer.decode(head + copies[0][: len(ids) - len(head)], skip_special_tokens=True)
             for head, copies, ids in zip(heads, generated, full, strict=True)]
    return [text for text in texts if text.strip()]
