"""One run at a time per output folder: a lock that the operating system releases when the run ends, however it ends,
so two audits started into one --out do not both compute everything and overwrite each other's report."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lmaudit.errors import InputError

LOCK_NAME = ".lmaudit.lock"

_held: dict[Path, int] = {}  # folders this process has locked -> how many blocks hold them (a demo's audit re-locks)


@contextmanager
def output_lock(folder: str | Path) -> Iterator[None]:
    """Hold `folder` (created if needed) for this run, or raise InputError naming the run that holds it. The lock file
    is removed at the end, and so is any folder the lock created and nothing else filled."""
    folder = Path(folder).resolve()
    if folder in _held:
        _held[folder] += 1
        try:
            yield
        finally:
            _held[folder] -= 1
        return
    created = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    folder.mkdir(parents=True, exist_ok=True)
    try:
        handle = _locked(folder / LOCK_NAME)
    except InputError:
        _remove_empty(created)
        raise
    _held[folder] = 1
    try:
        yield
    finally:
        del _held[folder]
        (folder / LOCK_NAME).unlink(missing_ok=True)  # before closing: a waiting run then finds the file gone and retries
        handle.close()
        _remove_empty(created)


def _locked(path: Path):
    """The open lock file, locked by this process and marked with its pid and start time."""
    while True:
        handle = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise InputError(f"{path.parent}: another lmaudit run ({holder}) is writing this folder; wait for it to "
                             "finish or pass another --out") from None
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(handle.fileno()).st_ino:
            break
        handle.close()  # the run that held it removed the file between our open and our lock: lock the new file
    handle.truncate(0)
    handle.write(f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}")
    handle.flush()
    return handle


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty: the run wrote its results there
            return
