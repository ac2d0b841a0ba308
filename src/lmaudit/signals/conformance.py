"""The conformance check: before an audit reads a served model's numbers, prove them right on texts that are never
the audit's (CHECK_TEXTS), or refuse the audit in one line naming the worst token, the difference and its likely cause.

(a) The served log-probabilities equal transformers' on the same weights (`tolerance`, nats per token); (b) a text
scored alone equals the same text scored inside a batch of others, sent together in a random order; (c) the server's
tokenizer makes the target tokenizer's ids of a text, and the longest input scored comes back whole (a server that
cuts it at its context length is caught here, not in the audit).
"""

from __future__ import annotations

import numpy as np

from lmaudit.errors import InputError
from lmaudit.models.source import ModelSource, Placement
from lmaudit.signals.base import encode
from lmaudit.signals.settings import SignalSettings

# Public-domain-style sentences about nothing an audit holds: the check's numbers may be logged and reported.
CHECK_TEXTS = (
    "The morning train to the coast was late again, so we waited on the platform with our coffee.",
    "A small boat drifted past the harbour wall while gulls circled above the fishing nets.",
    "She planted tomatoes, beans and two rows of sunflowers along the fence behind the house.",
    "The library opens at nine on weekdays and closes early on the first Monday of each month.",
    "Heavy rain is expected tonight, with strong winds along the northern hills until Thursday.",
    "He fixed the old bicycle with a new chain, a spare tyre and a great deal of patience.",
    "Bread, cheese, apples and a flask of tea were packed for the long walk over the moor.",
    "The choir practised in the church hall every Wednesday evening from seven until half past eight.",
)


def check_prompts(tokenizer, limit: int) -> list[list[int]]:
    """The check's prompts: each text as the audit encodes it, and one as long as the longest input scored."""
    texts = [*CHECK_TEXTS, " ".join(CHECK_TEXTS * 40)]
    samples = encode(tokenizer, texts, [f"check-{i}" for i in range(len(texts))], limit)
    return [sample.input_ids.tolist() for sample in samples]


def tokenized_text(tokenizer, limit: int) -> str:
    """The words of the first check text that the tokenizer makes fewer than `limit` tokens of (the server, which
    tokenizes it for the tokenizer check, must still have room to generate one)."""
    words = CHECK_TEXTS[0].split()
    while len(words) > 1 and len(tokenizer(" ".join(words))["input_ids"]) >= limit:
        words = words[: len(words) // 2]
    return " ".join(words)


def local_log_probs(source: ModelSource, placement: Placement, prompts: list[list[int]]) -> list[np.ndarray]:
    """transformers' log-probabilities of every token after the first of each prompt, on the source's own weights."""
    from lmaudit.signals.base import EncodedSample
    from lmaudit.signals.causal import causal_passes
    from lmaudit.signals.compute import loaded_models
    from lmaudit.signals.registry import resolved

    [loaded] = loaded_models((ModelSource(source.folder, source.adapter),), "clm", placement)
    samples = [EncodedSample(f"check-{i}", np.asarray(ids), np.arange(len(ids)), len(ids), False)
               for i, ids in enumerate(prompts)]
    settings = resolved(SignalSettings(signal="clm_loss"), placement.device)
    return [values[0] for values in causal_passes(loaded.model, loaded.tokenizer, samples, settings)]


def worst(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[float, int, int]:
    """The largest |a - b| over every token of every prompt, and where: (difference, prompt, token position)."""
    found = (0.0, -1, -1)
    for index, (x, y) in enumerate(zip(a, b, strict=True)):
        gaps = np.abs(np.asarray(x) - np.asarray(y))
        if len(gaps) and gaps.max() > found[0]:
            found = (float(gaps.max()), index, int(gaps.argmax()))
    return found


def likely_causes(served: list[np.ndarray], local: list[np.ndarray], base: list[np.ndarray] | None,
                  tolerance: float) -> str:
    """What the pattern of the differences points to: an off-by-one alignment, a dropped adapter, another model."""
    shifted = worst([s[1:] for s in served], [own[:-1] for own in local])[0]
    if shifted <= tolerance:
        return ("each token is paired with the next position's log-probability (off-by-one alignment, as "
                "llama-cpp-python without a BOS token: issue #1983; BOS handling)")
    if base is not None and worst(served, base)[0] <= tolerance:
        return ("the server scores the base model without the adapter (vLLM drops a LoRA adapter's lm_head from "
                "prompt_logprobs: vllm #51594); serve the merged model, or load the adapter as the server needs")
    return ("another checkpoint than --target's weights, another dtype or quantization, or an adapter served "
            "differently; serve the audited weights, or raise --tolerance for a lower-precision server")


def conformance(source: ModelSource, placement: Placement, tokenizer, limit: int, tolerance: float,
                seed: int = 0) -> dict:
    """The check's result for the served `source` (a dict for the report's provenance), or InputError when it fails."""
    from lmaudit.serving.scorers import served_scorer

    scorer = served_scorer(source)
    where = scorer.identity["address"]
    prompts = check_prompts(tokenizer, limit)
    text = tokenized_text(tokenizer, limit)
    own_ids = tokenizer(text)["input_ids"]
    server_ids = scorer.token_ids_of(text)
    if server_ids is not None and list(server_ids) != list(own_ids):
        at = next((i for i, (x, y) in enumerate(zip(server_ids, own_ids, strict=False)) if x != y), min(len(server_ids), len(own_ids)))
        raise InputError(f"{where}: the server's tokenizer makes other ids of a check text than --target's (first at "
                         f"token {at}: {len(server_ids)} ids against {len(own_ids)}); serve the target's own tokenizer")
    alone = [tokens.log_probs for tokens in scorer.score_one_at_a_time(prompts)]
    order = np.random.default_rng(seed).permutation(len(prompts) * 2) % len(prompts)
    together = scorer.score([prompts[i] for i in order])
    for position, index in enumerate(order):
        gap, _, token = worst([alone[index]], [together[position].log_probs])
        if gap > tolerance:
            raise InputError(f"{where}: a text's log-probabilities change when sent with others (by {gap:.3g} nats at "
                             f"token {token} of check text {index}; tolerance {tolerance:g}): batch composition changes "
                             "the numbers (vllm #11778), which could follow the audit's roles; serve with batch-invariant "
                             "kernels, or check the server")
    local = local_log_probs(source, placement, prompts)
    gap, index, token = worst(alone, local)
    if gap > tolerance:
        base = local_log_probs(ModelSource(source.folder), placement, prompts) if source.adapter else None
        raise InputError(f"{where}: its log-probabilities differ from transformers' on --target's weights by up to "
                         f"{gap:.3g} nats (check text {index}, token {token}; tolerance {tolerance:g}); likely cause: "
                         f"{likely_causes(alone, local, base, tolerance)}")
    return {**scorer.identity, "check_texts": len(prompts), "check_tokens": int(sum(len(p) - 1 for p in prompts)),
            "longest_check_tokens": max(len(p) for p in prompts), "tolerance": tolerance,
            "largest_difference_from_transformers": gap,
            "largest_difference_alone_vs_batched": max(worst([alone[i]], [together[p].log_probs])[0]
                                                       for p, i in enumerate(order)),
            "tokenizer": "same ids" if server_ids is not None else "not said by the API (token ids sent)",
            "passed": True}
