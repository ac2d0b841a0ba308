"""An audit's headline numbers and its sealed report, logged to the team's MLflow tracking server beside its training
runs (the optional `mlflow` extra): per level its headline (report/document.py:LevelVerdict.headline, under the same
names: the strongest attack's AUC and interval, the TPR at 1% FPR and its interval, the epsilon lower bound) as metrics; the risk, lmaudit's version and the report's SHA-256 as tags; report.json,
report.html and report.pdf as artifacts. Never scores.parquet: it is the membership list, by sample id."""

from __future__ import annotations

from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.report.document import ReportDocument, load_report

ARTIFACTS = ("report.json", "report.html", "report.pdf")  # what an audit shows anyone who may see its results


def headline_metrics(report: ReportDocument) -> dict[str, float]:
    """'<level>.<number>': each level's headline numbers that were measured (NaN and missing left out), named as the
    headline names them."""
    return {f"{name}.{key}": value for name, level in report.summary.levels.items()
            for key, value in level.headline().items() if value is not None}


def headline_tags(report: ReportDocument) -> dict[str, str]:
    """The run's tags: the overall and per-level risk, lmaudit's version, the report's canonical SHA-256."""
    tags = {"lmaudit.risk": report.summary.risk, "lmaudit.version": report.lmaudit_version,
            **{f"lmaudit.{name}.risk": level.risk for name, level in report.summary.levels.items()}}
    if report.integrity is not None:
        tags["lmaudit.report_sha256"] = report.integrity.report_sha256
    return tags


def log_to_mlflow(out: str | Path, tracking_uri: str | None = None, experiment: str | None = None,
                  run_id: str | None = None) -> str:
    """Log the audit folder `out` to MLflow (a new run in `experiment`, or the existing run `run_id`: the training run
    audited); the run's id."""
    try:
        import mlflow
    except ImportError:
        raise InputError("logging to MLflow needs the optional extra: pip install 'lmaudit[mlflow]'") from None
    out = Path(out)
    report = load_report(out)
    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    if experiment and not run_id:
        mlflow.set_experiment(experiment)
    with mlflow.start_run(run_id=run_id, run_name=None if run_id else f"lmaudit {out.name}") as run:
        mlflow.log_metrics(headline_metrics(report))
        mlflow.set_tags(headline_tags(report))
        for name in ARTIFACTS:
            if (out / name).is_file():
                mlflow.log_artifact(str(out / name), artifact_path="lmaudit")
    return run.info.run_id
