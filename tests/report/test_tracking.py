"""An audit logged to MLflow (a local file store): each level's headline numbers as metrics equal to report.json's, the
risks and the report's SHA-256 as tags, the report's page and JSON as artifacts, and never scores.parquet (the
membership list); logging into an existing run keeps that run's own metrics."""

import json

import pytest

from lmaudit.report.documents import write_document
from tests.helpers import run_cli
from tests.report.test_build import small_report

mlflow = pytest.importorskip("mlflow")


@pytest.fixture()
def tracking(tmp_path, monkeypatch):
    """A local tracking store (MLflow's file store, still supported behind this switch) and an audit folder."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    written = write_document(tmp_path / "audit", "report.json", small_report())
    (tmp_path / "audit" / "scores.parquet").write_bytes(b"the membership list")
    return f"file://{tmp_path / 'mlruns'}", tmp_path / "audit", written


def test_the_runs_metrics_tags_and_artifacts_are_the_reports(tracking):
    uri, out, written = tracking
    code, output = run_cli("mlflow", out, "--tracking-uri", uri, "--experiment", "audits")
    assert code == 0, output
    run = mlflow.MlflowClient(uri).get_run(output.split("mlflow run: ")[1].split()[0])
    expected = {}
    for name, level in written["summary"]["levels"].items():
        expected[f"{name}.auc"] = level["strongest"]["auc"]
        expected[f"{name}.auc_low"], expected[f"{name}.auc_high"] = level["strongest"]["auc_ci"]
        if level.get("tpr_at_1pct_fpr"):
            expected[f"{name}.tpr_at_1pct_fpr"] = level["tpr_at_1pct_fpr"]["tpr"]
            expected[f"{name}.tpr_low"], expected[f"{name}.tpr_high"] = level["tpr_at_1pct_fpr"]["tpr_ci"]
        if level.get("epsilon_lower_bound"):
            expected[f"{name}.epsilon_lower_bound"] = level["epsilon_lower_bound"]["epsilon_lower_bound"]
    assert run.data.metrics == pytest.approx({k: v for k, v in expected.items() if v is not None})
    assert run.data.tags["lmaudit.risk"] == written["summary"]["risk"]
    assert run.data.tags["lmaudit.report_sha256"] == json.loads((out / "report.json").read_text())["integrity"]["report_sha256"]
    logged = {item.path for item in mlflow.MlflowClient(uri).list_artifacts(run.info.run_id, "lmaudit")}
    assert "lmaudit/report.json" in logged and not any("scores" in path for path in logged)


def test_logging_into_the_training_run_keeps_its_own_metrics(tracking):
    uri, out, _ = tracking
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("training")  # this store's own: MLflow keeps the active experiment per process
    with mlflow.start_run() as training:
        mlflow.log_metric("train_loss", 1.25)
    code, output = run_cli("mlflow", out, "--tracking-uri", uri, "--run-id", training.info.run_id)
    assert code == 0, output
    metrics = mlflow.MlflowClient(uri).get_run(training.info.run_id).data.metrics
    assert metrics["train_loss"] == 1.25 and any(name.endswith(".auc") for name in metrics)
