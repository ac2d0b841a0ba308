"""Servers that answer wrong, for the tests of what an audit of a served model must catch: a proxy in front of a
right server (a StandInServer) that forwards every request and rewrites the scoring answers (vLLM's /v1/completions,
SGLang's /generate) by `kind`:

- "shift": each prompt log-probability one position late (position t gets t - 1's, the first kept, so it appears
  twice), the tokens left as they were: the off-by-one of a llama-cpp-python server that drops the BOS token;
- "batch_noise": Gaussian noise (sd 0.05 nats) on every prompt log-probability of a request that overlapped another
  one in the proxy, none on a request alone: the batch-composition bug of vLLM #11778;
- "tokens": every returned token id one higher, the values left as they were: a server with another tokenizer.

A wrong checkpoint needs no proxy: a StandInServer over another folder is one.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.request

from tests.serving.http_stub import Answer, BackgroundServer, error_answer

KINDS = ("shift", "batch_noise", "tokens")
SCORING_PATHS = ("/v1/completions", "/generate")
NOISE_SD = 0.05
HOLD_S = 0.02  # each scoring request waits this long in the proxy, so that requests sent together overlap here
FORWARDED_HEADERS = ("authorization", "content-type")
TOKEN_ID_PREFIX = "token_id:"

# An answer's values at one position: [token, log-probability] cells, the position's own token first (the prompt's
# token, or the generated one), then the top tokens the server listed there; None where the answer has no entry.
Position = list[list] | None


class WrongProxy(BackgroundServer):
    """A proxy on 127.0.0.1 to `upstream_url` that answers wrong by `kind` (one of KINDS) while the `with` block runs:
    `.url`, `.requests` (what it received) and `.noised` (how many answers got batch noise)."""

    def __init__(self, upstream_url: str, kind: str, seed: int = 0):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown kind '{kind}'; use one of {', '.join(KINDS)}")
        self.upstream_url, self.kind, self.seed = upstream_url.rstrip("/"), kind, seed
        self.noised = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()  # guards the in-flight bookkeeping, the noise generator and `noised`
        self._next_ticket = 0
        self._in_flight: set[int] = set()
        self._overlapped: set[int] = set()

    def respond(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        """The upstream's answer, rewritten when it is a scoring answer."""
        if method != "POST" or path not in SCORING_PATHS:
            return self._forward(method, path, headers, raw)
        ticket = self._arrive()
        try:
            if self.kind == "batch_noise":
                time.sleep(HOLD_S)
            answer = self._forward(method, path, headers, raw)
        finally:
            batched = self._leave(ticket)
        if answer.status != 200:
            return answer
        document = json.loads(answer.payload)
        self._rewrite(document, path, batched)
        return Answer(200, document, answer.headers)

    def _arrive(self) -> int:
        with self._lock:
            ticket, self._next_ticket = self._next_ticket, self._next_ticket + 1
            if self._in_flight:  # every request in flight together now shares a batch, the earlier ones too
                self._overlapped |= self._in_flight | {ticket}
            self._in_flight.add(ticket)
            return ticket

    def _leave(self, ticket: int) -> bool:
        with self._lock:
            self._in_flight.discard(ticket)
            batched = ticket in self._overlapped
            self._overlapped.discard(ticket)
            return batched

    def _forward(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        sent = {name: value for name, value in headers.items() if name in FORWARDED_HEADERS}
        request = urllib.request.Request(self.upstream_url + path, data=raw if method == "POST" else None,
                                         headers=sent, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return Answer(answer.status, answer.read(), _relayed(answer.headers))
        except urllib.error.HTTPError as error:  # the upstream's refusals pass through as they are
            return Answer(error.code, error.read(), _relayed(error.headers))
        except (urllib.error.URLError, OSError) as error:
            return error_answer(502, f"the upstream did not answer: {error}", "BadGateway")

    def _rewrite(self, document: dict, path: str, batched: bool) -> None:
        if self.kind == "batch_noise" and not batched:
            return
        if self.kind == "batch_noise":
            with self._lock:
                self.noised += 1
        noise: dict[int, float] = {}  # one draw per prompt position, the same in every field of the answer

        def change(tracks: list[tuple[list[Position], int]]) -> None:
            for positions, n_prompt in tracks:
                if self.kind == "shift":
                    _shift(positions, n_prompt)
                elif self.kind == "batch_noise":
                    _add_noise(positions, n_prompt, lambda t: noise.setdefault(t, self._draw()))
                else:
                    _next_ids(positions)

        if path == "/generate":
            _rewrite_sglang(document, change, self.kind == "tokens")
        else:
            for choice in document.get("choices") or []:
                _rewrite_choice(choice, (document.get("usage") or {}).get("prompt_tokens") or 0, change)

    def _draw(self) -> float:
        with self._lock:
            return self._rng.gauss(0.0, NOISE_SD)


def _relayed(headers) -> dict[str, str]:
    return {"Retry-After": headers["Retry-After"]} if headers.get("Retry-After") is not None else {}


def _shift(positions: list[Position], n_prompt: int) -> None:
    """Each prompt position with a value takes the previous one's own value; the first keeps its own."""
    real = [t for t, cells in enumerate(positions[:n_prompt]) if cells and cells[0][1] is not None]
    before = {t: positions[t][0][1] for t in real}
    for earlier, t in zip(real, real[1:], strict=False):  # pairs of neighbours
        own = positions[t][0][0]
        for cell in positions[t]:
            if cell[0] == own:  # the own token listed again among the top ones says the same value
                cell[1] = before[earlier]


def _add_noise(positions: list[Position], n_prompt: int, draw) -> None:
    """The same draw added to every value at a prompt position (kept <= 0: a probability stays at most 1)."""
    for t, cells in enumerate(positions[:n_prompt]):
        if cells and cells[0][1] is not None:
            shift = draw(t)
            for cell in cells:
                cell[1] = None if cell[1] is None else min(0.0, cell[1] + shift)


def _next_ids(positions: list[Position]) -> None:
    for cells in positions:
        for cell in cells or []:
            cell[0] = _next_id(cell[0])


def _next_id(token):
    """The id one higher, in the token's own spelling: an int, "token_id:N" or "N" (a token given as text stays)."""
    if isinstance(token, int):
        return token + 1
    if isinstance(token, str) and token.startswith(TOKEN_ID_PREFIX):
        return f"{TOKEN_ID_PREFIX}{int(token[len(TOKEN_ID_PREFIX):]) + 1}"
    return str(int(token) + 1) if isinstance(token, str) and token.isdigit() else token


def _rewrite_choice(choice: dict, n_prompt: int, change) -> None:
    """vLLM's logprobs block (the prompt's positions first when echoed) and prompt_logprobs, read, changed, written."""
    block, entries = choice.get("logprobs"), choice.get("prompt_logprobs")
    tracks = []
    if block and block.get("tokens"):
        echoed = block["token_logprobs"][0] is None  # only an echoed prompt starts with a position without a value
        tops = block.get("top_logprobs") or [None] * len(block["tokens"])
        block_positions = [[[token, value], *[[k, v] for k, v in (top or {}).items()]]
                           for token, value, top in zip(block["tokens"], block["token_logprobs"], tops, strict=True)]
        tracks.append((block_positions, n_prompt if echoed else 0))
    if entries:
        # vLLM lists the prompt's own token first in each entry (tests/serving/responses/)
        entry_positions = [None if e is None else [[k, v["logprob"]] for k, v in e.items()] for e in entries]
        tracks.append((entry_positions, len(entries)))
    change(tracks)
    if block and block.get("tokens"):
        positions = tracks[0][0]
        block["tokens"] = [cells[0][0] for cells in positions]
        block["token_logprobs"] = [cells[0][1] for cells in positions]
        if block.get("top_logprobs"):
            block["top_logprobs"] = [None if top is None else dict(map(tuple, cells[1:]))
                                     for top, cells in zip(block["top_logprobs"], positions, strict=True)]
    if entries:
        choice["prompt_logprobs"] = [
            None if entry is None else {k: {**old, "logprob": v} for (k, v), old in zip(cells, entry.values(), strict=True)}
            for entry, cells in zip(entries, tracks[-1][0], strict=True)]


def _rewrite_sglang(document: dict, change, new_ids: bool) -> None:
    """SGLang's (logprob, token_id, text) triples: the input's and the output's, each with its top ones when given."""
    meta = document.get("meta_info") or {}
    tracks, fields = [], []
    for own_name, top_name, is_prompt in (("input_token_logprobs", "input_top_logprobs", True),
                                          ("output_token_logprobs", "output_top_logprobs", False)):
        own = meta.get(own_name)
        if not own:
            continue
        tops = meta.get(top_name) or [None] * len(own)
        positions = [[[triple[1], triple[0]], *[[t[1], t[0]] for t in (top or [])]] for triple, top in zip(own, tops, strict=True)]
        tracks.append((positions, len(own) if is_prompt else 0))
        fields.append((own_name, top_name))
    change(tracks)
    for (positions, _), (own_name, top_name) in zip(tracks, fields, strict=True):
        meta[own_name] = [[cells[0][1], cells[0][0], triple[2]] for cells, triple in zip(positions, meta[own_name], strict=True)]
        if meta.get(top_name):
            meta[top_name] = [None if top is None else [[v, k, t[2]] for (k, v), t in zip(cells[1:], top, strict=True)]
                              for top, cells in zip(meta[top_name], positions, strict=True)]
    if new_ids and document.get("output_ids") is not None:
        document["output_ids"] = [_next_id(token) for token in document["output_ids"]]
