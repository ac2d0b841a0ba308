"""Assemble and write the audit's output folder, each file atomically (temporary name, then rename)."""

from __future__ import annotations

import json
import math
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from jinja2 import Environment, PackageLoader, select_autoescape

from lmaudit import __version__
from lmaudit.attacks.suite import AttackScores
from lmaudit.report.plots import histogram_figure, roc_figure

SCHEMA_VERSION = 1


def environment_info(device: str = "cpu") -> dict:
    """Versions of what produced the numbers."""
    info = {"python": platform.python_version(), "platform": platform.platform(), "device": device}
    for package in ("torch", "transformers", "numpy", "scikit-learn"):
        try:
            from importlib.metadata import version

            info[package] = version(package)
        except Exception:  # a package that is not installed is simply not recorded
            info[package] = None
    return info


def data_summary(signals: pd.DataFrame) -> dict:
    """Counts per role, groups per role, and truncated samples."""
    groups = signals.dropna(subset=["group_id"]).groupby("role")["group_id"].nunique()
    truncated = int(signals["truncated"].fillna(False).astype(bool).sum()) if "truncated" in signals else 0
    return {
        "counts": {role: int(n) for role, n in signals["role"].value_counts().sort_index().items()},
        "groups": {role: int(n) for role, n in groups.items()},
        "truncated": truncated,
    }


def build_report(config: dict, data: dict, results: list[dict], skipped: list[dict], environment: dict,
                 warnings: list[str], models: dict | None = None) -> dict:
    """The report.json document (DESIGN.md schema, version 1); `models`: training summaries by role, when known."""
    return {
        "schema_version": SCHEMA_VERSION,
        "lmaudit_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": config,
        "environment": environment,
        "data": data,
        "results": results,
        "skipped": skipped,
        "warnings": warnings,
        **({"models": models} if models else {}),
    }


def json_safe(value):
    """The same structure with NaN and infinities as null: report.json stays strict JSON."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def population_threshold_at(result: dict, alpha: float = 0.1) -> dict | None:
    """The result's population threshold record at `alpha`, if calibrated."""
    return next((t for t in result["thresholds"] if t["rule"] == "population" and t["alpha"] == alpha), None)


def _percent(value: float | None) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}%"


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


# Shejwalkar et al.'s Table 1 columns (Algorithms 1, 2, 3, 4), then Table 2's other statistics.
CLASSIFIER_ATTACKS = ("sample_threshold", "user_threshold_avg", "user_logistic", "sample_to_user",
                      "user_threshold_min", "user_threshold_max", "user_threshold_var")


def feature_attack_table(results: list[dict]) -> list[dict]:
    """Rows of feature x attack (the paper's Table 1): per feature, AUC and accuracy at the shadow threshold per attack."""
    rows: dict[str, dict] = {}
    for result in results:
        if result["attack"] in CLASSIFIER_ATTACKS and result["slice"] == "all":
            accuracy = result["thresholds"][0]["accuracy"] if result["thresholds"] else None
            rows.setdefault(result["signal"], {})[result["attack"]] = {"auc": result["auc"], "accuracy": accuracy}
    return [{"feature": feature, "attacks": attacks} for feature, attacks in rows.items()]


LEVELS = ("sample", "subgroup", "group")


def level_table(results: list[dict]) -> list[dict]:
    """Per attack and signal, AUC and the advantage at the mean-member-loss threshold at each level, on all data
    (Jagannatha et al.'s sample / admission / patient comparison); empty when only one level was run."""
    rows: dict[tuple[str, str], dict] = {}
    for result in results:
        if result["slice"] != "all" or result["attack"] in CLASSIFIER_ATTACKS:
            continue
        mu = next((t for t in result["thresholds"] if t["rule"] == "mean_member_loss"), None)
        rows.setdefault((result["attack"], result["signal"]), {})[result["level"]] = {
            "auc": result["auc"], "advantage": mu["advantage"] if mu else None}
    if len({level for cells in rows.values() for level in cells}) < 2:
        return []
    return [{"attack": attack, "signal": signal, "levels": cells} for (attack, signal), cells in rows.items()]


def _figure_groups(attacks: list[AttackScores]) -> dict[str, list[AttackScores]]:
    """Attacks per ROC figure: one per level, or per level and signal when there are several signals."""
    several_signals = len({a.signal for a in attacks}) > 1
    groups: dict[str, list[AttackScores]] = {}
    for attack in sorted(attacks, key=lambda a: LEVELS.index(a.level)):
        title = f"{attack.level} level" + (f", {attack.signal}" if several_signals else "")
        groups.setdefault(title, []).append(attack)
    return groups


def _histogram_threshold(result: dict) -> tuple[float | None, str]:
    """The threshold to mark: the population 10% threshold, else the attack's own calibrated one."""
    threshold = population_threshold_at(result)
    if threshold is not None:
        return threshold["value"], "population threshold (10% FPR)"
    if result["thresholds"]:
        return result["thresholds"][0]["value"], f"{result['thresholds'][0]['rule']} threshold"
    return None, ""


def render_html(report: dict, attacks: list[AttackScores]) -> str:
    """The self-contained HTML page: tables, ROC curves, histograms, configuration."""
    roc_images = {title: roc_figure(group, title) for title, group in _figure_groups(attacks).items()}
    histogram_images = {}
    for attack in attacks:
        result = next((r for r in report["results"] if r["attack"] == attack.attack and r["level"] == attack.level
                       and r["signal"] == attack.signal and r["slice"] == "all"), None)
        if result is not None:
            histogram_images[f"{attack.attack} {attack.signal} {attack.level}"] = histogram_figure(attack, *_histogram_threshold(result))
    environment = Environment(loader=PackageLoader("lmaudit.report", "templates"), autoescape=select_autoescape())
    template = environment.get_template("report.html.j2")
    alphas = list(report["results"][0]["tpr_at_fpr"]) if report["results"] else []
    return template.render(
        report=report, alphas=alphas, roc_images=roc_images, histogram_images=histogram_images,
        config_json=json.dumps(report["config"], indent=2), environment_json=json.dumps(report["environment"], indent=2),
        population10=population_threshold_at, pct=_percent, num=_number,
        feature_table=feature_attack_table(report["results"]), classifier_attacks=CLASSIFIER_ATTACKS,
        level_table=level_table(report["results"]), levels=LEVELS,
    )


def write_report(out_dir: str | Path, report: dict, scores: pd.DataFrame, attacks: list[AttackScores]) -> Path:
    """Write scores.parquet, report.html and report.json into `out_dir`, all or nothing.

    Everything is rendered first and written under temporary names; only then are the files
    renamed into place, report.json last, so an interrupted audit never leaves a half-written report.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html = render_html(report, attacks)
    text = json.dumps(json_safe(report), indent=2, allow_nan=False)
    suffix = f".tmp-{os.getpid()}"
    staged = {out / "scores.parquet": out / f".scores.parquet{suffix}", out / "report.html": out / f".report.html{suffix}",
              out / "report.json": out / f".report.json{suffix}"}
    try:
        scores.to_parquet(staged[out / "scores.parquet"], index=False)
        staged[out / "report.html"].write_text(html, encoding="utf-8")
        staged[out / "report.json"].write_text(text, encoding="utf-8")
        for final, temporary in staged.items():
            os.replace(temporary, final)
    finally:
        for temporary in staged.values():
            temporary.unlink(missing_ok=True)
    return out / "report.json"


def _models_lines(report: dict) -> list[str]:
    return [
        f"{name}: {m['architecture']} {m['size']}, train accuracy {_percent(m['train_accuracy'])}, "
        f"{m['gap_measured_on']} accuracy {_percent(m['test_accuracy'] if m['gap_measured_on'] == 'test' else m['validation_accuracy'])}, "
        f"generalisation gap {100 * m['generalization_gap']:.1f} points"
        for name, m in report.get("models", {}).items()
    ]


def feature_attack_lines(report: dict) -> list[str]:
    """The feature x attack table as text: AUC (accuracy %) per cell."""
    table = feature_attack_table(report["results"])
    if not table:
        return []
    header = f"{'feature':<13}" + "".join(f"{name:>21}" for name in CLASSIFIER_ATTACKS)
    lines = [header, "-" * len(header)]
    for row in table:
        cells = []
        for name in CLASSIFIER_ATTACKS:
            cell = row["attacks"].get(name)
            cells.append(f"{cell['auc']:.3f} ({100 * cell['accuracy']:.1f})" if cell else "")
        lines.append(f"{row['feature']:<13}" + "".join(f"{c:>21}" for c in cells))
    return lines


def summary_table(report: dict) -> str:
    """The terminal summary: the feature x attack table for a classifier audit, else one line per result."""
    other = [r for r in report["results"] if r["attack"] not in CLASSIFIER_ATTACKS]
    if feature_attack_table(report["results"]):
        lines = _models_lines(report) + ["AUC (accuracy % at the shadow-calibrated threshold):"] + feature_attack_lines(report)
        if other:
            lines += ["", _result_lines({**report, "results": other, "warnings": []})]
        return "\n".join(lines + [f"warning: {w}" for w in report["warnings"]])
    return _result_lines(report)


def _result_lines(report: dict) -> str:
    several_signals = len({r["signal"] for r in report["results"]}) > 1
    signal_header = f"{'signal':<25}" if several_signals else ""
    header = (f"{'attack':<22}{signal_header}{'level':<10}{'slice':<14}{'AUC':>7}  {'95% CI':<15}{'TPR@1%':>8}{'TPR@0.1%':>10}"
              f"{'prec@10%':>10}{'rec@10%':>9}{'adv':>7}")
    lines = [header, "-" * len(header)]
    for r in report["results"]:
        threshold = population_threshold_at(r) or {}
        tpr = r["tpr_at_fpr"]
        signal = f"{r['signal']:<25}" if several_signals else ""
        lines.append(
            f"{r['attack']:<22}{signal}{r['level']:<10}{r['slice']:<14}{r['auc']:>7.3f}  "
            f"[{r['auc_ci'][0]:.3f}, {r['auc_ci'][1]:.3f}]{'':<1}"
            f"{tpr.get('0.01', {}).get('tpr', float('nan')):>8.3f}{tpr.get('0.001', {}).get('tpr', float('nan')):>10.3f}"
            f"{_percent(threshold.get('precision')):>10}{_percent(threshold.get('recall')):>9}"
            f"{_number(threshold.get('advantage')):>7}"
        )
    lines += [f"warning: {w}" for w in report["warnings"]]
    return "\n".join(lines)
