"""The self-contained HTML pages (plots inlined as PNG): the audit report, verdict first, and the DP sweep.

The audit page reads report.json's document only (plus the attacks' scores for the figures), in this order: the
verdict and warnings; one results table per level, its ROC curves beside it; then folded evidence (slices, every
threshold, histograms, the attacks run, what was not run); the glossary; provenance (models, versions, configuration).
"""

from __future__ import annotations

import json
import math

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from lmaudit.attacks.base import LEVELS, AttackScores
from lmaudit.attacks.registry import attack_spec
from lmaudit.metrics.results import AttackResult
from lmaudit.report.document import ReportDocument
from lmaudit.report.formatting import number, percent
from lmaudit.report.level_words import p_cell, power_words
from lmaudit.report.localisation import class_rows, highlighted_rows, patients_line, rule_line, statistic_line
from lmaudit.report.plots import histogram_figure, roc_figure
from lmaudit.report.tables import (
    CLASSIFIER_ATTACKS,
    PAPER_COLUMNS,
    feature_attack_table,
    largest_bound,
    level_table,
    nonmember_set_table,
    population_threshold_at,
    result_of,
)
from lmaudit.report.verdict import EXTRACTION_RULE, dataset_inference_line, extraction_statement

# Terms the page uses, explained once (attacks are explained from the registry).
GLOSSARY = {
    "member / non-member": "A sample (or patient, user) that was / was not in the target model's training data. The "
                           "audit knows which is which and measures how well each attack tells them apart.",
    "population": "Data like the non-members, never trained on, and kept apart from them. It is the only data "
                  "thresholds are calibrated on, so they never see the audited samples' membership.",
    "calibration member": "Known training samples, not among the audited members, used only for the mean-training-loss "
                          "(mu) threshold.",
    "membership score": "What an attack computes per sample: higher means more likely a member, for every attack.",
    "AUC": "Area under the ROC curve: the chance that a random member scores above a random non-member (0.5 = "
           "guessing, 1 = perfect). The interval is a 95% stratified bootstrap.",
    "TPR at x% FPR": "The share of members exposed (true-positive rate) by the best threshold that wrongly accuses at "
                     "most x% of non-members. TP and FP are the counts behind it; with fewer than 1/x non-members the "
                     "rate cannot be resolved (marked *).",
    "population threshold": "The threshold that calls at most 10% (or 1%) of the population members; precision, recall "
                            "and advantage are measured at it on the audited data.",
    "mu threshold": "Jagannatha et al.'s threshold: a sample is called a member when its loss is at most the mean loss "
                    "of the calibration members.",
    "advantage": "TPR - FPR at a threshold (Jagannatha et al.'s privacy leakage): 0 = no better than guessing.",
    "epsilon lower bound": "The smallest epsilon that a differentially private training (at the delta the verdict names) could "
                           "have and still allow the attack's counts at a threshold chosen without the audited labels, "
                           "with 95% confidence. 0 = the counts rule out no epsilon.",
    "balanced AUC": "The AUC on subsets with as many members as non-members (mean and spread over 10 draws), when "
                    "the two sides differ in size.",
    "slice": "A part of the audited samples: a token-length bin (quantiles of the audited lengths) or a value of a "
             "column given with --slice-by. Population thresholds are recalibrated within each slice.",
    "level": "What a unit is: a sample; an admission (subgroup_id) or a patient or user (group_id), scored by the mean "
             "of its samples' scores.",
}


def identifier(name: str) -> Markup:
    """An attack's or signal's name as the page shows it: whole, never wrapped inside."""
    return Markup('<span class="id">{}</span>').format(name)


def render_template(name: str, **context) -> str:
    """Render one of the package's templates (report/templates/NAME); strict: a name the context lacks is an error,
    never a blank on the page."""
    environment = Environment(loader=PackageLoader("lmaudit.report", "templates"), autoescape=select_autoescape(),
                              undefined=StrictUndefined)
    environment.filters["identifier"] = identifier
    return environment.get_template(name).render(**context)


class Footnotes:
    """Numbered reasons for the cells of one table that cannot be computed; the same reason gets the same number."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def mark(self, reason: str) -> int:
        """The footnote number of `reason`."""
        if reason not in self.reasons:
            self.reasons.append(reason)
        return self.reasons.index(reason) + 1


def _tpr_cell(result: AttackResult, alpha: str) -> dict | None:
    point = result.tpr_at_fpr.get(alpha)
    return None if point is None else {"tpr": point.tpr, "tp": point.tp, "fp": point.fp,
                                       "limited": point.resolution_limited}


def _threshold_cells(result: AttackResult, notes: Footnotes) -> dict:
    """Precision, recall and advantage at the population 10% threshold, or the footnote saying why not."""
    threshold = population_threshold_at(result)
    if threshold is None:
        reason = (result.unavailable or {}).get("population_threshold_0.1", "no population threshold")
        return {"missing": notes.mark(reason)}
    why = (threshold.unavailable or {}).get("precision")
    return {"missing": None, "precision": threshold.precision, "precision_note": notes.mark(why) if why else None,
            "recall": threshold.recall, "advantage": threshold.advantage}


def _epsilon_cell(result: AttackResult, notes: Footnotes) -> dict:
    bound = largest_bound(result)
    if bound is None:
        return {"missing": notes.mark("no threshold was calibrated without the audited labels (give population data or "
                                      "calibration members)")}
    return {"missing": None, "value": bound}


def results_tables(report: ReportDocument) -> list[dict]:
    """Per level present, in LEVELS order: its rows (all data, strongest first as ranked) and its footnotes."""
    tables = []
    for level in LEVELS:
        ranked = report.ranking.get(level)
        if not ranked:
            continue
        notes = Footnotes()
        rows = []
        for rank in ranked:
            result = result_of(report.results, rank.attack, level, rank.signal)
            rows.append({
                "attack": result.attack, "signal": result.signal, "auc": result.auc, "auc_ci": result.auc_ci,
                "n_members": result.n_members, "n_nonmembers": result.n_nonmembers,
                "lift": rank.lift_over_blind, "access": rank.access,
                "tpr1": _tpr_cell(result, "0.01"), "tpr01": _tpr_cell(result, "0.001"),
                "population": _threshold_cells(result, notes), "epsilon": _epsilon_cell(result, notes),
                "balanced": result.balanced,
            })
        tables.append({"level": level, "name": report.level_names.get(level, level), "rows": rows,
                       "notes": notes.reasons, "blind": any(rank.lift_over_blind is not None for rank in ranked)})
    return tables


def slice_tables(report: ReportDocument) -> list[dict]:
    """Per level, the results on each slice (sample level only, today), with the population-threshold footnotes."""
    tables = []
    for level in LEVELS:
        results = [r for r in report.results if r.level == level and r.slice != "all"]
        if not results:
            continue
        notes = Footnotes()
        rows = [{"slice": r.slice, "attack": r.attack, "signal": r.signal, "auc": r.auc, "auc_ci": r.auc_ci,
                 "n_members": r.n_members, "n_nonmembers": r.n_nonmembers, "tpr1": _tpr_cell(r, "0.01"),
                 "population": _threshold_cells(r, notes)} for r in results]
        tables.append({"level": level, "name": report.level_names.get(level, level), "rows": rows,
                       "notes": notes.reasons})
    return tables


ROC_CURVES_SHOWN = 6  # the strongest attacks drawn in each level's main ROC figure; the rest are folded
RESULTS_SHOWN = 5  # the strongest attacks each level's table shows; the rest are folded below it


def _curve_label(report: ReportDocument, attack: AttackScores, with_signal: bool) -> str | None:
    """`attack (signal) (AUC 0.693)`, or None when the attack was not evaluated at its level."""
    result = result_of(report.results, attack.attack, attack.level, attack.signal)
    if result is None:
        return None
    return f"{attack.attack}{f' ({attack.signal})' if with_signal else ''} (AUC {result.auc:.3f})"


def roc_images(report: ReportDocument, attacks: list[AttackScores]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Per level: one figure of the strongest attacks (ROC_CURVES_SHOWN, by the ranking), and, folded, one figure per
    signal with all of them when there are several signals (or more attacks than shown)."""
    several_signals = len({a.signal for a in attacks}) > 1
    by_key = {(a.attack, a.signal, a.level): a for a in attacks}
    strongest, every = {}, {}
    for level in LEVELS:
        ranked = report.ranking.get(level, [])
        if not ranked:
            continue
        name = report.level_names.get(level, level)
        shown = [by_key[(row.attack, row.signal, level)] for row in ranked[:ROC_CURVES_SHOWN]
                 if (row.attack, row.signal, level) in by_key]
        strongest[level] = roc_figure([(_curve_label(report, a, several_signals), a) for a in shown],
                                      f"{name} level" + (", strongest attacks" if len(ranked) > len(shown) else ""))
        if several_signals or len(ranked) > len(shown):
            for signal in dict.fromkeys(a.signal for a in attacks if a.level == level):
                curves = [(label, a) for a in attacks if a.level == level and a.signal == signal
                          if (label := _curve_label(report, a, False)) is not None]
                if curves:
                    every.setdefault(level, []).append(roc_figure(curves, f"{name} level, {signal}"))
    return strongest, every


def _histogram_threshold(result: AttackResult) -> tuple[float | None, str]:
    """The threshold to mark: the population 10% threshold, else the attack's own calibrated one."""
    threshold = population_threshold_at(result)
    if threshold is not None:
        return threshold.value, "population threshold (10% FPR)"
    finite = [t for t in result.thresholds if math.isfinite(t.value)]
    if finite:
        return finite[0].value, f"{finite[0].rule} threshold"
    return None, ""


def histogram_images(report: ReportDocument, attacks: list[AttackScores]) -> dict[str, str]:
    """One histogram for each of the strongest attacks of each level (ROC_CURVES_SHOWN, by the ranking: the ones the
    main ROC figure draws), titled by attack, signal and level. Every attack's would be dozens of figures on a
    classifier's page (seconds to draw, and no one reads them); scores.parquet holds every score."""
    by_key = {(a.attack, a.signal, a.level): a for a in attacks}
    images = {}
    for level in LEVELS:
        for row in report.ranking.get(level, [])[:ROC_CURVES_SHOWN]:
            attack = by_key.get((row.attack, row.signal, level))
            result = result_of(report.results, row.attack, level, row.signal)
            if attack is not None and result is not None:
                name = report.level_names.get(level, level)
                images[f"{attack.attack} ({attack.signal}), {name} level"] = histogram_figure(
                    attack, *_histogram_threshold(result))
    return images


def attacks_run(report: ReportDocument) -> list[dict]:
    """One row per attack in the results: what it is, what it reads and which roles it is fitted on."""
    rows = []
    for name in dict.fromkeys(r.attack for r in report.results):
        spec = attack_spec(name)
        rows.append({"name": name, "description": spec.description, "paper": spec.paper, "reads": ", ".join(spec.reads),
                     "levels": ", ".join(report.level_names.get(level, level) for level in spec.levels),
                     "fitted_on": ", ".join(spec.fitted_on) or "nothing"})
    return rows


EXTRACTION_QUERIES = 1_000  # the column of the probabilistic curves the page shows


def extraction_rows(section: dict | None) -> list[dict]:
    """The extraction table's rows (report.json's `extraction`): per prefix length and non-member set, greedy exact
    rates with counts and intervals, approximate and per-patient rates, and the first scheme's share extracted at
    EXTRACTION_QUERIES queries, p = 0.5."""
    def counted(entry: dict) -> str:
        low, high = entry["interval"]
        return f"{entry['exposed']} of {entry['units']}, {number(entry['rate'])} [{number(low)}, {number(high)}]"

    def pair(entry: dict) -> str:
        return f"{number(entry['member']['rate'])} / {number(entry['nonmember']['rate'])}"

    rows = []
    for prefix, entry in (section or {}).get("prefix_lengths", {}).items():
        for name, result in entry.get("sets", {}).items():
            greedy = result["greedy"]
            curve = next((c for c in result["probabilistic"] if c["p"] == 0.5), None)
            column = curve["queries"].index(EXTRACTION_QUERIES) if curve else None
            rows.append({"prefix": prefix, "against": name, "member": counted(greedy["sample"]["exact"]["member"]),
                         "nonmember": counted(greedy["sample"]["exact"]["nonmember"]),
                         "approximate": pair(greedy["sample"]["approximate"]),
                         "group": pair(greedy["group"]["exact"]) if "group" in greedy else "n/a",
                         "sampled": f"{number(curve['member'][column])} / {number(curve['nonmember'][column])}"
                         if curve else "n/a"})
    return rows


def render_html(report: ReportDocument, attacks: list[AttackScores], highlighted: list[dict] | None = None) -> str:
    """The audit's page, from the typed report: verdict, per-level results and ROC curves, folded evidence, glossary,
    provenance; `highlighted`: the member texts with their top spans (--include-text only)."""
    levels = [level for level in LEVELS if report.ranking.get(level)]
    figures = report.config.get("figures", True)
    roc_strongest, roc_every = roc_images(report, attacks) if figures else ({}, {})
    group_name = report.level_names.get("group", "group")
    return render_template(
        "report.html.j2",
        report=report, levels=levels, names=report.level_names, results_tables=results_tables(report),
        slice_tables=slice_tables(report), roc_strongest=roc_strongest, roc_every=roc_every,
        histogram_images=histogram_images(report, attacks) if figures else {}, figures=figures,
        attacks_run=attacks_run(report), glossary=GLOSSARY,
        feature_table=feature_attack_table(report.results), classifier_attacks=CLASSIFIER_ATTACKS,
        paper_columns=PAPER_COLUMNS, level_table=level_table(report.results), set_table=nonmember_set_table(report),
        pct=percent, num=number, config_json=json.dumps(report.config, indent=2),
        environment=report.environment.model_dump(by_alias=True),
        several_signals=len({r.signal for r in report.results}) > 1, results_shown=RESULTS_SHOWN,
        dataset_inference=dataset_inference_line(report), extraction_line=extraction_statement(report.extraction),
        extraction_rows=extraction_rows(report.extraction), extraction_rule=EXTRACTION_RULE,
        queries=f"{EXTRACTION_QUERIES:,}", localisation=localisation_words(report.localisation),
        highlighted=highlighted_rows(highlighted),
        p_cells={level: p_cell(entry.p_value, entry.power) for level, entry in report.summary.levels.items()},
        power_lines=[power_words(entry.name, entry.power, group_name)
                     for entry in report.summary.levels.values() if entry.power],
    )


def localisation_words(section: dict | None) -> dict | None:
    """The page's localisation section: its sentences and class rows, or the reason it is missing (None: no section)."""
    if section is None:
        return None
    if "unavailable" in section:
        return {"unavailable": section["unavailable"]}
    return {"unavailable": None, "statistic": statistic_line(section), "rule": rule_line(section), "rows": class_rows(section),
            "patients": patients_line(section), "texts": section["texts"], "compared_with": section["compared_with"]}
