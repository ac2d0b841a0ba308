"""`lmaudit pdf`, `lmaudit model-card` and `lmaudit mlflow`: an audit's evidence where the people who act on it need it,
the PDF a data-protection officer attaches (report/pdf.py), the model card's privacy section (report/model_card.py) and
the team's experiment tracker (report/tracking.py)."""

from __future__ import annotations

from pathlib import Path

import click

from lmaudit.cli.renamed import RenamingCommand


@click.command()
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
def pdf(out: Path) -> None:
    """Write OUT/report.pdf from the audit folder OUT's report.json: the verdict, what was tested, the limits and the
    key figures on a few pages (an erasure audit's folder: OUT/erasure.pdf from its erasure.json; a canary audit's:
    OUT/canary_report.pdf from its canary_report.json; needs `pip install 'lmaudit[pdf]'`)."""
    from lmaudit.canaries.report import REPORT_FILE, write_canary_pdf
    from lmaudit.report.pdf import write_pdf

    canary_audit = not (out / "report.json").is_file() and (out / REPORT_FILE).is_file()
    click.echo(f"pdf: {write_canary_pdf(out) if canary_audit else write_pdf(out)}")


@click.command("model-card", cls=RenamingCommand, renamed={"--model": "--target"})
@click.option("--report", "report", required=True, type=click.Path(path_type=Path),
              help="The audit's report.json, or its output folder.")
@click.option("--target", "model", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The model folder whose README.md (model card) gets the section.")
@click.option("--overwrite", is_flag=True, help="Replace the card's existing Privacy evaluation section.")
def model_card(report: Path, model: Path, overwrite: bool) -> None:
    """Add a "Privacy evaluation" section and the Hub's model-index results to the model's card (README.md), and
    privacy_evaluation.json beside it, from an audit's report.json; written locally, nothing uploaded."""
    from lmaudit.report.model_card import write_model_card

    click.echo(f"model card: {write_model_card(model, report, overwrite)}")


@click.command()
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--tracking-uri", default=None, help="The MLflow tracking server (default: MLflow's own, from "
              "MLFLOW_TRACKING_URI).")
@click.option("--experiment", default=None, help="The experiment of a new run (default: MLflow's).")
@click.option("--run-id", default=None, help="Log into this existing run (the training run audited) instead of a new one.")
def mlflow(out: Path, tracking_uri: str | None, experiment: str | None, run_id: str | None) -> None:
    """Log the audit folder OUT to MLflow: each level's headline numbers as metrics, the risk and the report's SHA-256 as
    tags, report.json, report.html and report.pdf as artifacts (never scores.parquet, the membership list). Needs
    `pip install 'lmaudit[mlflow]'`."""
    from lmaudit.report.tracking import log_to_mlflow

    click.echo(f"mlflow run: {log_to_mlflow(out, tracking_uri, experiment, run_id)}")


COMMANDS = (pdf, model_card, mlflow)
