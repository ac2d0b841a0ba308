"""Rare disease profiles (Jagannatha et al. 2021, Section 5.3, Appendix A.2 and Figures 22-24): the demo's target
audited once; each audited patient's disease profile (the set of ICD codes over their admissions, the notes' `codes`
column) gets the probability of Eqs. 4-5, patients are bucketed on the log of it, buckets of fewer than 10 patients are
dropped, and the patient-level leakage (TPR - FPR at the patient-level population threshold) is computed per bucket.

The paper's own definition differs, and the study computes it beside: the loss attack's admissions (each admission's
mean score) called at S-BBA's mean-training-loss threshold (the calibration members' mean loss), in 100 equal-width
buckets of their patient's profile log-probability, buckets of fewer than 10 admissions dropped. lmaudit's default
reads patients at the population's 10% FPR threshold (a threshold calibrated on non-members, whose FPR is known) with
about one bucket per 10 patients (100 buckets of a few hundred patients leave almost all of them empty)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.attacks.base import aggregate_by_group
from lmaudit.data.roles import MEMBER, NONMEMBER
from lmaudit.report.document import ReportDocument
from lmaudit.report.tables import population_threshold_at, result_of
from lmaudit.studies.notes import notes_study
from lmaudit.studies.runner import StudyPlan

MAX_BUCKETS = 100
MIN_PATIENTS = 10
BUCKETED_ATTACKS = ("loss", "likelihood_ratio")


def patient_profiles(notes: pd.DataFrame) -> pd.Series:
    """Each patient's disease profile: the set of codes over all their notes (`codes`: ';'-separated), by group_id."""
    return notes.groupby("group_id")["codes"].agg(lambda values: frozenset(c for v in values for c in v.split(";") if c))


def profile_log_probabilities(profiles: pd.Series) -> pd.Series:
    """log p(profile) of Eq. 4, with each code's p(c) from Eq. 5 (the share of these patients coded with it): the
    product of p(c) over the profile's codes and of 1 - p(c) over every other code, as a natural log."""
    codes = sorted({code for profile in profiles for code in profile})
    share = {code: sum(code in profile for profile in profiles) / len(profiles) for code in codes}
    return profiles.map(lambda profile: sum(np.log(share[c]) if c in profile else np.log1p(-share[c])
                                            for c in codes if c in profile or share[c] < 1))


def bucketed_leakage(log_probability: pd.Series, member: pd.Series, called: pd.Series,
                     max_buckets: int = MAX_BUCKETS, min_patients: int = MIN_PATIENTS,
                     buckets: int | None = None) -> list[dict]:
    """Patients (or admissions; indexed alike in the three series) in equal-width buckets of log-probability, `buckets`
    of them, else as many as the patients allow (at most `max_buckets`, at most one per `min_patients` patients);
    buckets of fewer than `min_patients` dropped; per bucket its range, counts and leakage, TPR - FPR of `called` (None
    without both members and non-members)."""
    buckets = buckets or int(np.clip(len(log_probability) // min_patients, 1, max_buckets))
    edges = np.linspace(log_probability.min(), log_probability.max(), buckets + 1)
    index = np.clip(np.searchsorted(edges, log_probability.to_numpy(), side="right") - 1, 0, buckets - 1)
    rows = []
    for bucket in range(buckets):
        inside = index == bucket
        if inside.sum() < min_patients:
            continue
        members, nonmembers = member[inside], ~member[inside]
        tpr = called[inside][members].mean() if members.any() else None
        fpr = called[inside][nonmembers].mean() if nonmembers.any() else None
        rows.append({"log p from": float(edges[bucket]), "log p to": float(edges[bucket + 1]),
                     "mean log p": float(log_probability[inside].mean()), "patients": int(inside.sum()),
                     "members": int(members.sum()), "nonmembers": int(nonmembers.sum()),
                     "leakage": None if tpr is None or fpr is None else float(tpr - fpr)})
    return rows


PAPER_SECTION = "loss: buckets (the paper's: admissions, mean-training-loss threshold, 100 buckets)"


def paper_buckets(report: ReportDocument, audited: pd.DataFrame, log_probability: pd.Series) -> dict | str:
    """The paper's definition: the loss attack's admissions (mean score of each admission's notes) called at its
    admission-level mean-training-loss threshold, in MAX_BUCKETS buckets of their patient's profile log-probability;
    buckets of fewer than MIN_PATIENTS admissions dropped."""
    result = result_of(report.results, "loss", "subgroup")
    mu = next((t for t in result.thresholds if t.rule == "mean_member_loss"), None) if result else None
    if mu is None:
        return "not run: no admission-level loss attack with a mean-training-loss threshold (calibration members needed)"
    admissions = aggregate_by_group(audited["score_loss"].to_numpy(), audited["subgroup_id"].to_numpy())
    first = audited.groupby("subgroup_id")[["group_id", "role"]].first().loc[admissions.index]
    rows = bucketed_leakage(pd.Series(log_probability.loc[first["group_id"]].to_numpy(), index=admissions.index),
                            first["role"] == MEMBER, admissions >= mu.value, buckets=MAX_BUCKETS)
    return ({f"bucket {i + 1}": row for i, row in enumerate(rows)} if rows else
            f"no bucket of {MAX_BUCKETS} holds {MIN_PATIENTS} audited admissions: more patients needed")


def figure(study: dict) -> str | None:
    """Leakage against the buckets' log probability, one line per attack with buckets (None when none has any)."""
    from lmaudit.report.plots import bucket_figure

    buckets = {name.replace(": buckets", ""): list(section.values())
               for name, section in study["analysis"].items() if isinstance(section, dict)}
    return bucket_figure(buckets) if buckets else None


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """One cell (the demo's target and reference); the buckets are the study's analysis."""
    study = notes_study(out, size, seed, progress)

    def analyse(records: list[dict]) -> dict:
        report, scores = study.cell_outputs(records[0])
        audited = scores[scores["role"].isin([MEMBER, NONMEMBER])]
        log_probability = profile_log_probabilities(patient_profiles(study.notes))
        roles = audited.groupby("group_id")["role"].first()
        analysis = {}
        for attack in BUCKETED_ATTACKS:
            result = result_of(report.results, attack, "group")
            threshold = population_threshold_at(result) if result else None
            if threshold is None:
                analysis[f"{attack}: buckets"] = "not run: no patient-level population threshold (too few patients)"
                continue
            patient_scores = aggregate_by_group(audited["score_" + attack].to_numpy(), audited["group_id"].to_numpy())
            rows = bucketed_leakage(log_probability.loc[patient_scores.index], roles.loc[patient_scores.index] == MEMBER,
                                    patient_scores >= threshold.value)
            analysis[f"{attack}: buckets"] = ({f"bucket {i + 1}": row for i, row in enumerate(rows)} if rows else
                                              f"no bucket holds {MIN_PATIENTS} audited patients: more patients needed")
        analysis[PAPER_SECTION] = paper_buckets(report, audited, log_probability)
        return analysis

    return StudyPlan(
        study="rare-disease",
        description="Patient-level leakage against the rarity of the patient's disease profile: the profile's "
                    "probability from the share of patients coded with each ICD code (codes assumed independent), "
                    "patients bucketed on its log, buckets of fewer than 10 patients dropped, leakage (TPR - FPR at the "
                    "patient-level population threshold) per bucket.",
        paper="patients with rarer disease profiles leak more: a bucket's probability correlates negatively with its "
              "leakage for most non-DP models after the first epoch (Figures 22-24).",
        cells=[study.demo_cell()], x="target", analyse=analyse, analysis_figure=figure,
        shown=(("loss", "group"), ("likelihood_ratio", "group")),
        setup={"patients": study.size.patients, "seed": seed, "buckets": f"at most {MAX_BUCKETS}, one per "
               f"{MIN_PATIENTS} audited patients", "minimum patients per bucket": MIN_PATIENTS},
    )
