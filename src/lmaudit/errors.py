"""The one exception type that the CLI turns into a one-line message and exit status 2, and how messages name a row."""

from __future__ import annotations

from collections.abc import Mapping


class InputError(Exception):
    """Bad user input: the message names the file, row or field and says what to do."""


def row_location(row: Mapping) -> str:
    """'FILE, row N' for a corpus row (its `source` and `row` columns): how every error names a row."""
    return f"{row['source']}, row {row['row']}"
