"""Every document lmaudit writes has a typed model: a document that does not match it is never written, a written one
reads back into it and writes out to the same JSON, and docs/schema/ holds each model's JSON Schema."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.metrics.results import AttackResult
from lmaudit.report.document import DOCUMENT_MODELS, ReportDocument, load_document, load_report, schemas
from lmaudit.report.documents import write_document
from lmaudit.strict_json import json_ready
from tests.helpers import assert_document_round_trips
from tests.report.test_build import small_report

SCHEMA_FOLDER = Path(__file__).parents[2] / "docs" / "schema"


def test_a_report_reads_back_as_typed_attributes_and_writes_out_to_the_same_json(tmp_path):
    """NaN precision (a threshold that calls no one) is null in the file and NaN in the model; the results are the
    metrics' own records; the round trip is exact."""
    written = write_document(tmp_path, "report.json", small_report())
    report = load_report(tmp_path)
    assert isinstance(report, ReportDocument) and isinstance(report.results[0], AttackResult)
    assert report.summary.risk == written["summary"]["risk"]
    assert report.results[0].auc == written["results"][0]["auc"]
    never_calls = report.results[0].thresholds[0]
    assert math.isnan(never_calls.precision) and written["results"][0]["thresholds"][0]["precision"] is None
    assert report.skipped[0].attack == "min_k"
    assert_document_round_trips(tmp_path / "report.json")


def test_a_document_that_does_not_match_its_model_is_never_written(tmp_path):
    """A misspelt key in the verdict is a writer's bug: refused, naming where, with nothing on disk."""
    report = small_report()
    report["summary"] = {**report["summary"], "riks": "low"}
    with pytest.raises(ValueError, match="report.json does not match its schema at summary.riks"):
        write_document(tmp_path / "out", "report.json", report)
    assert not (tmp_path / "out").exists()


def test_a_file_that_is_not_a_document_is_refused_in_one_line_naming_it(tmp_path):
    (tmp_path / "report.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(InputError, match=r"report.json: not a report.json of this lmaudit's schema .*rerun"):
        load_report(tmp_path)
    (tmp_path / "notes.json").write_text("{}")
    with pytest.raises(InputError, match="notes.json: not a document lmaudit writes"):
        load_document(tmp_path / "notes.json")


def test_docs_schema_holds_every_written_files_current_json_schema():
    """Tools that validate a report, a plan or a cell read docs/schema/<file>.schema.json; scripts/schema_docs.py
    writes them, for every document and every file beside them."""
    spec = importlib.util.spec_from_file_location("schema_docs", SCHEMA_FOLDER.parents[1] / "scripts" / "schema_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    every = module.all_schemas()
    assert set(DOCUMENT_MODELS) | {"plan.json", "cell.json", "privacy_evaluation.json",
                                   "lmaudit_checkpoint_audits.json", "lmaudit_training.json"} == set(every)
    for name, schema in every.items():
        path = SCHEMA_FOLDER / name.replace(".json", ".schema.json")
        assert path.is_file(), f"{path} missing: run scripts/schema_docs.py"
        assert json.loads(path.read_text()) == schema, f"{path} is stale: run scripts/schema_docs.py"
    assert set(every) == {p.name.replace(".schema.json", ".json") for p in SCHEMA_FOLDER.glob("*.schema.json")}


def test_the_schema_admits_null_where_a_number_is_not_one():
    threshold = schemas()["report.json"]["$defs"]["ThresholdResult"]["properties"]["precision"]
    assert threshold["type"] == ["number", "null"]
    assert json_ready(float("nan")) is None
