"""The end of every audit: the attacks' scores evaluated on all data and on each slice, report.json built from the
results and the audit's facts, and the output folder written (report.json, scores.parquet, report.html)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lmaudit.attacks.base import AttackScores, Skipped
from lmaudit.errors import InputError
from lmaudit.metrics.dataset_inference import dataset_inference_section
from lmaudit.metrics.evaluate import evaluate_attacks, extreme_scores
from lmaudit.metrics.per_class import classifier_per_class
from lmaudit.metrics.permutation_tests import leakage_tests
from lmaudit.metrics.population_fit import population_fit
from lmaudit.metrics.results import AttackResult
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.metrics.slices import data_summary, nonmember_sets, sample_slices
from lmaudit.metrics.validity import NO_TEXTS
from lmaudit.report.build import AuditFacts, build_report, write_report


@dataclass(frozen=True)
class Findings:
    """What an audit found before evaluation: one row per scored sample (ids, role, length, signals), every attack's
    scores, what was not run and why, the samples' texts (only when the scores table may hold them), the values of
    the slice_by columns (index sample_id) and the blind baseline's validity section."""

    samples: pd.DataFrame
    attacks: list[AttackScores]
    skipped: list[Skipped]
    texts: pd.Series | None = None
    slice_columns: pd.DataFrame | None = None
    validity: dict | None = None  # the blind baseline's (metrics/validity.py); None where there are no texts
    extraction: tuple[dict, pd.DataFrame] | None = None  # audit/extraction.py's section and per-sample table, if asked
    # audit/localisation.py's section and, with --include-text only, the member texts with their top spans
    localisation: tuple[dict, list[dict] | None] | None = None


@dataclass(frozen=True)
class AuditOutcome:
    """What an audit wrote and found: report.json's document, the typed results it was built from, what was not run,
    and scores.parquet's table."""

    report: dict
    results: list[AttackResult]
    skipped: list[Skipped]
    scores: pd.DataFrame


EXTRACTION_COLUMN_TYPES = {"exact": "boolean", "common_prefix": "Int64", "similarity": "Float64"}


def evaluate_findings(findings: Findings, evaluation: EvaluationSettings,
                      level_names: dict[str, str]) -> tuple[list[AttackResult], list[Skipped]]:
    """Every attack's results on all data, on each slice and on each non-member set, and all that was not run or not
    evaluated (InputError when no attack could be evaluated)."""
    slices = sample_slices(findings.samples, evaluation, findings.slice_columns)
    units = {level: f"{name}s" for level, name in level_names.items()}
    results, not_evaluated = evaluate_attacks(findings.attacks, evaluation, slices, units, nonmember_sets(findings.samples))
    skipped = findings.skipped + not_evaluated
    if not results:
        raise InputError("no attack could be evaluated: " + "; ".join(s.reason for s in skipped))
    return results, skipped


def finish_audit(out: str | Path, facts: AuditFacts, findings: Findings, evaluation: EvaluationSettings) -> AuditOutcome:
    """Evaluate the findings, build report.json with the audit's facts, and write the output folder all or nothing: every
    number first (metrics/), then the report, built once (report/)."""
    scores = scores_table(findings.samples, findings.attacks, findings.texts,
                          findings.extraction[1] if findings.extraction else None)
    results, skipped = evaluate_findings(findings, evaluation, facts.level_names)
    sets = nonmember_sets(findings.samples)
    validity = {**(findings.validity or NO_TEXTS),
                "population": population_fit(findings.attacks, sets, evaluation.permutations, evaluation.seed)}
    tests = leakage_tests(findings.attacks, sets, evaluation.permutations, evaluation.seed)
    extreme = extreme_scores(findings.attacks)
    sections = {"dataset_inference": dataset_inference_section(findings.samples, findings.attacks,
                                                               facts.level_names.get("group", "group"), evaluation.seed),
                **({"extraction": findings.extraction[0]} if findings.extraction is not None else {}),
                **({"localisation": findings.localisation[0]} if findings.localisation is not None else {}),
                "per_class": classifier_per_class(findings.samples, findings.attacks)}
    data = data_summary(findings.samples)
    report = build_report(facts, data, results, skipped, extreme, evaluation.delta, validity, tests, sections)
    write_report(out, report, scores, findings.attacks, findings.localisation[1] if findings.localisation else None)
    return AuditOutcome(report, results, skipped, scores)


def scores_table(samples: pd.DataFrame, attacks: list[AttackScores], texts: pd.Series | None,
                 extraction: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per sample: ids, role, length, every signal and sample-level attack score; text only if asked; with
    the extraction audit's per-sample table, its matches per prefix length (no token ids).

    Attack columns are score_<attack>, or score_<attack>_<signal> when the attack runs on several signals; extraction
    columns extraction_<exact|common_prefix|similarity>_prefix<k> (NaN for a text shorter than prefix + suffix)."""
    table = samples.copy()
    sample_attacks = [a for a in attacks if a.level == "sample"]
    uses = pd.Series([a.attack for a in sample_attacks]).value_counts()
    for attack in sample_attacks:
        name = f"score_{attack.attack}_{attack.signal}" if uses[attack.attack] > 1 else f"score_{attack.attack}"
        table = table.merge(attack.frame[["id", "score"]].rename(columns={"id": "sample_id", "score": name}),
                            on="sample_id", how="left")
    if texts is not None:
        table["text"] = texts.to_numpy()
    if extraction is not None and len(extraction):
        # one pivot per match, each in its own nullable type: pivoted together they would all become objects
        wide = pd.concat([extraction.pivot(index="sample_id", columns="prefix_tokens", values=match).astype(dtype)
                          .rename(columns=lambda prefix, match=match: f"extraction_{match}_prefix{prefix}")
                          for match, dtype in EXTRACTION_COLUMN_TYPES.items()], axis=1)
        table = table.merge(wide.reset_index(), on="sample_id", how="left")
    return table


