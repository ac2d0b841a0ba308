"""A JSON-over-HTTP server on 127.0.0.1 in a daemon thread, for the test stand-ins of served models: a subclass answers
`respond(method, path, headers, raw_body)`; everything it received is kept, thread-safe, for the tests to read."""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Received:
    """One request as the server received it: headers with lower-case names (urllib writes 'Content-type'), and the
    body parsed as JSON (None when empty, the raw text when not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: object


@dataclass(frozen=True)
class Answer:
    """What to send back: a status, a JSON document (or raw bytes, relayed as they came) and extra headers."""

    status: int
    payload: object
    headers: dict[str, str] | None = None


def error_answer(status: int, message: str, kind: str, param: str | None = None) -> Answer:
    """An error in the OpenAI-compatible shape vLLM answers (tests/serving/responses/vllm-0.32.0-unknown-model.json)."""
    return Answer(status, {"error": {"message": message, "type": kind, "param": param, "code": status}})


class BackgroundServer(ABC):
    """Binds a free port on 127.0.0.1 on entering the `with` block and serves until it ends."""

    def __init__(self) -> None:
        self._received: list[Received] = []
        self._received_lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    @property
    def requests(self) -> list[Received]:
        """Every request received so far, in arrival order (a copy: the server may be answering others)."""
        with self._received_lock:
            return list(self._received)

    @abstractmethod
    def respond(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        """The answer to one request; each server says its own."""

    def __enter__(self):
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True  # a client left hanging must not keep the test process alive
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    def _record(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> None:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with self._received_lock:
            self._received.append(Received(method, path, headers, body))


def _handler_for(app: BackgroundServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def _answer(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            path = self.path.split("?", 1)[0]
            app._record(method, path, headers, raw)
            try:
                answer = app.respond(method, path, headers, raw)
            except Exception as error:  # a bug in a stand-in must reach the test as a 500, not a hung client
                answer = error_answer(500, f"{type(error).__name__}: {error}", "InternalServerError")
            data = answer.payload if isinstance(answer.payload, bytes) else json.dumps(answer.payload).encode()
            self.send_response(answer.status)
            for name, value in {**JSON_HEADERS, **(answer.headers or {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - keeps pytest's output free of access logs
            pass

    return Handler
