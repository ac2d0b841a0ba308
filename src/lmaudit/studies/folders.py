"""What a demo, a study or a DP sweep may write into: its own folder, never a model's, another command's result or
the user's own files.

These commands write their generated data (`data/`), their models (`models/`), their audits and their table into
--out, and a rerun resumes or replaces what the same command wrote there. A folder holding anything else is refused
unless --overwrite, because the run would write its files among (and over) what is there.
"""

from __future__ import annotations

from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.locks import LOCK_NAME
from lmaudit.report.documents import DOCUMENTS, another_result

# What every such command writes first: its data, its models (and a study its cells). A folder holding one of them is taken for an earlier,
# perhaps interrupted, run of such a command.
WORKING_PARTS = ("data", "models", "cells")


def refuse_foreign_folder(out: str | Path, command: str, documents: tuple[str, ...], overwrite: bool = False) -> None:
    """InputError unless `out` is absent, empty or an earlier run of a command that writes `documents` (its data, its
    models or one of its documents there), and holds no model and no other command's document; with `overwrite`, none."""
    out = Path(out)
    if overwrite or not out.is_dir():
        return
    names = {path.name for path in out.iterdir()} - {LOCK_NAME}
    again = f"choose another --out, or give --overwrite to write `lmaudit {command}`'s files into it"
    other = another_result(out, sorted(set(DOCUMENTS) - set(documents)))
    if other is not None:
        raise InputError(f"{out}: holds {other}; {again}")
    if names and not names & {*WORKING_PARTS, *documents}:
        shown = ", ".join(sorted(names)[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise InputError(f"{out}: holds files that `lmaudit {command}` did not write ({shown}); {again}")
