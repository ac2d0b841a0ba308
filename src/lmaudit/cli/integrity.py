"""`lmaudit plan`, `lmaudit verify` and `lmaudit gate`: thresholds fixed before an audit, a report and the files it read
checked unchanged, and a release gate by exit status (docs/gate.md)."""

from __future__ import annotations

from pathlib import Path

import click

from lmaudit.errors import InputError

TAMPERED = 3  # exit status of a report, plan, model or data file changed since it was written or hashed
FAILED = 1  # exit status of a gate whose report is over a planned threshold


@click.command(epilog="lmaudit plan --out plan.json --target model --members members.csv \\\n"
                      "    --nonmembers nonmembers.csv --threshold sample:auc_upper=0.6 \\\n"
                      "    --threshold sample:tpr_at_1pct_fpr=0.05 --threshold group:risk=moderate")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The plan file to write (plan.json).")
@click.option("--target", required=True, type=click.Path(), help="The model folder the audit will read.")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter applied to --target.")
@click.option("--reference", multiple=True, type=click.Path(), help="Reference model; repeat for several.")
@click.option("--members", default=None, type=click.Path(), help="Samples the target trained on.")
@click.option("--nonmembers", multiple=True, metavar="[NAME=]FILE", help="Samples it did not; NAME=FILE for sets.")
@click.option("--population", default=None, type=click.Path(), help="Unseen texts for calibration.")
@click.option("--calibration-members", default=None, type=click.Path(), help="Known training samples, not audited.")
@click.option("--data", default=None, type=click.Path(), help="One file with a 'role' column instead of role files.")
@click.option("--seed", default=0, type=int, help="Seed of the signals, bootstrap and permutation tests.")
@click.option("--threshold", "thresholds", multiple=True, required=True, metavar="LEVEL:METRIC=VALUE",
              help="Fail the gate when METRIC at LEVEL is over VALUE; METRIC: auc_upper, tpr_at_1pct_fpr (0 to 1) or "
                   "risk (low, moderate, high); repeat.")
@click.option("--overwrite", is_flag=True, help="Replace an existing plan file (a plan is meant to be written once).")
def plan(out: str, thresholds: tuple[str, ...], overwrite: bool, **options) -> None:
    """Write an audit plan before the audit: model, data SHA-256, seed and the thresholds that fail the gate."""
    from lmaudit.atomic import write_text
    from lmaudit.cli.audit import nonmember_files
    from lmaudit.config import given
    from lmaudit.report.integrity import written_form
    from lmaudit.report.plan import parse_threshold, plan_document, plan_sha256

    options["nonmembers"] = nonmember_files(options["nonmembers"])
    if not options.get("data") and not (options.get("members") and options.get("nonmembers")):
        raise InputError("missing --members and --nonmembers (or --data); the plan names the data the audit reads")
    if Path(out).exists() and not overwrite:
        raise InputError(f"{out}: a plan is already there; choose another --out, or give --overwrite to replace it")
    document = plan_document(given(options), [parse_threshold(text) for text in thresholds])
    write_text(out, written_form(document))
    click.echo(f"plan {plan_sha256(document)}: {out}")


@click.command(epilog="lmaudit verify report")
@click.argument("out", type=click.Path())
def verify(out: str) -> None:
    """Rehash an audit's report, models, adapters, tokenizers and data files, and check the seal of every other result
    kept in the folder or below it (extraction, reconstruction, dataset inference, canaries): exit 0 intact, 3
    tampered, 2 bad input."""
    from lmaudit.report.documents import SEALED
    from lmaudit.report.integrity import verify_bundle

    lines = verify_bundle(out, tuple(SEALED))
    _exit_if_tampered(lines)
    click.echo(f"intact: {out}")


@click.command(epilog="lmaudit gate report --plan plan.json")
@click.argument("report", type=click.Path())
@click.option("--plan", "plan_path", required=True, type=click.Path(), help="The plan written before the audit.")
def gate(report: str, plan_path: str) -> None:
    """Pass or fail a report against its plan's thresholds: exit 0 pass, 1 fail, 3 tampered, 2 bad input."""
    from lmaudit.report.gate import plan_mismatches, threshold_outcomes
    from lmaudit.report.integrity import verify_report
    from lmaudit.report.plan import load_plan

    planned, lines = load_plan(plan_path)
    document, report_lines = verify_report(report)
    lines += report_lines
    _exit_if_tampered(lines or plan_mismatches(document, planned))
    outcomes = threshold_outcomes(document, planned["thresholds"])
    for outcome in outcomes:
        click.echo(outcome.line)
    if not all(outcome.passed for outcome in outcomes):
        raise click.exceptions.Exit(FAILED)
    click.echo(f"pass: {report} meets every threshold of {plan_path}")


def _exit_if_tampered(lines: list[str]) -> None:
    """Each mismatch on its own line, then exit status 3; nothing when there is none."""
    for line in lines:
        click.echo(f"tampered: {line}")
    if lines:
        raise click.exceptions.Exit(TAMPERED)


COMMANDS = (plan, verify, gate)
