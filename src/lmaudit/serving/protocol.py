"""What each server's API asks and answers for prompt log-probabilities: the request body for a prompt of token ids,
and the per-token values read back from the response (pure functions: no network, no torch).

Every API answers one entry per prompt position, the first empty (nothing predicts the first token); the values read
back are each later token's log-probability (nats) and, where the server says it, the id of its most likely token
there and the id it scored (to check that it scored the tokens it was sent). docs/serving.md has each server's fields.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lmaudit.errors import InputError

TOKEN_ID_PREFIX = "token_id:"  # how vLLM writes a token with return_tokens_as_token_ids


@dataclass(frozen=True)
class ServedTokens:
    """One prompt's values from a server: the log-probability of every token after the first (nats), the id of the
    most likely token at each of those positions (NaN where the server does not say), and the ids it says it scored
    there (None where it does not say)."""

    log_probs: np.ndarray
    top1_ids: np.ndarray
    scored_ids: list[int] | None


def completion_path(api: str) -> str:
    """The path of the API's scoring request."""
    return "/generate" if api == "sglang" else "/v1/completions"


def request_body(api: str, model: str | None, prompt: list[int] | str) -> dict:
    """The request that asks the server for the prompt's log-probabilities and their top-1, generating at most one
    token (a prompt of token ids, or of text for the tokenizer check)."""
    if api == "sglang":
        key = "text" if isinstance(prompt, str) else "input_ids"
        return {key: prompt, "sampling_params": {"max_new_tokens": 0, "temperature": 0}, "return_logprob": True,
                "logprob_start_len": 0, "top_logprobs_num": 1, "return_text_in_logprobs": False}
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "return_tokens_as_token_ids": True}
    if api == "vllm":
        return body | {"prompt_logprobs": 1}
    return body | {"echo": True, "logprobs": 1}


def parse_response(api: str, response: dict, prompt: list[int]) -> ServedTokens:
    """The values of the `prompt` (token ids) from the server's response; InputError when the response holds no
    prompt log-probabilities, or fewer than the prompt's tokens (cut at the server's context length)."""
    n_prompt = len(prompt)
    if api == "sglang":
        meta = response.get("meta_info") if isinstance(response, dict) else None
        entries, tops = (meta or {}).get("input_token_logprobs"), (meta or {}).get("input_top_logprobs")
        if not entries:
            raise InputError("no prompt log-probabilities in the answer (meta_info.input_token_logprobs)")
        _check_length(len(entries), n_prompt)
        log_probs = [entry[0] for entry in entries[1:n_prompt]]
        top1 = [_best(top, lambda item: (item[0], item[1])) if top else np.nan for top in (tops or [None] * n_prompt)[1:n_prompt]]
        return _tokens(log_probs, top1, [int(entry[1]) for entry in entries[1:n_prompt]])
    choice = (response.get("choices") or [{}])[0] if isinstance(response, dict) else {}
    if api == "vllm":
        entries = choice.get("prompt_logprobs")
        if not entries:
            raise InputError("no prompt log-probabilities in the answer (choices[0].prompt_logprobs); is the server "
                             "vLLM? use --api openai for a server that answers echo with logprobs")
        _check_length(len(entries), n_prompt)
        return _vllm_entries(entries[1:n_prompt], prompt[1:])
    logprobs = choice.get("logprobs") or {}
    values, tokens = logprobs.get("token_logprobs"), logprobs.get("tokens")
    if not values or not tokens or len(values) < 2:
        raise InputError("no prompt log-probabilities in the answer (choices[0].logprobs.token_logprobs with echo); "
                         "the server returns the generated tokens' only: it cannot be audited by log-probability")
    _check_length(len(values), n_prompt)
    tops = logprobs.get("top_logprobs") or [None] * len(values)
    top1 = [_best(top, lambda item: (item[1], _token_id(item[0]))) if top else np.nan for top in tops[1:n_prompt]]
    ids = [_token_id(token) for token in tokens[1:n_prompt]]
    return _tokens(values[1:n_prompt], top1, None if any(np.isnan(i) for i in ids) else [int(i) for i in ids])


def _vllm_entries(entries: list[dict | None], tokens: list[int]) -> ServedTokens:
    """vLLM's prompt_logprobs: per position, the entry of the token sent there and the top ones, by id, each with its
    rank in the vocabulary (1 = the most likely)."""
    log_probs, top1 = [], []
    for entry, token in zip(entries, tokens, strict=True):
        items = {int(key): value for key, value in (entry or {}).items()}
        if token not in items:
            raise InputError(f"the answer scores other tokens than those sent (token {token} has no entry)")
        log_probs.append(items[token]["logprob"])
        top1.append(next((key for key, value in items.items() if value.get("rank") == 1), np.nan))
    return _tokens(log_probs, top1, list(tokens))


def _best(top, key) -> float:
    """The id of the most likely token among a position's top entries (NaN when its id is not given)."""
    items = top.items() if isinstance(top, dict) else top
    best = max((key(item) for item in items), default=(None, np.nan))
    return float(best[1])


def _token_id(token: str) -> float:
    return float(token[len(TOKEN_ID_PREFIX):]) if isinstance(token, str) and token.startswith(TOKEN_ID_PREFIX) else np.nan


def _tokens(log_probs, top1, scored: list[int] | None) -> ServedTokens:
    values = np.asarray([np.nan if value is None else value for value in log_probs], dtype=np.float64)
    if np.isnan(values).any():
        raise InputError("a prompt token without a log-probability in the answer")
    return ServedTokens(values, np.asarray(top1, dtype=np.float64), scored)


def _check_length(returned: int, sent: int) -> None:
    if returned < sent:
        raise InputError(f"the answer scores {returned} of the {sent} tokens sent: the server cut the text at its "
                         "context length; give --max-length below the server's max_model_len (it needs room for the one "
                         "token it generates)")


def tokenizing_body(api: str, model: str | None, text: str) -> dict:
    """The request that has the server tokenize `text` itself and say the ids it made (echo), for the tokenizer check."""
    if api == "sglang":
        return request_body(api, model, text)
    return request_body("openai", model, text)


def server_token_ids(api: str, response: dict) -> list[int] | None:
    """The ids the server made of a text prompt (its own tokenizer), first token included; None when it does not say."""
    if api == "sglang":
        entries = ((response.get("meta_info") or {}).get("input_token_logprobs") or []) if isinstance(response, dict) else []
        return [int(entry[1]) for entry in entries] or None
    choice = (response.get("choices") or [{}])[0] if isinstance(response, dict) else {}
    tokens = (choice.get("logprobs") or {}).get("tokens") or []
    usage = (response.get("usage") or {}).get("prompt_tokens") if isinstance(response, dict) else None
    ids = [_token_id(token) for token in tokens[:usage] if usage is not None]
    return [int(i) for i in ids] if ids and not np.isnan(ids).any() else None
