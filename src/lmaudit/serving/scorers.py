"""A served model's scorer, whatever serves it: prompts of token ids in, each prompt's `ServedTokens` out, and what
the server says of itself. One per model and process, started the first time it is asked for."""

from __future__ import annotations

import numpy as np

from lmaudit.errors import InputError
from lmaudit.models.source import ModelSource
from lmaudit.serving.http_client import Endpoint
from lmaudit.serving.protocol import (
    ServedTokens,
    completion_path,
    parse_response,
    request_body,
    server_token_ids,
    tokenizing_body,
)

_STARTED: dict[ModelSource, object] = {}


class HttpScorer:
    """An endpoint's scorer: the served model's name (asked of the server when not given) and its identity."""

    def __init__(self, source: ModelSource):
        self.served = source.served
        self.endpoint = Endpoint(self.served)
        self.model, self.identity = served_identity(self.endpoint)

    def score(self, prompts: list[list[int]], done=None) -> list[ServedTokens]:
        """Each prompt's values, `concurrency` requests in flight."""
        api, path = self.served.api, completion_path(self.served.api)
        answers = self.endpoint.post_all(path, [request_body(api, self.model, prompt) for prompt in prompts], done)
        return [self._parsed(answer, prompt) for answer, prompt in zip(answers, prompts, strict=True)]

    def score_one_at_a_time(self, prompts: list[list[int]]) -> list[ServedTokens]:
        """Each prompt's values, sent alone (nothing else in flight from this client)."""
        path = completion_path(self.served.api)
        return [self._parsed(self.endpoint.post(path, request_body(self.served.api, self.model, prompt)), prompt)
                for prompt in prompts]

    def token_ids_of(self, text: str) -> list[int] | None:
        """The ids the server's own tokenizer makes of `text` (None when its API does not say)."""
        answer = self.endpoint.post(completion_path(self.served.api), tokenizing_body(self.served.api, self.model, text))
        return server_token_ids(self.served.api, answer)

    def _parsed(self, answer: dict, prompt: list[int]) -> ServedTokens:
        try:
            return parse_response(self.served.api, answer, prompt)
        except InputError as error:
            raise InputError(f"{self.endpoint.address}: {error}") from None


def served_identity(endpoint: Endpoint) -> tuple[str | None, dict]:
    """The served model's name (the one given, checked against those the server lists; else the only one it lists)
    and what the server says of itself: address, API, name, version, context length."""
    served, address = endpoint.served, endpoint.address
    identity = {"address": address, "api": served.api}
    if served.api == "sglang":
        info = endpoint.get("/get_model_info") or {}
        server = endpoint.get("/get_server_info") or {}
        name = served.model or info.get("model_path")
        return name, identity | {"model": name, "version": server.get("version"),
                                 "max_model_len": server.get("context_length") or info.get("context_length")}
    listed = (endpoint.get("/v1/models") or {}).get("data") or []
    names = [entry.get("id") for entry in listed]
    if served.model is not None and names and served.model not in names:
        raise InputError(f"{address}: serves no model '{served.model}' (it serves {', '.join(map(str, names))}); "
                         "give one of them as --served-model")
    if served.model is None and len(names) != 1:
        raise InputError(f"{address}: serves {len(names)} models ({', '.join(map(str, names)) or 'none listed'}); "
                         "name the audited one with --served-model")
    name = served.model or names[0]
    entry = next((entry for entry in listed if entry.get("id") == name), {})
    version = (endpoint.get("/version") or {}).get("version")
    return name, identity | {"model": name, "version": version, "max_model_len": entry.get("max_model_len"),
                             "root": entry.get("root")}


class VllmScorer:
    """vLLM's engine in its own process (serving/vllm_engine.py) as a scorer."""

    def __init__(self, source: ModelSource):
        from lmaudit.serving.vllm_engine import VllmEngine

        self.engine = VllmEngine(source)
        self.identity = {"address": "in process", "api": "vllm.LLM", "model": source.folder, **self.engine.identity,
                         **({"adapter": source.adapter} if source.adapter else {})}

    def score(self, prompts: list[list[int]], done=None) -> list[ServedTokens]:
        """Each prompt's values, all prompts in one call (vLLM batches them as it schedules)."""
        scored = [self._tokens(rows, prompt) for rows, prompt in zip(self.engine.score(prompts), prompts, strict=True)]
        if done is not None:
            done(len(prompts))
        return scored

    def score_one_at_a_time(self, prompts: list[list[int]]) -> list[ServedTokens]:
        """Each prompt's values, each in a call of its own (a batch of one)."""
        return [self._tokens(self.engine.score([prompt])[0], prompt) for prompt in prompts]

    def token_ids_of(self, text: str) -> list[int] | None:
        """None: the engine is given token ids, never text, so its tokenizer makes none."""
        return None

    @staticmethod
    def _tokens(rows: list[list[float]], prompt: list[int]) -> ServedTokens:
        values = np.asarray([[np.nan if value is None else value for value in row] for row in rows], dtype=np.float64)
        values = values.reshape(len(prompt) - 1, 2)
        return ServedTokens(values[:, 0], values[:, 1], list(prompt[1:]))


def served_scorer(source: ModelSource):
    """The scorer of a served model, started once per process."""
    if source not in _STARTED:
        _STARTED[source] = (VllmScorer if source.served.engine == "vllm" else HttpScorer)(source)
    return _STARTED[source]
