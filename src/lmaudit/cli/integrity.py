"""`lmaudit plan`, `lmaudit verify` and `lmaudit gate`: thresholds fixed before an audit, a report and the files it read
checked unchanged, and a release gate by exit status (docs/gate.md)."""

from __future__ import annotations

from pathlib import Path

import click

from lmaudit.cli.audit_options import audit_config, audit_settings_options, nonmember_files
from lmaudit.cli.help import GroupedCommand
from lmaudit.cli.options import BACKEND_NAMES, COLUMN_NAMES, EVALUATION_NAMES, PLACEMENT_NAMES, SIGNAL_NAMES
from lmaudit.errors import InputError

TAMPERED = 3  # exit status of a report, plan, model or data file changed since it was written or hashed
FAILED = 1  # exit status of a gate whose report is over a planned threshold
UNDECIDED = 4  # exit status of a gate that fails no threshold but cannot decide one: not a pass


@click.command(cls=GroupedCommand, groups={
    "Plan": "--out --threshold --accept-undecidable --overwrite --config",
    "Models": "--target --adapter --reference --reference-adapter --shadow --allow-tokenizer-mismatch",
    "Data": f"--members --nonmembers --population --calibration-members --shadow-members --shadow-nonmembers --data "
            f"{COLUMN_NAMES}",
    "Signal": f"{SIGNAL_NAMES} --token-signal",
    "Evaluation": EVALUATION_NAMES,
    "Attacks' settings": "--whitebox --whitebox-split --min-k-fraction --rmia-offline-a --lowercase --recall-prefix "
                         "--neighbours --neighbour-words --neighbour-model --self-prompt-reference --camia --samia "
                         "--reference-kl --frequency-data --extraction --field",
    "Served model (docs/serving.md)": "--engine --vllm-arg --target-url --reference-url --api --served-model "
                                      "--tolerance",
    "How the audit runs (given to audit --plan, not here)": f"{PLACEMENT_NAMES} {BACKEND_NAMES} --figures "
                                                            "--include-text --release --vllm-python --api-key-env "
                                                            "--concurrency --request-timeout --retries",
}, epilog="lmaudit plan --out plan.json --target model --reference base \\\n"
          "    --members members.csv --nonmembers nonmembers.csv \\\n"
          "    --population population.csv --threshold patient:risk=moderate \\\n"
          "    --threshold sample:auc:upper=0.8")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The plan file to write (plan.json).")
@click.option("--threshold", "thresholds", multiple=True, required=True, metavar="LEVEL:METRIC[:SIDE]=VALUE",
              help="Fail the gate when METRIC at LEVEL is over VALUE; LEVEL: sample, admission (subgroup), patient or "
                   "user (group); METRIC: auc or tpr_at_1pct_fpr (0 to 1; SIDE: the interval's upper end by default, "
                   "or point, lower) or risk (low, moderate); repeat.")
@click.option("--accept-undecidable", is_flag=True,
              help="Write the plan even where its data cannot decide a threshold (recorded in the plan; the gate then "
                   "says CANNOT DECIDE).")
@click.option("--overwrite", is_flag=True, help="Replace an existing plan file (a plan is meant to be written once).")
@click.option("--config", "config_path", default=None, type=click.Path(),
              help="audit.yaml with the audit's settings; options given here override its values.")
@audit_settings_options
def plan(out: str, thresholds: tuple[str, ...], accept_undecidable: bool, overwrite: bool, config_path: str | None,
         nonmembers: tuple[str, ...], extraction_asked: bool, **options) -> None:
    """Write an audit plan before the audit: model, data SHA-256, every setting the audit measures with, what the data
    can show per level, and the thresholds that fail the gate."""
    from lmaudit.audit.plan import plan_audit
    from lmaudit.report.plan import RUN_SETTINGS, parse_threshold, plan_lines, plan_sha256, write_plan

    run = next((name for name in RUN_SETTINGS if options.get(name) not in (None, False)), None)
    if run is not None:
        raise InputError(f"--{run.replace('_', '-')}: says how the audit runs, not what it measures; give it to "
                         "`lmaudit audit --plan`")
    if Path(out).exists() and not overwrite:
        raise InputError(f"{out}: a plan is already there; choose another --out, or give --overwrite to replace it")
    parsed = [parse_threshold(text) for text in thresholds]
    options["nonmembers"] = nonmember_files(nonmembers)
    config = audit_config(config_path, {**options, "out": out}, extraction_asked)
    written = write_plan(out, plan_audit(config, parsed, accept_undecidable))
    for line in plan_lines(written):
        click.echo(line)
    click.echo(f"plan {plan_sha256(written)}: {out}")


@click.command(epilog="lmaudit verify report")
@click.argument("out", type=click.Path())
def verify(out: str) -> None:
    """Rehash an audit's report, models, adapters, tokenizers and data files, and check the seal of every other result
    kept in the folder or below it (extraction, reconstruction, dataset inference, canaries): exit 0 intact, 3
    tampered, 2 bad input."""
    from lmaudit.report.documents import SEALED
    from lmaudit.report.verify import verify_bundle

    lines = verify_bundle(out, tuple(SEALED))
    _exit_if_tampered(lines)
    click.echo(f"intact: {out}")


@click.command(epilog="lmaudit gate report --plan plan.json")
@click.argument("report", type=click.Path())
@click.option("--plan", "plan_path", required=True, type=click.Path(), help="The plan written before the audit.")
def gate(report: str, plan_path: str) -> None:
    """Decide a report against its plan's thresholds, each PASS, FAIL or CANNOT DECIDE: exit 0 pass, 1 fail, 4 cannot
    decide, 3 tampered, 2 bad input."""
    from lmaudit.report.document import load_report
    from lmaudit.report.gate import FAIL, PASS, decisions, plan_mismatches, strength_lines
    from lmaudit.report.plan import load_plan
    from lmaudit.report.verify import verify_report

    planned, lines = load_plan(plan_path)
    _, report_lines = verify_report(report)
    _exit_if_tampered(lines + report_lines)
    document = load_report(report)  # intact: the report lmaudit wrote, read as its model
    _exit_if_tampered(plan_mismatches(document, planned))
    for line in strength_lines(document, planned):
        click.echo(line)
    outcomes = decisions(document, planned.thresholds)
    for outcome in outcomes:
        click.echo(outcome.line)
    found = {outcome.decision for outcome in outcomes}
    if FAIL in found:
        raise click.exceptions.Exit(FAILED)
    if found != {PASS}:
        raise click.exceptions.Exit(UNDECIDED)
    click.echo(f"pass: {report} meets every threshold of {plan_path}")


def _exit_if_tampered(lines: list[str]) -> None:
    """Each mismatch on its own line, then exit status 3; nothing when there is none."""
    for line in lines:
        click.echo(f"tampered: {line}")
    if lines:
        raise click.exceptions.Exit(TAMPERED)


COMMANDS = (plan, verify, gate)
