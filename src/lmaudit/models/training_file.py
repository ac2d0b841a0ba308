"""A model folder's lmaudit_training.json: what trained the model, the canaries planted in it and its DP-SGD watch,
which `lmaudit canaries audit` trusts. One reader and one writer: every write replaces the whole file atomically,
keeping the keys it does not set. Not strict JSON yet: a run without noise has an infinite accountant's epsilon,
written as Python's `Infinity`, which its readers take for infinity (null would read as "not computed")."""

from __future__ import annotations

import json
from pathlib import Path

from lmaudit.atomic import write_text
from lmaudit.errors import InputError
from lmaudit.models.source import SUMMARY_FILE


def read_training_summary(folder: str | Path) -> dict | None:
    """The lmaudit_training.json of a model folder, or None when there is none; InputError naming it when unreadable."""
    path = Path(folder) / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: not a JSON file lmaudit wrote ({error}); retrain, or remove it") from None


def write_training_summary(folder: str | Path, summary: dict) -> None:
    """Write `summary` as the folder's lmaudit_training.json, whole or not at all."""
    write_text(Path(folder) / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")


def update_training_summary(folder: str | Path, update: dict, created: dict | None = None) -> dict:
    """Set `update`'s keys in the folder's lmaudit_training.json, keeping its others; a folder without one starts from
    `created` (InputError when none is given). The summary written."""
    summary = read_training_summary(folder)
    if summary is None:
        if created is None:
            raise InputError(f"{Path(folder) / SUMMARY_FILE}: missing; only a model folder lmaudit or its callbacks "
                             "wrote has one")
        summary = created
    summary = {**summary, **update}
    write_training_summary(folder, summary)
    return summary
