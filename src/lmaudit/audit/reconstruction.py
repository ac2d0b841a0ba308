"""`lmaudit reconstruct`: can the model restore a sensitive field of a note (a name, a diagnosis, a drug, a number)?
Each field found in a member's or non-member's text (by pattern or column, data/fields.py) is replaced by every
candidate of its kind in turn and the texts are scored under the model (signals/reconstruction.py: masked or causal);
the true value's rank among the candidates, members against each non-member set, per span and per patient
(metrics/reconstruction.py). A model that learnt which values are common restores non-members' fields as well as
members': the members' excess over the non-members is the leak.

Writes reconstruction.json (per kind: candidates, counts, rates with intervals, mean ranks and exposures: no text) and
reconstruction.parquet (one row per span: ids, role, kind, rank, exposure; the true value and the model's first
choice only with `include_text`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lmaudit.audit.corpus import load_audit_corpus
from lmaudit.audit.records import placement_of
from lmaudit.config import AuditConfig
from lmaudit.data.fields import FieldRule, candidate_values, field_values
from lmaudit.data.roles import AUDITED_ROLES, MEMBER, NONMEMBER_SET
from lmaudit.errors import InputError
from lmaudit.locks import output_lock
from lmaudit.metrics.clusters import frame_clusters
from lmaudit.metrics.reconstruction import (
    candidates_scored,
    exposure_bits,
    frequency_ranks,
    reconstruction_summary,
    truth_ranks,
)
from lmaudit.metrics.slices import members_against_each_set
from lmaudit.models.source import Placement
from lmaudit.report.build import environment_info
from lmaudit.report.documents import refuse_another_run, write_document
from lmaudit.strict_json import json_ready

RESULT_FILE, TABLE_FILE = "reconstruction.json", "reconstruction.parquet"
RULE = ("rank: 1 + candidates scored above the truth + half of those tied (1 = restored first), among the candidates "
        "scored for the span (one cut off by truncation takes no part); exposure: log2(candidates) - log2(rank) bits; "
        "chance: 1 / candidates; frequency baseline: candidates ordered by how often they occur in the audited texts, "
        "the span's own occurrence left out; per-span intervals: Clopper-Pearson on Korn-Graubard effective counts over "
        "patients (a span without a patient is its own), per-patient intervals exact")


@dataclass(frozen=True)
class ReconstructionSettings:
    """What a reconstruction audit asks: the field kinds, how many candidates each is ranked among (its most frequent
    values, unless `candidate_lists` gives a kind's list), the token budget of a batch, and whether the per-span table
    may hold the values."""

    fields: tuple[FieldRule, ...]
    max_candidates: int = 100
    candidate_lists: dict[str, list[str]] = field(default_factory=dict)
    batch_tokens: int | None = None  # None: sized for the device (signals/settings.py:DEFAULT_BATCH_TOKENS)
    include_text: bool = False

    def __post_init__(self) -> None:
        if not self.fields:
            raise InputError("reconstruction needs at least one field: --field KIND=REGEX or --field-column KIND=COLUMN")
        if self.max_candidates < 2:
            raise InputError("--max-candidates must be at least 2: a field with one candidate cannot be ranked")
        kinds = [rule.kind for rule in self.fields]
        if len(set(kinds)) < len(kinds):
            raise InputError(f"the field kind '{next(k for k in kinds if kinds.count(k) > 1)}' is declared twice")
        unknown = sorted(set(self.candidate_lists) - set(kinds))
        if unknown:
            raise InputError(f"--candidates {unknown[0]}=...: no --field or --field-column declares that kind")


def load_scored_model(target: str, placement: Placement):
    """The target as a masked or causal LM placed as asked, with its family ('mlm' or 'clm'); a one-line refusal for a
    classifier."""
    from lmaudit.models.config_json import model_family
    from lmaudit.models.load import load_model

    family = model_family(target)
    if family not in ("mlm", "clm"):
        raise InputError(f"{target}: reconstruction fills a field into the text, so it needs a masked or causal LM, not a "
                         f"{family}")
    return load_model(target, family, placement), family


def kind_result(corpus: pd.DataFrame, values: pd.Series, candidates: list[str], scores: np.ndarray) -> tuple[dict, pd.DataFrame]:
    """One kind's summaries per non-member set and its per-span table, from the candidate scores of the spans that
    have a value among the candidates (`values`, rows of `corpus`; NaN: a candidate cut off by truncation)."""
    index = {value: column for column, value in enumerate(candidates)}
    truth = np.array([index[value] for value in values])
    scored = ~np.isnan(scores[np.arange(len(truth)), truth])  # the truth cut off by truncation: the span is not ranked
    counts = Counter(values)  # every span's value, those cut off included: they occur in the audited texts
    kept, scores, truth = values[scored], scores[scored], truth[scored]
    # a candidate cut off for a span is no candidate of that span: ranks, chance and exposure count only those scored
    ranks, ranked_among = truth_ranks(scores, truth), candidates_scored(scores)
    baseline = frequency_ranks(kept.to_numpy(), counts, candidates, ~np.isnan(scores))
    table = corpus.loc[kept.index, ["sample_id", "role", "group_id", NONMEMBER_SET]].assign(
        rank=ranks, exposure_bits=exposure_bits(ranks, ranked_among), candidates=ranked_among,
        value=kept.to_numpy(), first_choice=[candidates[i] for i in np.nanargmax(scores, axis=1)])
    sets = {}
    for name, rows in members_against_each_set(table):
        part = table[rows]
        clusters = frame_clusters(part, "sample_id") if part["group_id"].notna().any() else None
        sets[name] = reconstruction_summary(ranks[rows], baseline[rows], len(candidates),
                                            (part["role"] == MEMBER).to_numpy(), clusters, ranked_among[rows])
    return {"cut_off": int((~scored).sum()), "sets": sets}, table


def settings_record(settings: ReconstructionSettings) -> dict:
    """The settings as result files record them: each given candidate list by its size and a SHA-256 of the whole list
    (the values themselves may be names), so that a rerun with another list is told apart."""
    import hashlib

    lists = {kind: {"candidates": len(values), "sha256": hashlib.sha256("\n".join(values).encode()).hexdigest()}
             for kind, values in settings.candidate_lists.items()}
    return {"fields": [vars(rule) for rule in settings.fields], "max_candidates": settings.max_candidates,
            "candidate_lists": lists, "batch_tokens": settings.batch_tokens, "include_text": settings.include_text}


def reconstruct(config: AuditConfig, settings: ReconstructionSettings, progress: bool = False,
                overwrite: bool = False) -> dict:
    """Run the reconstruction audit of `config`'s target on its members and non-members, write reconstruction.json and
    reconstruction.parquet into its output folder (one holding another run's results only with `overwrite`), and
    return reconstruction.json's document."""
    from lmaudit.signals.reconstruction import candidate_log_likelihoods
    from lmaudit.signals.settings import SignalSettings

    columns = tuple(rule.column for rule in settings.fields if rule.column)
    corpus = load_audit_corpus(config.role_files(), columns, config.columns)
    corpus = corpus[corpus["role"].isin(AUDITED_ROLES)].reset_index(drop=True)
    found = {rule.kind: field_values(corpus, rule) for rule in settings.fields}  # bad columns refused before the model loads
    recorded = {**config.model_dump(), "reconstruction": settings_record(settings)}
    with output_lock(config.out):
        refuse_another_run(config.out, recorded, overwrite, RESULT_FILE)
        loaded, family = load_scored_model(config.target, placement_of(config))
        scoring = SignalSettings(signal=f"{family}_tokens", batch_tokens=settings.batch_tokens)
        kinds, tables = {}, []
        for rule in settings.fields:
            values = found[rule.kind].dropna()
            candidates = candidate_values(values, settings.max_candidates, settings.candidate_lists.get(rule.kind))
            inside = values[values.isin(candidates)]
            entry = {"declared_by": {"pattern": rule.pattern} if rule.pattern else {"column": rule.column},
                     "spans_found": len(values), "outside_candidates": len(values) - len(inside),
                     "candidates": len(candidates)}
            if len(candidates) < 2 or inside.empty:
                kinds[rule.kind] = entry | {"not_applicable": "fewer than two candidates" if len(candidates) < 2
                                            else "no text holds a value among the candidates"}
                continue
            scores = candidate_log_likelihoods(loaded.model, loaded.tokenizer, family, corpus.loc[inside.index, "text"].tolist(),
                                               inside.tolist(), candidates, scoring, progress)
            result, table = kind_result(corpus, inside, candidates, scores)
            kinds[rule.kind] = entry | result
            tables.append(table.assign(kind=rule.kind))
        document = json_ready({"target": config.target, "model_family": family, "fields": kinds, "rules": RULE,
                               "config": recorded,
                               "environment": environment_info(str(next(loaded.model.parameters()).device))})
        table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
        if len(table) and not settings.include_text:
            table = table.drop(columns=["value", "first_choice"])
        return write_document(config.out, RESULT_FILE, document, table=(TABLE_FILE, table))
