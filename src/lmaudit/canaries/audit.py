"""Auditing a model's canaries: score every canary, then prove what the scores allow.

A secret design's canaries are scored by `secret` (SECRET_ATTACK): the target's mean log-probability of the secret's
tokens alone (`span.py`; a masked LM's each masked alone), less the references' where there are references. Other
canaries are scored by any registered attack. The scores are computed without the key: every canary enters as an
audited sample of unknown membership (role `nonmember` in the signals table, for all of them alike), and a registered
attack that is fitted on audited labels does not apply. Only then is the key read, to count the correct guesses of the
one-run audits (before scoring, only its fingerprint is compared with the one training recorded). For `secret`
canaries, random secrets of the same format are scored too: they give each canary's exposure and serve as the
population of attacks that need one (RMIA).

The output folder holds canary_report.json, its page canary_report.html, and canary_scores.parquet (one row per
canary: id, score, loss, exposure, its tier's repetition count; never whether it was planted, nor its text unless
asked).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lmaudit.canaries.make import (
    CANARIES_FILE,
    KEY_FILE,
    CanarySet,
    distinct_secrets,
    folder_fingerprint,
    key_fingerprint,
    read_canary_set,
    secret_rows,
)
from lmaudit.canaries.report import REPORT_FILE, canary_report, compared_epsilon, write_canary_audit
from lmaudit.canaries.settings import DEFAULT_CANDIDATES, MINIMUM_CANDIDATES, SECRET_DESIGNS, SECRET_SLOT
from lmaudit.config import AuditConfig
from lmaudit.data.corpus import load_corpus, read_table
from lmaudit.data.roles import NONMEMBER, POPULATION
from lmaudit.errors import InputError
from lmaudit.locks import output_lock
from lmaudit.report.documents import refuse_another_run

if TYPE_CHECKING:  # the attacks (and scikit-learn) load when an audit runs, not with the command line
    from lmaudit.attacks.base import AttackInput, AttackScores
    from lmaudit.audit.records import ResolvedAudit
    from lmaudit.metrics.fdp_one_run import GaussianBound
    from lmaudit.metrics.one_run import OneRunBound
    from lmaudit.models.training_file import TrainingRecord

log = logging.getLogger(__name__)
CONFIDENCE = 0.95
DEFAULT_DELTA = 1e-5  # the bounds' delta for a model with no recorded DP-SGD delta: the usual one, so f-DP has an epsilon
SECRET_ATTACK = "secret"  # the score read on a secret alone; not a registered attack, since only canaries have a secret
CANDIDATE_SEED = 15485863  # added to the canaries' seed: candidates are drawn apart from the secrets


@dataclass(frozen=True)
class CanaryAudit:
    """A canary audit's result: the one-run bounds (Steinke et al.'s and the f-DP one, from the same guesses), each
    canary's scores (canary_scores.parquet's table), the exposure summary (secret canaries) and canary_report.json's
    document."""

    bound: OneRunBound
    gaussian: GaussianBound
    scores: pd.DataFrame
    exposure: dict | None
    report: dict


def canary_scores(audit: ResolvedAudit, attack: str, canaries: pd.DataFrame, candidates: pd.DataFrame | None,
                  labels: bool) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Each canary's membership score under `attack` and the target's loss (sample_id, score, loss), and the
    candidates' target loss (sample_id, loss) where there are candidates. No key is read here."""
    from lmaudit.attacks.registry import ATTACKS, attack_spec, run_attacks
    from lmaudit.audit.language_model import language_model_signals

    rows = pd.concat([canaries.assign(role=NONMEMBER),
                      *([candidates.assign(role=POPULATION)] if candidates is not None else [])], ignore_index=True)
    if attack == SECRET_ATTACK:
        return secret_scores(audit, rows)
    if attack not in {spec.name for spec in ATTACKS}:
        raise InputError(f"--attack {attack}: no such attack; choose one of {SECRET_ATTACK} (secret designs), "
                         f"{', '.join(s.name for s in ATTACKS)}")
    if audit.classifier:
        if audit.references:
            raise InputError("--reference: a classifier's canaries are scored by its own loss; leave --reference out")
        if not labels:
            raise InputError("--signal classifier: the canaries have no label; make sample canaries from a labelled "
                             "--source")
        inputs, samples = classifier_inputs(audit, rows)
    else:
        scored = language_model_signals(audit, rows)
        inputs, samples = scored.inputs, scored.samples
    spec = attack_spec(attack)
    results, skipped = run_attacks(inputs, [spec])
    sample_level = [result for result in results if result.level == "sample"]
    if not sample_level:
        reasons = "; ".join(s.reason for s in skipped) or f"it does not apply to the {audit.signal.signal} signal"
        raise InputError(f"--attack {attack}: cannot score the canaries ({reasons}); choose another attack")
    return frames_of(sample_level[0], samples, audit.signal.signal)


def secret_scores(audit: ResolvedAudit, rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Each canary's score read on its secret alone, higher = guessed planted (the target's mean log-probability of
    the secret's tokens, less the references' mean), the loss (the target's mean NLL of the secret, nats per token), and
    the candidates' loss; `rows` (canaries, then candidates) hold each one's `secret`."""
    from lmaudit.audit.language_model import served_checks
    from lmaudit.canaries.span import secret_token_ids, secrets_log_probability
    from lmaudit.models.tokenizer import load_tokenizer
    from lmaudit.signals.compute import model_signal

    served_checks(audit)  # a served model that scores otherwise than its weights is refused before a canary is sent
    secret_ids = secret_token_ids(load_tokenizer(audit.target, audit.scoring.placement.trust_remote_code), rows["secret"])
    ids, texts = rows["sample_id"].tolist(), rows["text"].tolist()

    def secret_log_probabilities(model, label: str) -> np.ndarray:
        return secrets_log_probability(model_signal(model, ids, texts, audit.signal, audit.scoring, label)["value"],
                                       secret_ids)

    target = secret_log_probabilities(audit.target, "target")
    references = [secret_log_probabilities(model, name) for name, model in audit.references.items()]
    score = target - np.mean(references, axis=0) if references else target
    canaries = (rows["role"] == NONMEMBER).to_numpy()
    table = pd.DataFrame({"sample_id": rows.loc[canaries, "sample_id"].to_numpy(), "score": score[canaries],
                          "loss": -target[canaries]})
    return table, (pd.DataFrame({"sample_id": rows.loc[~canaries, "sample_id"].to_numpy(), "loss": -target[~canaries]})
                   if (~canaries).any() else None)


def frames_of(result: AttackScores, samples: pd.DataFrame, signal: str) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The canaries' (sample_id, score, loss) and the candidates' (sample_id, loss) from an attack's scores."""
    loss_column = f"target_{signal}" if f"target_{signal}" in samples else "loss"
    losses = samples.set_index("sample_id")[loss_column]
    scores = result.frame.set_index("id")["score"]
    canaries = samples.loc[samples["role"] == NONMEMBER, "sample_id"]
    table = pd.DataFrame({"sample_id": canaries.to_numpy(), "score": scores.loc[canaries].to_numpy(),
                          "loss": losses.loc[canaries].to_numpy()})
    candidates = samples.loc[samples["role"] == POPULATION, "sample_id"]
    return table, (pd.DataFrame({"sample_id": candidates.to_numpy(), "loss": losses.loc[candidates].to_numpy()})
                   if len(candidates) else None)


def classifier_inputs(audit: ResolvedAudit, rows: pd.DataFrame) -> tuple[list[AttackInput], pd.DataFrame]:
    """A classifier's canaries as the loss attack reads them: the target's cross-entropy loss on each (nats)."""
    from lmaudit.attacks.base import TARGET_LOSS, AttackInput
    from lmaudit.audit.classifier import label_indices
    from lmaudit.models.config_json import classifier_labels
    from lmaudit.signals.compute import model_signal
    from lmaudit.signals.features import classifier_features

    label_ids = label_indices(rows, classifier_labels(audit.target), audit.target.folder)
    values = model_signal(audit.target, rows["sample_id"].tolist(), rows["text"].tolist(), audit.signal, audit.scoring,
                          "target")
    loss = classifier_features(np.stack(values["value"].to_numpy()), label_ids)["loss"]
    samples = rows[["sample_id", "role", "group_id", "subgroup_id"]].assign(loss=loss,
                                                                            length=values["n_tokens"].to_numpy())
    return [AttackInput(audit.signal.signal, samples, {TARGET_LOSS: loss}, audit.evaluation.seed)], samples


def secret_candidates(canary_set: CanarySet, canaries: pd.DataFrame, count: int) -> pd.DataFrame:
    """`count` random secrets of the canaries' format that are none of the canaries (sample_id candidate-N, text,
    secret); an InputError when the format allows too few, or too few are asked to fit their distribution."""
    if count < MINIMUM_CANDIDATES:
        raise InputError(f"--candidates {count}: exposure needs at least {MINIMUM_CANDIDATES} random secrets to fit "
                         f"their losses (or 0 for no exposure)")
    available = 10 ** canary_set.secret_digits - len(canaries)
    if count > available // 2:
        raise InputError(f"--candidates {count}: {canary_set.secret_digits}-digit secrets leave {available} that are "
                         f"not canaries; ask for at most {available // 2}, or --candidates 0")
    secrets = distinct_secrets(SECRET_SLOT, canary_set.secret_digits, count,
                               np.random.default_rng(canary_set.seed + CANDIDATE_SEED), set(canaries["secret"]))
    return secret_rows([f"candidate-{i + 1}" for i in range(count)], canary_set.secret_format, secrets)


def exposure_summary(scores: pd.DataFrame, included: np.ndarray, space_bits: float, candidates: int) -> dict:
    """Median and largest exposure (bits) of the planted and of the never-planted secrets (the latter show what
    chance alone gives), by the candidates' count and by extrapolation."""
    def statistic(values: pd.Series, stat: str) -> float | None:
        value = getattr(values, stat)() if len(values) else np.nan
        return float(value) if np.isfinite(value) else None  # none planted (or none not), or nothing fitted

    def summary(rows: pd.DataFrame) -> dict:
        return {"secrets": len(rows), **{f"{how}_{stat}": statistic(rows[f"exposure_{how}"], stat)
                                         for how in ("sampled", "extrapolated") for stat in ("median", "max")}}

    return {"space_bits": space_bits, "candidates": candidates,
            "sampled_cap_bits": float(np.log2(candidates + 1)),
            "planted": summary(scores[included]), "not_planted": summary(scores[~included])}


def recorded_accounting(summary: TrainingRecord | None) -> dict | None:
    """The accountant's epsilons (RDP, PRV) and delta that lmaudit's DP-SGD training recorded (its training summary),
    if any (`metrics/privacy.py:accountant_epsilon` picks the one a bound is compared with)."""
    dp = summary and summary.dp
    return None if not dp else {"epsilon_rdp": dp.epsilon_rdp, "epsilon_prv": dp.epsilon_prv, "delta": dp.delta}


def white_box_of(summary: TrainingRecord | None) -> dict | None:
    """The white-box audit of DP-SGD that the model's training made (`train --dp --audit-dp`), if it made one: its
    bounds, the accountant's epsilon and the verdict, without the canaries' scores."""
    from lmaudit.metrics.dp_audit import white_box_audit
    from lmaudit.report.privacy_words import with_verdict

    dp = summary and summary.dp
    if not dp or not dp.gradient_canary_observations:
        return None
    return {key: value for key, value in with_verdict(white_box_audit(dp.model_dump())).items() if key != "checks"}


def check_trained_with(summary: TrainingRecord | None, model: str, folder: Path) -> None:
    """InputError unless a model lmaudit trained records `folder`'s canaries, with its key, among those it planted
    (`train --canaries`, `CanaryCallback`); in a model trained elsewhere (no lmaudit_training.json, or one that a user's
    script wrote without canaries: `trained_by`) the planting is taken on trust."""
    planted = summary.canaries if summary else []
    if summary is None or (summary.trained_by is not None and not planted):  # a user's script that did not record its canaries
        return
    fingerprint = folder_fingerprint(folder)
    if not planted:
        raise InputError(f"{model}: trained by lmaudit without canaries (its lmaudit_training.json records none), so "
                         f"an audit of {folder} would prove nothing; train it with --canaries {folder}")
    recorded = {entry.folder_fingerprint: entry for entry in planted}
    if fingerprint not in recorded:
        raise InputError(f"{folder}: {model} was trained with other canaries (folder fingerprint "
                         f"{', '.join(recorded)}, these are {fingerprint}); give the canary folder it was trained with")
    check_key(recorded[fingerprint].key_fingerprint, model, folder)


def check_key(recorded: str | None, model: str, folder: Path) -> None:
    """InputError unless `folder`'s key is the one `model` was trained with (`recorded`: the key's fingerprint in its
    summary, None for a model trained before lmaudit recorded one): the bound counts the guesses against the key, so
    it must be the key that decided what was planted."""
    key = folder / KEY_FILE
    if recorded is None:
        raise InputError(f"{key}: {model} records these canaries but not their key's fingerprint (trained before "
                         f"lmaudit recorded one), so a changed key could not be told; train it again with "
                         f"--canaries {folder}")
    found = key_fingerprint(folder)
    if found != recorded:
        raise InputError(f"{key}: not the key {model} was trained with (key fingerprint {recorded}, this one is "
                         f"{found}); use the {KEY_FILE} written with these canaries, or make the canaries again and "
                         f"retrain")


def check_scored(scores: pd.DataFrame, folder: Path) -> None:
    """InputError if the attack or the signal left a canary without a number: it would be guessed 'not planted'
    unseen (the key is not read yet, so this says nothing of it)."""
    missing = scores[scores[["score", "loss"]].isna().any(axis=1)]
    if not missing.empty:
        raise InputError(f"{folder / CANARIES_FILE}: {len(missing)} canaries (first {missing['sample_id'].iloc[0]}) got "
                         f"no score from this attack and signal (too short after tokenization?); choose another "
                         f"attack or remake the canaries")


def read_key(folder: Path, canaries: pd.DataFrame) -> np.ndarray:
    """Whether each canary was planted, in the canaries' order (InputError if the key does not match them)."""
    key = read_table(folder / KEY_FILE)
    if set(key.get("sample_id", [])) != set(canaries["sample_id"]) or "included" not in key:
        raise InputError(f"{folder / KEY_FILE}: does not match {folder / CANARIES_FILE}; make the canaries again")
    return key.set_index("sample_id").loc[canaries["sample_id"], "included"].to_numpy(dtype=bool)


def default_attack(kind: str, references: list[str]) -> str:
    """The attack that scores canaries unless the user names one: a secret design's secret alone (SECRET_ATTACK); the
    likelihood ratio for sample canaries with a reference (it explains away how hard each text is), else the target's
    loss."""
    if kind in SECRET_DESIGNS:
        return SECRET_ATTACK
    return "likelihood_ratio" if references else "loss"


def secret_columns(folder: Path, canary_set: CanarySet, canaries: pd.DataFrame, attack: str) -> pd.DataFrame:
    """The canaries with their `secret` (read from canaries.jsonl) where the design has one; InputError where
    SECRET_ATTACK or the exposure's candidates need one that is not there."""
    table = read_table(folder / CANARIES_FILE)
    if canary_set.has_secret and "secret" in table:
        return canaries.assign(secret=table.set_index("sample_id").loc[canaries["sample_id"], "secret"].to_numpy())
    if attack == SECRET_ATTACK or canary_set.has_secret:
        raise InputError(f"{folder / CANARIES_FILE}: these canaries have no secret to score alone (design "
                         f"{canary_set.kind}, or made before lmaudit recorded secrets); "
                         + ("choose another --attack, or make the canaries again" if not canary_set.has_secret
                            else "make the canaries again"))
    return canaries


def token_signal_config(config: AuditConfig) -> AuditConfig:
    """The configuration with the per-token signal of the target's family, which a secret is read from."""
    from lmaudit.models.config_json import model_family
    from lmaudit.signals.registry import TOKEN_SIGNALS

    family = model_family(config.target_source())
    if family not in TOKEN_SIGNALS:
        raise InputError(f"--attack {SECRET_ATTACK}: reads a language model's tokens; a {family} has none")
    return config.model_copy(update={"signal": config.signal.model_copy(update={"signal": TOKEN_SIGNALS[family],
                                                                                 "normalize": None})})


def audit_canaries(config: AuditConfig, folder: str | Path, attack: str | None = None,
                   candidates: int = DEFAULT_CANDIDATES, delta: float | None = None, confidence: float = CONFIDENCE,
                   progress: bool = False, overwrite: bool = False) -> CanaryAudit:
    """Score the canaries of `folder` on the configured target (and references) with `attack` (default:
    `default_attack`), bound epsilon from the key (Steinke et al.'s and the f-DP bound), measure the secrets' exposure
    against `candidates` random ones, and write the output folder (config.out). `delta`: that of the bounds (default:
    the target's recorded DP-SGD delta, a group's for canaries planted several times, else DEFAULT_DELTA). An output
    folder holding another run's results is refused unless `overwrite`."""
    from lmaudit.audit.records import resolve
    from lmaudit.canaries.extraction import secrets_given_back
    from lmaudit.metrics.canary_validity import rank_check
    from lmaudit.metrics.exposure import exposures
    from lmaudit.metrics.fdp_one_run import gaussian_bound
    from lmaudit.metrics.memorisation_curve import memorisation_curve
    from lmaudit.metrics.one_run import one_run_bound
    from lmaudit.models.training_file import read_training_summary

    folder = Path(folder)
    canary_set = read_canary_set(folder)
    attack = attack or default_attack(canary_set.kind, config.reference)
    canaries = secret_columns(folder, canary_set, load_corpus(folder / CANARIES_FILE), attack)
    if attack == SECRET_ATTACK:
        config = token_signal_config(config)
    trained = read_training_summary(config.adapter or config.target)  # a LoRA run records it in the adapter
    check_trained_with(trained, config.adapter or config.target, folder)
    dp = recorded_accounting(trained)
    claimed = compared_epsilon(dp, canary_set.group_size)  # a group's delta for repeated canaries
    delta = delta if delta is not None else (claimed[1] if claimed else dp["delta"] if dp else DEFAULT_DELTA)
    secret = canary_set.kind == "secret"
    recorded = {**config.model_dump(), "canaries": str(folder), "attack": attack, "candidates": candidates,
                "delta": delta, "confidence": confidence}
    with output_lock(config.out):
        refuse_another_run(config.out, recorded, overwrite, REPORT_FILE)
        pool = secret_candidates(canary_set, canaries, candidates) if secret and candidates else None
        log.info("canary audit: scoring %d canaries%s with %s", len(canaries),
                 f" and {candidates} random secrets" if pool is not None else "", attack)
        scored = canaries[["sample_id", "text", "label", "group_id", "subgroup_id", "source", "row",
                           *(["secret"] if "secret" in canaries else [])]]
        resolved = resolve(config, progress)
        scores, candidate_losses = canary_scores(resolved, attack, scored, pool,
                                                 canaries["label"].notna().all())
        check_scored(scores, folder)
        included = read_key(folder, scores)
        bound = one_run_bound(scores["score"].to_numpy(), included, delta, confidence, seed=config.evaluation.seed)
        gaussian = gaussian_bound(scores["score"].to_numpy(), included, delta, confidence, seed=config.evaluation.seed)
        check = rank_check(scores["score"].to_numpy(), included)
        if check.invalid:
            log.warning("canary audit INVALID: the planted canaries score below the unplanted ones (rank AUC %.3f, "
                        "p = %.2g): a bug in planting, saving or scoring, not a private model", check.auc, check.p_below)
        exposure = None
        if candidate_losses is not None:
            found = exposures(scores["loss"].to_numpy(), candidate_losses["loss"].to_numpy(), canary_set.space_bits)
            scores["rank_among_candidates"] = [e.rank for e in found]
            scores["exposure_sampled"] = [e.sampled for e in found]
            scores["exposure_extrapolated"] = [e.extrapolated for e in found]
            exposure = exposure_summary(scores, included, canary_set.space_bits, candidates)
        curve = None
        if canary_set.is_curve:
            counts = pd.Series(canary_set.repetition_counts(), index=read_table(folder / CANARIES_FILE)["sample_id"])
            scores["repeats"] = counts.loc[scores["sample_id"]].to_numpy()
            given_back = (secrets_given_back(resolved, canaries.set_index("sample_id").loc[scores["sample_id"]]
                                             .reset_index()) if canary_set.has_secret else None)
            curve = memorisation_curve(scores["score"].to_numpy(), included, scores["repeats"].to_numpy(),
                                       scores["exposure_extrapolated"].to_numpy() if exposure else None, given_back,
                                       n_boot=config.evaluation.bootstrap, seed=config.evaluation.seed)
        report = canary_report(config, canary_set, attack, bound, gaussian, exposure, dp, white_box_of(trained),
                               check, curve) | {"config": recorded}
        if config.include_text:
            scores["text"] = canaries.set_index("sample_id").loc[scores["sample_id"], "text"].to_numpy()
        write_canary_audit(Path(config.out), report, scores, curve)
        return CanaryAudit(bound, gaussian, scores, exposure, report)
