"""The one writer of output documents: the header every document opens with, strict JSON, and its page and table
written with it, all or none."""

import json

import numpy as np
import pandas as pd
import pytest

from lmaudit import __version__
from lmaudit.report.documents import DOCUMENTS, SCHEMA_VERSION, write_document


def test_a_document_opens_with_the_header_and_keeps_its_own_values(tmp_path):
    """schema_version, kind (the file's), lmaudit_version and created come first; NaN and infinities become null; a
    document that already carries a header (report.json is headed when built) keeps it."""
    written = write_document(tmp_path, "sweep.json", {"rows": [{"rate": float("nan"), "bound": np.inf, "pair": (1, 2)}]})
    on_disk = json.loads((tmp_path / "sweep.json").read_text())
    assert list(on_disk)[:4] == ["schema_version", "kind", "lmaudit_version", "created"]
    assert (on_disk["schema_version"], on_disk["kind"], on_disk["lmaudit_version"]) == (SCHEMA_VERSION, "dp_sweep",
                                                                                          __version__)
    assert on_disk["rows"] == [{"rate": None, "bound": None, "pair": [1, 2]}]
    assert written["kind"] == "dp_sweep" and written["created"] == on_disk["created"]
    again = write_document(tmp_path, "sweep.json", {**written, "created": "then"})
    assert again["created"] == "then" and json.loads((tmp_path / "sweep.json").read_text())["created"] == "then"


def test_the_page_and_table_come_with_the_document_all_or_none(tmp_path):
    """A table that cannot be written leaves no document, no page and no earlier file replaced; a good one writes all
    three."""
    table = pd.DataFrame({"sample_id": ["a", "b"], "rank": [1, 2]})
    write_document(tmp_path, "sweep.json", {"rows": []}, page=("page.html", "<p>1</p>"),
                   table=("t.parquet", table))
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    assert set(before) == {"sweep.json", "page.html", "t.parquet"}

    class Unwritable(pd.DataFrame):
        def to_parquet(self, *args, **kwargs):
            raise OSError("disk full")

    with pytest.raises(OSError):
        write_document(tmp_path, "sweep.json", {"rows": [{"n": 2}]}, page=("page.html", "<p>2</p>"),
                       table=("t.parquet", Unwritable(table)))
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_every_document_kind_is_named_once():
    kinds = [kind for kind, _ in DOCUMENTS.values()]
    assert len(set(kinds)) == len(kinds) and all(name.endswith(".json") for name in DOCUMENTS)
