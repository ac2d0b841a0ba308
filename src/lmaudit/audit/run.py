"""The one place where an audit's stages run in order: corpus -> signals -> attacks -> metrics -> report.

A language-model audit runs the target (and its references) on every sample it audits or calibrates with, paired; a
classifier audit runs the target on the audited samples and the shadow model on its own members and non-members. Both
hand their stored signals to every registered attack that can read them, evaluate the scores and write one output
folder. `run_attack` starts from losses that were computed elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmaudit.attacks.base import GENERIC_LEVEL_NAMES, REFERENCE_LOSSES, TARGET_LOSS, AttackInput, AttackScores, Skipped
from lmaudit.attacks.registry import run_attacks
from lmaudit.audit.classifier import classifier_signals
from lmaudit.audit.corpus import checked_audit_corpus, load_audit_corpus
from lmaudit.audit.extraction import checked_generator, extraction_section
from lmaudit.audit.finish import AuditOutcome, Findings, finish_audit
from lmaudit.audit.language_model import language_model_signals
from lmaudit.audit.localisation import localisation_section
from lmaudit.audit.records import ResolvedAudit, ScoredSamples, resolve
from lmaudit.config import AuditConfig
from lmaudit.data.corpus import combine_corpora
from lmaudit.data.roles import AUDITED_ROLES
from lmaudit.data.scores import REFERENCE_MODEL, load_scores
from lmaudit.locks import output_lock
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.metrics.validity import blind_validity
from lmaudit.report.build import AuditFacts, environment_info
from lmaudit.report.documents import refuse_another_run
from lmaudit.report.integrity import data_hashes, model_hashes


def run_audit(config: AuditConfig, progress: bool = False, overwrite: bool = False, plan: dict | None = None) -> dict:
    """Audit from models (`audit`) and return report.json's document; `plan`: the plan it runs ({path, plan_sha256})."""
    return audit(config, progress, overwrite=overwrite, plan=plan).report


def audit(config: AuditConfig, progress: bool = False, corpus: pd.DataFrame | None = None,
          overwrite: bool = False, plan: dict | None = None) -> AuditOutcome:
    """Audit from models: compute (or reuse) the signals, run every attack they allow, write the output folder.
    `corpus`: the samples, already validated (`corpus_from_table`), instead of the configuration's role files; the
    output folder may hold another run's results only with `overwrite` (`report.documents.refuse_another_run`);
    `plan`: the plan the audit runs, recorded in the report's provenance ({path, plan_sha256})."""
    data = {}
    if corpus is None:
        data = data_hashes([role_file.path for role_file in config.role_files()])  # hashed before they are read
        corpus = load_audit_corpus(config.role_files(), config.evaluation.slice_by, config.columns)
    else:
        corpus = checked_audit_corpus(combine_corpora([corpus]))
    with output_lock(config.out):
        resolved = resolve(config, progress)
        refuse_another_run(resolved.out, resolved.given, overwrite)
        if resolved.extraction is not None:
            checked_generator(resolved.target, resolved.target_family)  # refused before any signal is computed
        scored, attacks, not_run = signals_and_attacks(resolved, corpus)
        by_id = corpus.set_index("sample_id")
        texts = by_id.loc[scored.samples["sample_id"], "text"] if resolved.include_text else None
        validity = blind_validity(scored.samples, by_id["text"], resolved.evaluation.bootstrap, resolved.evaluation.seed,
                                  resolved.include_text)
        extraction = (extraction_section(resolved, corpus[corpus["role"].isin(AUDITED_ROLES)], resolved.extraction)
                      if resolved.extraction is not None else None)
        localisation = (localisation_section(resolved, scored, corpus, config.fields) if not resolved.classifier
                        else None)
        findings = Findings(scored.samples, attacks, scored.skipped + not_run, texts,
                            by_id[list(resolved.evaluation.slice_by)], validity, extraction, localisation)
        provenance = {"data": data, "dtype": resolved.placement.dtype, **({"plan": plan} if plan else {}),
                      **({"serving": scored.serving} if scored.serving else {})}
        facts = AuditFacts(resolved.given, environment_info(resolved.placement.device), resolved.level_names,
                           scored.models, model_files(resolved), scored.warnings, provenance)
        return finish_audit(resolved.out, facts, findings, resolved.evaluation)


def signals_and_attacks(resolved: ResolvedAudit, corpus: pd.DataFrame) -> tuple[ScoredSamples, list[AttackScores],
                                                                               list[Skipped]]:
    """The signals of the resolved audit's models on `corpus` (computed or read from the store), and every registered
    attack they allow, with what could not run."""
    scored = (classifier_signals if resolved.classifier else language_model_signals)(resolved, corpus)
    attacks, not_run = run_attacks(scored.inputs)
    return scored, attacks, not_run


def model_files(audit: ResolvedAudit) -> dict[str, dict]:
    """Each audited model by role: its folder and fingerprint, and its adapter's folder and fingerprint when it has one;
    each of their files with its SHA-256, read now (what `lmaudit verify` rehashes)."""
    from lmaudit.models.fingerprints import adapter_fingerprint, model_fingerprint

    return {name: {"folder": source.folder, "fingerprint": model_fingerprint(source.folder), "adapter": source.adapter,
                   "adapter_fingerprint": adapter_fingerprint(source.adapter) if source.adapter else None,
                   **model_hashes(source.folder, source.adapter)}
            for name, source in audit.models.items()}


def run_attack(scores_path: str | Path, out: str | Path, evaluation: EvaluationSettings, signal: str = "loss",
               overwrite: bool = False) -> dict:
    """Audit from a file of precomputed losses (`attack_losses`) and return report.json's document."""
    data = data_hashes([str(scores_path)])  # hashed before it is read
    return attack_losses(load_scores(scores_path, evaluation.slice_by), out, evaluation, signal, str(scores_path),
                         overwrite, {"data": data}).report


def attack_losses(signals: pd.DataFrame, out: str | Path, evaluation: EvaluationSettings, signal: str = "loss",
                  source: str = "DataFrame", overwrite: bool = False, provenance: dict | None = None) -> AuditOutcome:
    """Audit from precomputed losses (`load_scores`' or `scores_from_table`'s layout): the same attacks, metrics and
    report, without any model; `source` names where the losses came from in the report's configuration, and
    `provenance` its SHA-256."""
    config = {"scores": source, "out": str(out), "signal": signal, "evaluation": evaluation.model_dump()}
    values = {TARGET_LOSS: signals["target"].to_numpy(dtype=float)}
    references = [column for column in signals.columns if REFERENCE_MODEL.match(column)]
    if references:
        values[REFERENCE_LOSSES] = signals[references].to_numpy(dtype=float)
    attacks, skipped = run_attacks([AttackInput(signal, signals, values, evaluation.seed)])
    samples = signals.rename(columns={name: f"{name}_{signal}" for name in ("target", *references)})
    findings = Findings(samples, attacks, skipped, slice_columns=signals.set_index("sample_id")[list(evaluation.slice_by)])
    with output_lock(out):
        refuse_another_run(out, config, overwrite)
        facts = AuditFacts(config, environment_info(), GENERIC_LEVEL_NAMES, provenance=provenance or {"data": {}})
        return finish_audit(out, facts, findings, evaluation)
