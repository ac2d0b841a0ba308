"""Write docs/schema/<file>.schema.json, the JSON Schema of every file lmaudit writes, from its model: the documents
(src/lmaudit/report/document.py) and the files beside them (the plan, a study cell's record, the model card's
privacy_evaluation.json, a training run's checkpoint audits, a model folder's lmaudit_training.json): `.venv/bin/python scripts/schema_docs.py`.
tests/report/test_document.py fails when a file there is not what this writes."""

from __future__ import annotations

import json
from pathlib import Path

FOLDER = Path(__file__).resolve().parent.parent / "docs" / "schema"


def all_schemas() -> dict[str, dict]:
    """Each file's JSON Schema, by file name."""
    from lmaudit.models.source import SUMMARY_FILE
    from lmaudit.models.training_file import TrainingRecord
    from lmaudit.report.cell_record import CellRecord
    from lmaudit.report.document import schemas
    from lmaudit.report.model_card import EVALUATION_FILE, PrivacyEvaluation
    from lmaudit.report.plan import PlanDocument
    from lmaudit.studies.runner import CELL_FILE
    from lmaudit.training.checkpoint_audit import AUDITS_FILE, CHECKPOINT_AUDITS

    return {**schemas(), "plan.json": PlanDocument.model_json_schema(by_alias=True),
            CELL_FILE: CellRecord.model_json_schema(by_alias=True),
            EVALUATION_FILE: PrivacyEvaluation.model_json_schema(by_alias=True),
            AUDITS_FILE: CHECKPOINT_AUDITS.json_schema(by_alias=True),
            SUMMARY_FILE: TrainingRecord.model_json_schema(by_alias=True)}


if __name__ == "__main__":
    FOLDER.mkdir(exist_ok=True)
    for name, schema in all_schemas().items():
        (FOLDER / name.replace(".json", ".schema.json")).write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
