"""Write files and folders all or nothing: under temporary names first, renamed into place only when all are written."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def staged(*finals: str | Path) -> Iterator[list[Path]]:
    """Temporary paths (hidden, next to each final path) to write into; when the block ends without an error they
    replace the final paths, in the order given, so an interrupted or failed write never leaves a half-written
    file or folder. A final folder that already exists is replaced whole."""
    finals = [Path(f) for f in finals]
    temporaries = [f.with_name(f".{f.name}.tmp-{os.getpid()}") for f in finals]
    for temporary in temporaries:
        _remove(temporary)
    try:
        yield temporaries
        for temporary, final in zip(temporaries, finals, strict=True):
            if final.is_dir() and temporary.is_dir():
                shutil.rmtree(final)
            os.replace(temporary, final)
    finally:
        for temporary in temporaries:
            _remove(temporary)


def write_text(path: str | Path, text: str) -> None:
    """Write a UTF-8 text file atomically."""
    with staged(path) as (temporary,):
        temporary.write_text(text, encoding="utf-8")

