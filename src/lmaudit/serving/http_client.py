"""A client an audit can leave running against an HTTP endpoint: requests in flight at once, a timeout per request,
tries again with exponential back-off after a dropped connection, a 429 (waiting what Retry-After asks) or a 5xx, and
one-line errors that name the address (never its credentials) and what to do. The API key is read from an environment
variable and sent as a bearer token; no request, answer or key is logged. Standard library only."""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from lmaudit.errors import InputError
from lmaudit.models.source import ServedBy, display_url

log = logging.getLogger(__name__)
BACKOFF_S = 0.5  # the first wait before a retry; doubled at each further try
MAX_WAIT_S = 30.0


class Endpoint:
    """One endpoint of a served model, as `served` says to reach it."""

    def __init__(self, served: ServedBy):
        self.served, self.base = served, (served.url or "").rstrip("/")
        self.address = display_url(served.url)

    def headers(self) -> dict[str, str]:
        """The request's headers: JSON, and the API key as a bearer token when its environment variable is set."""
        key = os.environ.get(self.served.api_key_env or "")
        return {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}

    def get(self, path: str) -> dict | None:
        """GET a JSON document (None where the server has no such path: an identity field it does not expose)."""
        return self._send(urllib.request.Request(self.base + path, headers=self.headers()), path, optional=True)

    def post(self, path: str, body: dict) -> dict:
        """POST one JSON request and read its JSON answer, trying again after transient failures."""
        data = json.dumps(body).encode()
        return self._send(urllib.request.Request(self.base + path, data=data, headers=self.headers(), method="POST"), path)

    def post_all(self, path: str, bodies: Sequence[dict], done: Callable[[int], None] | None = None) -> list[dict]:
        """Every request's answer, in order, `concurrency` in flight at a time; `done(n)` after each n answered."""
        with ThreadPoolExecutor(max_workers=self.served.concurrency) as pool:
            answers = []
            for answer in pool.map(lambda body: self.post(path, body), bodies):
                answers.append(answer)
                if done is not None:
                    done(1)
            return answers

    def _send(self, request: urllib.request.Request, path: str, optional: bool = False) -> dict | None:
        where = f"{self.address}{path}"
        for attempt, wait in enumerate(_waits(self.served.retries)):
            try:
                with urllib.request.urlopen(request, timeout=self.served.timeout_s) as answer:
                    return json.loads(answer.read().decode("utf-8"))
            except urllib.error.HTTPError as error:
                if optional and error.code in (404, 405):
                    return None
                if error.code not in (408, 429) and error.code < 500 or wait is None:
                    raise InputError(http_error(where, error)) from None
                retry_after = _retry_after(error)
                wait = max(wait, retry_after) if retry_after is not None else wait
                log.info("%s answered %d; trying again in %.1f s (try %d of %d)", where, error.code, wait,
                         attempt + 2, self.served.retries + 1)
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
                if wait is None:
                    raise InputError(unreachable(where, error, self.served)) from None
                log.info("%s: no answer (%s); trying again in %.1f s", where, _reason(error), wait)
            except ValueError:
                raise InputError(f"{where}: the answer is not JSON; is this the API --api names?") from None
            time.sleep(wait)
        raise AssertionError("unreachable")  # _waits ends with None, which raises above


def _waits(retries: int) -> Iterator[float | None]:
    for attempt in range(retries):
        yield min(BACKOFF_S * 2 ** attempt, MAX_WAIT_S)
    yield None


def _retry_after(error: urllib.error.HTTPError) -> float | None:
    try:
        return min(float(error.headers.get("Retry-After")), MAX_WAIT_S)
    except (TypeError, ValueError):
        return None


def _reason(error: Exception) -> str:
    reason = getattr(error, "reason", error)
    return "timed out" if isinstance(reason, TimeoutError) or "timed out" in str(reason) else str(reason)[:80]


def http_error(where: str, error: urllib.error.HTTPError) -> str:
    """One line for a refused request: the status, the server's own message (cut short) and what to do."""
    try:
        detail = json.loads(error.read().decode("utf-8"))
        message = detail.get("error", detail) if isinstance(detail, dict) else detail
        message = message.get("message", message) if isinstance(message, dict) else message
    except (ValueError, OSError, AttributeError):
        message = error.reason
    message = " ".join(str(message).split())[:160]
    advice = {401: "set the API key's environment variable (--api-key-env)", 403: "check the API key's rights",
              404: "check --served-model and the address (the model names it serves: GET /v1/models)",
              400: "check --api and --max-length against the server"}.get(error.code, "check the server's log")
    return f"{where}: the server answered {error.code} ({message}); {advice}"


def unreachable(where: str, error: Exception, served: ServedBy) -> str:
    """One line for a server that never answered: down, refusing, or slower than the timeout, after every retry."""
    reason = _reason(error)
    if reason == "timed out":
        return (f"{where}: no answer within {served.timeout_s:g} s, {served.retries + 1} tries; raise --request-timeout "
                "or lower --concurrency, or check the server (the signal store keeps what was scored: run again to resume)")
    return (f"{where}: no server answers ({reason}) after {served.retries + 1} tries; start the server or check the "
            "address (the signal store keeps what was scored: run again to resume)")
