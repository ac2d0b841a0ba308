"""Logging for the command line: every module logs to `logging.getLogger(__name__)` (under "lmaudit"); the CLI sets
the level and the one handler here, once per run.

Levels: INFO by default (the stages of a run: each model's signal pass, training and its epochs, the demo's and the
sweep's steps, and a result's warnings, which its file keeps too), ERROR with --quiet, DEBUG with --verbose. On a
terminal the lines read `lmaudit: ...` and are written above the tqdm bars; elsewhere (stderr redirected to a file, a
job's log) they carry a timestamp, `2026-11-23 01:02:03 lmaudit: scoring target: ...`, so a long run's log shows when
each stage began and ended.
Nothing logged holds a sample's text: logs name models, counts and times only.

Library use (lmaudit.api, the tests) configures nothing: records then go wherever the application's logging sends them
(by default only warnings, to stderr).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

ROOT = "lmaudit"
TIMESTAMP = "%Y-%m-%d %H:%M:%S"
# Lines that report progress through a long loop (chunks scored) come at most this often when no bar shows it.
PROGRESS_INTERVAL_S = 10.0
_PREFIX = {logging.DEBUG: "debug: ", logging.WARNING: "warning: ", logging.ERROR: "error: ", logging.CRITICAL: "error: "}


class _Formatter(logging.Formatter):
    """`[timestamp ]lmaudit: [debug: |warning: ]message`, one line per record."""

    def __init__(self, timestamps: bool):
        super().__init__(datefmt=TIMESTAMP)
        self.timestamps = timestamps

    def format(self, record: logging.LogRecord) -> str:
        line = f"{ROOT}: {_PREFIX.get(record.levelno, '')}{record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return f"{self.formatTime(record, self.datefmt)} {line}" if self.timestamps else line


class _TerminalHandler(logging.StreamHandler):
    """On a terminal: each line written through tqdm, so that it appears above the progress bars, not through them."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm.auto import tqdm

            tqdm.write(self.format(record), file=self.stream)
            self.flush()
        except Exception:  # logging must never break the run
            self.handleError(record)


_installed: logging.Handler | None = None


def configure(verbose: bool = False, quiet: bool = False, stream: TextIO | None = None) -> logging.Handler:
    """Send the "lmaudit" loggers' records to `stream` (default: stderr now) at DEBUG (verbose), ERROR (quiet) or
    INFO; timestamped unless the stream is a terminal. Replaces the handler of an earlier call (one per run)."""
    reset()
    stream = stream if stream is not None else sys.stderr
    terminal = _isatty(stream)
    handler = (_TerminalHandler if terminal else logging.StreamHandler)(stream)
    handler.setFormatter(_Formatter(timestamps=not terminal))
    logger = logging.getLogger(ROOT)
    logger.setLevel(logging.DEBUG if verbose else logging.ERROR if quiet else logging.INFO)
    logger.addHandler(handler)
    logger.propagate = False
    global _installed
    _installed = handler
    return handler


def reset() -> None:
    """Remove the handler `configure` installed and give the level back to the application (the end of a CLI run)."""
    global _installed
    logger = logging.getLogger(ROOT)
    if _installed is not None:
        logger.removeHandler(_installed)
        _installed = None
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Throttle:
    """True at most once every `interval` seconds: for progress lines in logs where no bar shows progress."""

    def __init__(self, interval: float = PROGRESS_INTERVAL_S):
        self.interval = interval
        self.last = time.monotonic()

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self.last < self.interval:
            return False
        self.last = now
        return True
