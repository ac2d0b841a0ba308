"""Assemble report.json (docs/design.md schema) and write the audit's output folder, all files or none."""

from __future__ import annotations

import json
import math
import platform
import subprocess
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from lmaudit import __version__
from lmaudit.atomic import staged
from lmaudit.attacks.base import AttackScores, Skipped
from lmaudit.data.roles import NONMEMBER_SET
from lmaudit.errors import InputError
from lmaudit.metrics.clusters import ungrouped_count
from lmaudit.metrics.leakage_test import LeakageTests
from lmaudit.metrics.results import AttackResult
from lmaudit.metrics.validity import ranking_with_lift, shift_caveats, verdict_set_levels, with_lift
from lmaudit.models.source import SUMMARY_FILE
from lmaudit.report.checks import audit_warnings
from lmaudit.report.html import render_html
from lmaudit.report.tables import ranking
from lmaudit.report.verdict import verdict

SCHEMA_VERSION = 1


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


def data_summary(signals: pd.DataFrame) -> dict:
    """Counts per role, groups per role, truncated samples, the samples without a group id where others have one
    (`ungrouped`, when any), and the non-member samples of each set when there are several (in the order given: the
    first is the one the main results audit)."""
    groups = signals.dropna(subset=["group_id"]).groupby("role")["group_id"].nunique()
    truncated = int(signals["truncated"].fillna(False).astype(bool).sum()) if "truncated" in signals else 0
    summary = {
        "counts": {role: int(n) for role, n in signals["role"].value_counts().sort_index().items()},
        "groups": {role: int(n) for role, n in groups.items()},
        "truncated": truncated,
    }
    if ungrouped_count(signals):
        summary["ungrouped"] = ungrouped_count(signals)
    if NONMEMBER_SET in signals:
        sets = signals[NONMEMBER_SET].dropna()
        summary["nonmember_sets"] = {name: int((sets == name).sum()) for name in dict.fromkeys(sets)}
    return summary


def json_ready(value):
    """The report.json form of a value: the one place results become JSON. Dataclasses become dicts (a field marked
    optional is left out when None), tuples lists, and NaN and infinities null, so the file stays strict JSON."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_ready(getattr(value, f.name)) for f in fields(value)
                if not (f.metadata.get("optional") and getattr(value, f.name) is None)}
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class AuditFacts:
    """What report.json says of an audit besides its findings: the configuration as given, the environment that
    computed it, what each level's unit is called, the audited models' training summaries (by role, when known) and
    files (folders, adapters, fingerprints), and the caveats the verdict must carry about the audit itself."""

    config: dict
    environment: dict
    level_names: dict[str, str]
    models: dict | None = None
    model_files: dict | None = None
    caveats: list[str] = field(default_factory=list)


def build_report(facts: AuditFacts, data: dict, results: list[AttackResult], skipped: list[Skipped], warnings: list[str],
                 delta: float, per_class: dict | None = None, validity: dict | None = None,
                 tests: LeakageTests | None = None) -> dict:
    """The report.json document (docs/design.md schema, version 1): the verdict (`summary`) first, the attacks ranked at
    each level, and the checks' warnings after the given ones (the facts' caveats lead them); `per_class`: a classifier
    audit's per-class analyses (metrics/per_class.py:per_class_report); `delta`: that of the epsilon lower bounds;
    `validity`: the blind baseline and the population test (metrics/validity.py), and `tests`: the permutation tests
    (metrics/leakage_test.py), both of which the verdict reads."""
    document = json_ready({
        "schema_version": SCHEMA_VERSION,
        "lmaudit_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
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
    })
    document["warnings"] += audit_warnings(document)
    validity = json_ready(validity)
    document["ranking"] = ranking_with_lift(ranking(document["results"]), validity)
    blind = verdict_set_levels(validity) or None
    sets = list(data.get("nonmember_sets", {}))
    summary = verdict(document["results"], document["ranking"], document["level_names"], delta, blind,
                      document.get("leakage_tests"), sets[0] if sets else None)
    caveats = [*facts.caveats, *population_caveats(data.get("counts", {}))]
    if caveats:
        summary["caveats"] = caveats
    if validity is not None:
        document["validity"] = with_lift(validity, document["ranking"])
        shift, elsewhere = shift_caveats(validity, document["level_names"])
        if shift:
            summary["shift"] = shift
        if elsewhere:
            summary["shift_elsewhere"] = elsewhere
    return {"schema_version": document.pop("schema_version"), "summary": summary, **document}


NO_POPULATION = ("no population data (texts never trained on, besides the audited non-members): no threshold was "
                 "calibrated as an attacker would set one, so the report gives no precision, recall or epsilon lower "
                 "bound at such a threshold, and 'high' rests on the true-positive rate at the audited non-members' own "
                 "1% threshold alone; give --population to measure them")


def population_caveats(counts: dict) -> list[str]:
    """The verdict's caveat where the audit had no population data and no shadow model to calibrate thresholds."""
    calibrated = counts.get("population", 0) or any(role.startswith("shadow") for role in counts)
    return [] if calibrated else [NO_POPULATION]


PRESENTATION = ("figures",)  # settings of how a report is drawn, not of what it found: a rerun may change them
# Each command's result file, and how an error names it: one folder holds one run's result.
RESULT_FILES = {"report.json": "an audit's report", "extraction.json": "an extraction's result",
                "reconstruction.json": "a reconstruction's result", "dataset_inference.json": "a dataset inference's result",
                "canary_report.json": "a canary audit's report"}


def refuse_another_run(out: str | Path, config: dict, overwrite: bool = False, result_file: str = "report.json") -> None:
    """Refuse to write `result_file` into a folder that holds another run's results: a model, another command's result
    file, or this command's run configured otherwise (InputError naming the first setting that differs), unless
    `overwrite`. A rerun of the same configuration goes on, reusing its stored signals."""
    out = Path(out)
    if overwrite or not out.is_dir():
        return
    if (out / SUMMARY_FILE).is_file() or (out / "config.json").is_file():
        raise InputError(f"{out}: holds a model, not {RESULT_FILES[result_file]}; choose another --out")
    other = next((name for name in RESULT_FILES if name != result_file and (out / name).is_file()), None)
    if other is not None:
        raise InputError(f"{out}: holds {RESULT_FILES[other]} ({other}); choose another --out, or give --overwrite to "
                         "write beside it")
    result = out / result_file
    if not result.is_file():
        return
    try:
        previous = json.loads(result.read_text(encoding="utf-8"))["config"]
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(f"{result}: not a result of lmaudit's that can be read; choose another --out, or give "
                         "--overwrite to replace it") from None
    current = json.loads(json_text(config))
    differing = [key for key in dict.fromkeys([*current, *previous])
                 if key not in PRESENTATION and current.get(key) != previous.get(key)]
    if differing:
        raise InputError(f"{out}: holds {RESULT_FILES[result_file]} configured otherwise (its {differing[0]} differs); "
                         "choose another --out, or give --overwrite to replace it")


def json_text(document: dict) -> str:
    """A JSON document as strict JSON text (indented)."""
    return json.dumps(json_ready(document), indent=2, allow_nan=False)


def write_report(out_dir: str | Path, report: dict, scores: pd.DataFrame, attacks: list[AttackScores]) -> Path:
    """Write scores.parquet, report.html and report.json into `out_dir`, all or nothing.

    Everything is rendered first and written under temporary names; only then are the files
    renamed into place, report.json last, so an interrupted audit never leaves a half-written report.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html = render_html(report, attacks)
    text = json_text(report)
    with staged(out / "scores.parquet", out / "report.html", out / "report.json") as (scores_file, html_file, json_file):
        scores.to_parquet(scores_file, index=False)
        html_file.write_text(html, encoding="utf-8")
        json_file.write_text(text, encoding="utf-8")
    return out / "report.json"
