"""The self-contained HTML pages (plots inlined as PNG): the audit report, and the DP sweep."""

from __future__ import annotations

import json

from jinja2 import Environment, PackageLoader, select_autoescape

from lmaudit.attacks.base import LEVELS, AttackScores
from lmaudit.attacks.registry import attack_spec
from lmaudit.report.plots import histogram_figure, roc_figure
from lmaudit.report.tables import (
    CLASSIFIER_ATTACKS,
    feature_attack_table,
    level_table,
    number,
    percent,
    population_threshold_at,
    result_of,
)


def render_template(name: str, **context) -> str:
    """Render one of the package's templates (report/templates/NAME)."""
    environment = Environment(loader=PackageLoader("lmaudit.report", "templates"), autoescape=select_autoescape())
    return environment.get_template(name).render(**context)


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


def _attacks_run(report: dict) -> list[dict]:
    """One row per attack in the results: what it is, what it reads and which roles it is fitted on."""
    names = dict.fromkeys(r["attack"] for r in report["results"])
    rows = []
    for name in names:
        spec = attack_spec(name)
        rows.append({"name": name, "description": spec.description, "paper": spec.paper, "reads": ", ".join(spec.reads),
                     "levels": ", ".join(spec.levels), "fitted_on": ", ".join(spec.fitted_on) or "nothing"})
    return rows


def render_html(report: dict, attacks: list[AttackScores]) -> str:
    """The audit's page: tables, ROC curves, histograms, configuration."""
    roc_images = {title: roc_figure(group, title) for title, group in _figure_groups(attacks).items()}
    histogram_images = {}
    for attack in attacks:
        result = result_of(report, attack.attack, attack.level, attack.signal)
        if result is not None:
            histogram_images[f"{attack.attack} {attack.signal} {attack.level}"] = histogram_figure(attack, *_histogram_threshold(result))
    alphas = list(report["results"][0]["tpr_at_fpr"]) if report["results"] else []
    return render_template(
        "report.html.j2",
        report=report, alphas=alphas, roc_images=roc_images, histogram_images=histogram_images,
        config_json=json.dumps(report["config"], indent=2), environment_json=json.dumps(report["environment"], indent=2),
        population10=population_threshold_at, pct=percent, num=number, attacks_run=_attacks_run(report),
        feature_table=feature_attack_table(report["results"]), classifier_attacks=CLASSIFIER_ATTACKS,
        level_table=level_table(report["results"]), levels=LEVELS,
    )
