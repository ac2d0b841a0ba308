"""Assemble report.json (docs/design.md schema) and write the audit's output folder, all files or none."""

from __future__ import annotations

import logging
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lmaudit import __version__
from lmaudit.attacks.base import AttackScores, Skipped
from lmaudit.metrics.evaluate import ExtremeScores
from lmaudit.metrics.permutation_tests import LeakageTests
from lmaudit.metrics.results import AttackResult
from lmaudit.report.checks import audit_warnings, extreme_score_warnings, population_mismatch_warnings
from lmaudit.report.coverage import coverage_section
from lmaudit.report.derived import stale_files
from lmaudit.report.document import typed_report
from lmaudit.report.documents import headed, write_document
from lmaudit.report.html import render_html
from lmaudit.report.tables import ranking
from lmaudit.report.validity import ranking_with_lift, shift_caveats, verdict_set_levels, with_lift
from lmaudit.report.verdict import DATASET_INFERENCE_RULE, verdict
from lmaudit.strict_json import json_ready

REPORT_FILE = "report.json"

log = logging.getLogger(__name__)


def source_revision() -> str | None:
    """The git commit of the lmaudit source that runs (with '-dirty' if it has uncommitted changes), when it runs from
    a git checkout of the project (src/lmaudit beside pyproject.toml); None for an installed release or without git."""
    source = Path(__file__).resolve().parents[1]
    if source.parent.name != "src" or not (source.parents[1] / "pyproject.toml").is_file():
        return None  # installed into site-packages: a surrounding repository's commit would not be lmaudit's
    try:
        described = subprocess.run(["git", "-C", str(source), "describe", "--always", "--dirty", "--abbrev=12"],
                                   capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (described.stdout.strip() or None) if described.returncode == 0 else None


def environment_info(device: str = "cpu") -> dict:
    """Versions of what produced the numbers: lmaudit (and its git commit), Python, the libraries, the device."""
    from importlib.metadata import PackageNotFoundError, version

    info = {"lmaudit": __version__, "lmaudit_git": source_revision(), "python": platform.python_version(),
            "platform": platform.platform(), "device": device}
    for package in ("torch", "transformers", "numpy", "scikit-learn"):
        try:
            info[package] = version(package)
        except PackageNotFoundError:  # a package that is not installed is simply not recorded
            info[package] = None
    return info


@dataclass(frozen=True)
class AuditFacts:
    """What report.json says of an audit besides its findings: the configuration as given, the environment that
    computed it, what each level's unit is called, the audited models' training summaries (by role, when known) and
    files (folders, adapters, fingerprints, each file's SHA-256), the caveats the verdict must carry about the audit
    itself, and its provenance."""

    config: dict
    environment: dict
    level_names: dict[str, str]
    models: dict | None = None
    model_files: dict | None = None
    caveats: list[str] = field(default_factory=list)
    provenance: dict | None = None  # the data files' SHA-256, the weights' dtype, the plan run (report/integrity.py)


def build_report(facts: AuditFacts, data: dict, results: list[AttackResult], skipped: list[Skipped],
                 extreme: list[ExtremeScores], delta: float, validity: dict | None = None,
                 tests: LeakageTests | None = None, sections: dict | None = None) -> dict:
    """The report.json document (docs/design.md schema, version 1): the verdict (`summary`) first, the attacks ranked at
    each level, and the checks' warnings after the given ones (the facts' caveats lead them); `delta`: that of the
    epsilon lower bounds; `validity`: the blind baseline and the population test (metrics/validity.py), and `tests`:
    the permutation tests (metrics/permutation_tests.py), both of which the verdict reads; `sections`: the audit's other
    findings, by key (`per_class`: a classifier audit's per-class analyses, metrics/per_class.py:per_class_report;
    `dataset_inference`, `extraction`, `localisation`), so that the report is built once, after every finding;
    `extreme`: the attacks with scores near the largest floats (metrics/evaluate.py:extreme_scores), which the
    warnings name."""
    population = (validity or {}).get("population")
    warnings = ((population_mismatch_warnings(population, facts.level_names) if population else [])
                + extreme_score_warnings(extreme))
    sections = dict(sections or {})
    per_class = sections.pop("per_class", None)
    if "dataset_inference" in sections and "unavailable" not in sections["dataset_inference"]:
        sections["dataset_inference"] = {"suspect": "the audited members", "validation": "the verdict's non-members",
                                         **sections["dataset_inference"], "rule": DATASET_INFERENCE_RULE}
    document = json_ready({
        "config": facts.config,
        "environment": facts.environment,
        "data": data,
        "results": results,
        "skipped": skipped,
        "warnings": [*facts.caveats, *warnings],
        **({"models": facts.models} if facts.models else {}),
        **({"model_files": facts.model_files} if facts.model_files else {}),
        **({"per_class": per_class} if per_class else {}),
        "level_names": facts.level_names,
        **({"leakage_tests": tests} if tests is not None else {}),
        **sections,
        **({"provenance": facts.provenance} if facts.provenance else {}),
    })
    document["warnings"] += audit_warnings(document, results)
    validity = json_ready(validity)
    ranked = ranking_with_lift(ranking(results), validity)
    document["ranking"] = json_ready(ranked)
    blind = verdict_set_levels(validity) or None
    sets = list(data.get("nonmember_sets", {}))
    summary = verdict(results, ranked, document["level_names"], delta, blind, tests, sets[0] if sets else None)
    said = {"caveats": [*facts.caveats, *population_caveats(data.get("counts", {}))]}
    if validity is not None:
        document["validity"] = with_lift(validity, ranked)
        said["shift"], said["shift_elsewhere"] = shift_caveats(validity, document["level_names"])
    summary = summary.model_copy(update={key: lines for key, lines in said.items() if lines})  # said only where any
    document["coverage"] = coverage_section(document, summary.threat_models)  # words only, after every number it names
    return headed(REPORT_FILE, {"summary": json_ready(summary), **document})


NO_POPULATION = ("no population data (texts never trained on, besides the audited non-members): no threshold was "
                 "calibrated as an attacker would set one, so the report gives no precision, recall or epsilon lower "
                 "bound at such a threshold, and 'high' rests on the true-positive rate at the audited non-members' own "
                 "1% threshold alone; give --population to measure them")


def population_caveats(counts: dict) -> list[str]:
    """The verdict's caveat where the audit had no population data and no shadow model to calibrate thresholds."""
    calibrated = counts.get("population", 0) or any(role.startswith("shadow") for role in counts)
    return [] if calibrated else [NO_POPULATION]


def write_report(out_dir: str | Path, report: dict, scores: pd.DataFrame, attacks: list[AttackScores],
                 highlighted: list[dict] | None = None) -> None:
    """Write scores.parquet, report.html and report.json into `out_dir`, all or nothing (report.json last, so an
    interrupted audit never leaves a half-written report); `highlighted`: the member texts with their top spans, shown
    on the page (--include-text only: training text)."""
    page = render_html(typed_report(report), attacks, highlighted)
    write_document(out_dir, REPORT_FILE, report, page=("report.html", page), table=("scores.parquet", scores))
    for stale in stale_files(Path(out_dir)):  # made from the report this one replaces
        stale.unlink()
        log.info("removed %s: it was made from the report this audit replaced", stale)
