"""Write docs/schema/<document>.schema.json, the JSON Schema of every document lmaudit writes, from its model
(src/lmaudit/report/document.py): `.venv/bin/python scripts/schema_docs.py`. tests/report/test_document.py fails when a
file there is not what this writes."""

from __future__ import annotations

import json
from pathlib import Path

from lmaudit.report.document import schemas

FOLDER = Path(__file__).resolve().parent.parent / "docs" / "schema"

if __name__ == "__main__":
    FOLDER.mkdir(exist_ok=True)
    for name, schema in schemas().items():
        (FOLDER / name.replace(".json", ".schema.json")).write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
