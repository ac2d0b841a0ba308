"""The names a corpus file gives lmaudit's columns (text, sample_id, group_id, label): a file's own names are renamed to
lmaudit's as it is read, so that nothing after reading depends on them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lmaudit.errors import InputError

if TYPE_CHECKING:  # the configuration imports this module, and the command line must start without pandas
    import pandas as pd

# The command-line option that names each column (the configuration's `columns:` section names it by the field).
COLUMN_OPTIONS = {"text": "--text-column", "sample_id": "--id-column", "group_id": "--group-column",
                  "label": "--label-column"}


class ColumnNames(BaseModel):
    """The corpus files' column of each of lmaudit's columns (default: the column of lmaudit's name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str = Field("text", min_length=1, description="The data files' column of the texts, one sample a row.")
    sample_id: str = Field("sample_id", min_length=1, description="The data files' column of the sample ids (a file "
                                                                  "without it: ids made of its name and row).")
    group_id: str = Field("group_id", min_length=1, description="The data files' column of each sample's group (its "
                                                                "patient or user).")
    label: str = Field("label", min_length=1, description="The data files' column of each sample's true label "
                                                          "(classifiers).")

    @model_validator(mode="after")
    def _distinct(self) -> ColumnNames:
        names = self.model_dump()
        for field, name in names.items():
            others = [other for other, value in names.items() if value == name and other != field]
            if others:
                raise ValueError(f"'{name}' names both the {field} and the {others[0]} column; give each its own column")
        return self

    def renames(self) -> dict[str, str]:
        """{the file's name: lmaudit's name} of each column named otherwise than lmaudit names it."""
        return {name: field for field, name in self.model_dump().items() if name != field}


DEFAULT_COLUMNS = ColumnNames()


def described(field: str) -> str:
    """How an error names the setting of a column: its option and its configuration key."""
    return f"{COLUMN_OPTIONS[field]}, columns.{field} in a config"


def renamed(table: pd.DataFrame, names: ColumnNames, path: Path) -> pd.DataFrame:
    """`table` with the columns `names` gives renamed to lmaudit's names; InputError naming `path` for a named column
    the file lacks, or for a rename onto a column the file already has."""
    renames = names.renames()
    if not renames:
        return table
    for name, field in renames.items():
        if name not in table.columns:
            found = ", ".join(map(str, table.columns)) or "none"
            raise InputError(f"{path}: no '{name}' column ({described(field)}); its columns are: {found}")
        if field in table.columns and field not in renames:  # a column renamed away frees its name (a swap is fine)
            raise InputError(f"{path}: has both a '{name}' column ({described(field)}) and a '{field}' column; drop "
                             f"or rename its '{field}' column")
    return table.rename(columns=renames)
