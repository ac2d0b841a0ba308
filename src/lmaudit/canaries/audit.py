"""Auditing a model's canaries: score every canary with a registered attack, then prove what the scores allow.

The scores are computed without the key: every canary enters the attack as an audited sample of unknown membership
(role `nonmember` in the signals table, for all of them alike), and a registered attack that is fitted on audited
labels does not apply. Only then is the key read, to count the correct guesses of the one-run audit. For secret
canaries, random secrets of the same format are scored too: they give each canary's exposure and serve as the
population of attacks that need one (RMIA).

The output folder holds canary_report.json and canary_scores.parquet (one row per canary: id, score, loss, exposure;
never whether it was planted, nor its text unless asked).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit import __version__
from lmaudit.atomic import staged
from lmaudit.attacks.base import TARGET_LOSS, AttackInput, AttackScores
from lmaudit.attacks.registry import attack_spec, run_attacks
from lmaudit.canaries.make import CANARIES_FILE, KEY_FILE, CanarySet, random_secrets, read_canary_set
from lmaudit.config import AuditConfig
from lmaudit.data.corpus import load_corpus, read_table
from lmaudit.data.roles import NONMEMBER, POPULATION
from lmaudit.errors import InputError
from lmaudit.locks import output_lock
from lmaudit.metrics.exposure import exposures
from lmaudit.metrics.one_run import OneRunBound, one_run_bound
from lmaudit.signals.registry import signal_spec

log = logging.getLogger(__name__)
DEFAULT_CANDIDATES = 1000
CONFIDENCE = 0.95
REPORT_FILE, SCORES_FILE = "canary_report.json", "canary_scores.parquet"
CANDIDATE_SEED = 15485863  # added to the canaries' seed: candidates are drawn apart from the secrets
EXPLANATION = (
    "What the bound means: if the training that produced this model were (epsilon, delta)-differentially private "
    "with an epsilon below the bound, guesses this good about which canaries it saw would happen less than "
    "{risk:.0%} of the time. So the training is not that private, with {confidence:.0%} confidence. "
    "What it does not mean: it is a lower bound, not an estimate of the true epsilon, which may be far larger; a "
    "bound of 0 proves nothing either way (the model may still leak). It comes from one training run and one "
    "attack: a stronger attack, more canaries, or canaries that stand out more can only raise it. It speaks of the "
    "canaries' privacy; real samples, which are less unusual, typically leak less."
)


@dataclass(frozen=True)
class CanaryAudit:
    """A canary audit's result: the one-run bound, each canary's scores (canary_scores.parquet's table), the exposure
    summary (secret canaries) and canary_report.json's document."""

    bound: OneRunBound
    scores: pd.DataFrame
    exposure: dict | None
    report: dict


def canary_scores(config: AuditConfig, attack: str, canaries: pd.DataFrame, candidates: pd.DataFrame | None,
                  labels: bool, progress: bool) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Each canary's membership score under `attack` and the target's loss (sample_id, score, loss), and the
    candidates' target loss (sample_id, loss) where there are candidates. No key is read here."""
    from lmaudit.pipeline import language_model_signals

    rows = pd.concat([canaries.assign(role=NONMEMBER),
                      *([candidates.assign(role=POPULATION)] if candidates is not None else [])], ignore_index=True)
    if signal_spec(config.signal.signal).output == "log_probabilities":
        if config.reference:
            raise InputError("--reference: a classifier's canaries are scored by its own loss; leave --reference out")
        if not labels:
            raise InputError("--signal classifier: the canaries have no label; make sample canaries from a labelled "
                             "--source")
        inputs, samples = classifier_inputs(config, rows, progress)
    else:
        scored = language_model_signals(config, rows, config.placement(), config.signal_backend(), progress)
        inputs, samples = scored.inputs, scored.samples
    spec = attack_spec(attack)
    results, skipped = run_attacks(inputs, [spec])
    sample_level = [result for result in results if result.level == "sample"]
    if not sample_level:
        reasons = "; ".join(s.reason for s in skipped) or f"it does not apply to the {config.signal.signal} signal"
        raise InputError(f"--attack {attack}: cannot score the canaries ({reasons}); choose another attack")
    return frames_of(sample_level[0], samples, config.signal.signal)


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


def classifier_inputs(config: AuditConfig, rows: pd.DataFrame, progress: bool) -> tuple[list[AttackInput], pd.DataFrame]:
    """A classifier's canaries as the loss attack reads them: the target's cross-entropy loss on each (nats)."""
    from lmaudit.models.load import classifier_labels
    from lmaudit.pipeline import label_indices
    from lmaudit.signals.compute import model_signal
    from lmaudit.signals.features import classifier_features
    from lmaudit.signals.store import default_cache_dir

    source = config.target_source()
    label_ids = label_indices(rows, classifier_labels(source), source.folder)
    values = model_signal(source, rows["sample_id"].tolist(), rows["text"].tolist(), config.signal,
                          config.cache_dir or default_cache_dir(config.out), progress, config.placement(), "target")
    loss = classifier_features(np.stack(values["value"].to_numpy()), label_ids)["loss"]
    samples = rows[["sample_id", "role", "group_id", "subgroup_id"]].assign(loss=loss,
                                                                            length=values["n_tokens"].to_numpy())
    return [AttackInput(config.signal.signal, samples, {TARGET_LOSS: loss}, config.evaluation.seed)], samples


def secret_candidates(canary_set: CanarySet, canaries: pd.DataFrame, count: int) -> pd.DataFrame:
    """`count` random secrets of the canaries' format that are none of the canaries (sample_id candidate-N)."""
    rng = np.random.default_rng(canary_set.seed + CANDIDATE_SEED)
    taken = set(canaries["text"])
    texts: list[str] = []
    while len(texts) < count:
        fresh = random_secrets(canary_set.secret_format, canary_set.secret_digits, count - len(texts), rng)
        texts = list(dict.fromkeys(texts + [text for text in fresh if text not in taken]))
    return pd.DataFrame({"sample_id": [f"candidate-{i + 1}" for i in range(count)], "text": texts})


def exposure_summary(scores: pd.DataFrame, included: np.ndarray, space_bits: float, candidates: int) -> dict:
    """Median and largest exposure (bits) of the planted and of the never-planted secrets (the latter show what
    chance alone gives), by the candidates' count and by extrapolation."""
    def summary(rows: pd.DataFrame) -> dict:
        return {"secrets": len(rows),
                **{f"{how}_{stat}": float(getattr(rows[f"exposure_{how}"], stat)()) if len(rows) else None
                   for how in ("sampled", "extrapolated") for stat in ("median", "max")}}

    return {"space_bits": space_bits, "candidates": candidates,
            "sampled_cap_bits": float(np.log2(candidates + 1)),
            "planted": summary(scores[included]), "not_planted": summary(scores[~included])}


def accountant_epsilon(target: str) -> dict | None:
    """The accountant's epsilon and delta that lmaudit's DP-SGD training recorded for the target, if any."""
    from lmaudit.models.train import read_training_summary

    summary = read_training_summary(target) or {}
    dp = summary.get("dp")
    return None if not dp else {"epsilon_rdp": dp["epsilon_rdp"], "epsilon_prv": dp["epsilon_prv"], "delta": dp["delta"]}


def read_key(folder: Path, canaries: pd.DataFrame) -> np.ndarray:
    """Whether each canary was planted, in the canaries' order (InputError if the key does not match them)."""
    key = read_table(folder / KEY_FILE)
    if set(key.get("sample_id", [])) != set(canaries["sample_id"]) or "included" not in key:
        raise InputError(f"{folder / KEY_FILE}: does not match {folder / CANARIES_FILE}; make the canaries again")
    return key.set_index("sample_id").loc[canaries["sample_id"], "included"].to_numpy(dtype=bool)


def default_attack(kind: str, references: list[str]) -> str:
    """The attack that scores canaries unless the user names one: the likelihood ratio for sample canaries with a
    reference (it explains away how hard each text is), else the target's loss. Secrets are alike by construction
    (one format, uniform random digits), so a reference has nothing to explain away and only adds its own noise."""
    return "likelihood_ratio" if kind == "sample" and references else "loss"


def audit_canaries(config: AuditConfig, folder: str | Path, attack: str | None = None,
                   candidates: int = DEFAULT_CANDIDATES, delta: float | None = None, confidence: float = CONFIDENCE,
                   progress: bool = False) -> CanaryAudit:
    """Score the canaries of `folder` on the configured target (and references) with `attack` (default:
    `default_attack`), bound epsilon from the key, measure the secrets' exposure against `candidates` random ones,
    and write the output folder (config.out). `delta`: that of the bound (default: the target's recorded DP-SGD
    delta, else 0, the pure-DP bound)."""
    folder = Path(folder)
    canary_set = read_canary_set(folder)
    attack = attack or default_attack(canary_set.kind, config.reference)
    canaries = load_corpus(folder / CANARIES_FILE)
    dp = accountant_epsilon(config.adapter or config.target)  # a LoRA run records its training in the adapter
    delta = delta if delta is not None else (dp["delta"] if dp else 0.0)
    secret = canary_set.kind == "secret"
    with output_lock(config.out):
        pool = secret_candidates(canary_set, canaries, candidates) if secret and candidates else None
        log.info("canary audit: scoring %d canaries%s with %s", len(canaries),
                 f" and {candidates} random secrets" if pool is not None else "", attack)
        scored = canaries[["sample_id", "text", "label", "group_id", "subgroup_id"]]
        scores, candidate_losses = canary_scores(config, attack, scored, pool, canaries["label"].notna().all(), progress)
        included = read_key(folder, scores)
        bound = one_run_bound(scores["score"].to_numpy(), included, delta, confidence, seed=config.evaluation.seed)
        exposure = None
        if candidate_losses is not None:
            found = exposures(scores["loss"].to_numpy(), candidate_losses["loss"].to_numpy(), canary_set.space_bits)
            scores["rank_among_candidates"] = [e.rank for e in found]
            scores["exposure_sampled"] = [e.sampled for e in found]
            scores["exposure_extrapolated"] = [e.extrapolated for e in found]
            exposure = exposure_summary(scores, included, canary_set.space_bits, candidates)
        report = canary_report(config, canary_set, attack, bound, exposure, dp)
        if config.include_text:
            scores["text"] = canaries.set_index("sample_id").loc[scores["sample_id"], "text"].to_numpy()
        write_canary_audit(Path(config.out), report, scores)
        return CanaryAudit(bound, scores, exposure, report)


def canary_report(config: AuditConfig, canary_set: CanarySet, attack: str, bound: OneRunBound, exposure: dict | None,
                  dp: dict | None) -> dict:
    """canary_report.json's document: what was audited, the bound with its guesses, the exposure, the accountant's
    epsilon beside the bound, and the plain-words explanation."""
    guesses = bound.guesses
    verdict = None
    if dp is not None and dp["delta"] == bound.delta:
        claimed = dp["epsilon_prv"] if dp["epsilon_prv"] is not None else dp["epsilon_rdp"]
        verdict = ("consistent: the bound is below the accountant's epsilon" if bound.epsilon_lower_bound <= claimed
                   else "CONTRADICTION: the bound exceeds the accountant's epsilon; the DP training or its accounting "
                        "is wrong")
    return {
        "schema_version": 1, "kind": "canary_audit", "lmaudit_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "target": config.target, "reference": list(config.reference), "attack": attack, "signal": config.signal.signal,
        "canaries": {key: value for key, value in asdict(canary_set).items() if key != "secret_format"}
        | {"space_bits": canary_set.space_bits},
        "one_run": {"canaries": guesses.canaries, "guesses": guesses.guesses,
                    "positive_guesses": guesses.positive_guesses, "negative_guesses": guesses.negative_guesses,
                    "correct": guesses.correct, "accuracy": guesses.correct / guesses.guesses if guesses.guesses else None,
                    "epsilon_lower_bound": bound.epsilon_lower_bound, "delta": bound.delta,
                    "confidence": bound.confidence, "choices_of_k": bound.choices},
        "accountant": dp, "verdict": verdict, "exposure": exposure,
        "explanation": EXPLANATION.format(risk=1 - bound.confidence, confidence=bound.confidence),
        "settings": {"signal": config.signal.model_dump(), "seed": config.evaluation.seed,
                     "include_text": config.include_text},
    }


def write_canary_audit(out: Path, report: dict, scores: pd.DataFrame) -> None:
    """The scores table and the report, both or neither."""
    out.mkdir(parents=True, exist_ok=True)
    with staged(out / SCORES_FILE, out / REPORT_FILE) as (scores_file, report_file):
        scores.to_parquet(scores_file, index=False)
        report_file.write_text(json.dumps(report, indent=2, default=float), encoding="utf-8")


def canary_lines(report: dict) -> list[str]:
    """The canary report for a terminal: the bound and its guesses, the accountant's epsilon, the exposure, and what
    the bound means."""
    one_run = report["one_run"]
    lines = [f"{report['canaries']['count']} {report['canaries']['kind']} canaries scored by {report['attack']} "
             f"({report['signal']}); guessed {one_run['positive_guesses']} planted and {one_run['negative_guesses']} "
             f"not planted, {one_run['correct']} of {one_run['guesses']} right",
             f"epsilon lower bound: {one_run['epsilon_lower_bound']:.3f} at delta {one_run['delta']:g}, "
             f"{one_run['confidence']:.0%} confidence (best of {one_run['choices_of_k']} guess counts, "
             f"Bonferroni-corrected)"]
    if report["accountant"]:
        accountant = report["accountant"]
        lines.append(f"the accountant's epsilon: {accountant['epsilon_rdp']:.3g} (RDP) at delta {accountant['delta']:g}"
                     + (f"; {report['verdict']}" if report["verdict"] else ""))
    if report["exposure"]:
        exposure = report["exposure"]
        lines.append(f"exposure (bits; {exposure['space_bits']:.1f} possible, {exposure['candidates']} random secrets "
                     f"scored): planted median {exposure['planted']['extrapolated_median']:.2f}, largest "
                     f"{exposure['planted']['extrapolated_max']:.2f}; never planted median "
                     f"{exposure['not_planted']['extrapolated_median']:.2f} (extrapolated)")
    return lines + [report["explanation"]]
