"""`CheckpointAudit`: a transformers `TrainerCallback` (Trainer, TRL's SFTTrainer, with or without PEFT) that audits the
in-memory causal LM at every checkpoint save: the loss attack on members against a population (AUC with its interval,
TPR at 1% FPR) and, given canaries with a secret, Steinke et al.'s one-run epsilon lower bound (and, for canaries
planted at several repetition counts, the memorisation curve: `metrics/memorisation_curve.py`). The texts are scored,
attacked and evaluated by the audit's own scorer (`signals/compute.py:in_memory_signal`), attack registry and
evaluation, so a save's numbers are those `lmaudit audit` gives the saved checkpoint on the same texts. One entry of numbers per
save goes to lmaudit_checkpoint_audits.json in the run's output folder: the leakage-over-training curve of the user's
own run (Jagannatha et al. read AUC per epoch). The file holds numbers only, never a word of any text."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from transformers import TrainerCallback

from lmaudit.atomic import write_text
from lmaudit.attacks.base import TARGET_LOSS, AttackInput
from lmaudit.attacks.registry import attack_spec, run_attacks
from lmaudit.canaries.make import CANARIES_FILE, read_canary_set, reserved_tokens
from lmaudit.canaries.span import secret_token_ids, secrets_log_probability
from lmaudit.data.corpus import read_table
from lmaudit.data.roles import AUDITED_ROLES, MEMBER
from lmaudit.errors import InputError
from lmaudit.metrics.canary_validity import rank_check
from lmaudit.metrics.clusters import cluster_codes
from lmaudit.metrics.evaluate import evaluate_slice
from lmaudit.metrics.memorisation_curve import memorisation_curve
from lmaudit.metrics.one_run import one_run_bound
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models.config_json import family_of
from lmaudit.signals.compute import in_memory_signal
from lmaudit.signals.registry import resolved
from lmaudit.signals.settings import SignalSettings
from lmaudit.strict_json import json_text
from lmaudit.training.planting import secret_folder

log = logging.getLogger(__name__)
AUDITS_FILE = "lmaudit_checkpoint_audits.json"
DEFAULT_MAX_TEXTS = 500  # per role: 1,000 texts score in seconds on a GPU, and every save scores them all again
FPR = 0.01
DELTA, CONFIDENCE = 1e-5, 0.95  # of the canaries' one-run bound, as `lmaudit canaries audit` states it by default


def checked_texts(role: str, texts: Sequence[str], groups: Sequence | None) -> list[str]:
    """`texts` as a list, or an InputError naming the option of `role` ('member' or 'population') when there are none,
    one is empty, or `groups` (one id per text) has another length."""
    option = "members" if role == "member" else role
    texts = list(texts)
    if not texts:
        raise InputError(f"CheckpointAudit {option}: no texts; give at least one text of this role")
    empty = [index for index, text in enumerate(texts) if not isinstance(text, str) or not text.strip()]
    if empty:
        raise InputError(f"CheckpointAudit {option}: text {empty[0]} is empty or not a string; remove it")
    if groups is not None and len(groups) != len(texts):
        raise InputError(f"CheckpointAudit {role}_groups: {len(groups)} group ids for {len(texts)} texts; give "
                         "one group id per text, in the same order")
    return texts


def shared_group(member_groups: Sequence | None, population_groups: Sequence | None) -> object | None:
    """A group id found among both the members' and the population's (a patient cannot be both), or None."""
    if member_groups is None or population_groups is None:
        return None
    present = {group for group in population_groups if not pd.isna(group)}
    return next((group for group in member_groups if not pd.isna(group) and group in present), None)


def subset(count: int, groups: Sequence | None, max_texts: int, seed: int | Sequence[int]) -> np.ndarray:
    """Indices of at most `max_texts` of `count` texts (all when they fit): whole groups in a seeded random order while
    they fit (at least one group), or a seeded random sample when there are no groups."""
    if count <= max_texts:
        return np.arange(count)
    rng = np.random.default_rng(seed)
    if groups is None:
        return np.sort(rng.choice(count, max_texts, replace=False))
    codes = cluster_codes(np.arange(count), groups)  # a text without a group id is a group of its own
    order = rng.permutation(codes.max() + 1)
    fitting = int(np.searchsorted(np.cumsum(np.bincount(codes)[order]), max_texts, side="right"))
    return np.flatnonzero(np.isin(codes, order[: max(1, fitting)]))


def audited_samples(texts: Sequence[Sequence[str]], groups: Sequence[Sequence | None],
                    chosen: Sequence[np.ndarray]) -> pd.DataFrame:
    """The chosen members, then the chosen population, as the audit's samples: sample_id, role (member; non-member for
    the population, which the AUC sets against them), group_id (None without one: each text alone), text."""
    rows = []
    for role, role_texts, role_groups, indices in zip(AUDITED_ROLES, texts, groups, chosen, strict=True):
        name = "member" if role == MEMBER else "population"
        rows += [{"sample_id": f"{name}-{i}", "role": role, "group_id": None if role_groups is None else role_groups[i],
                  "text": role_texts[i]} for i in indices]
    return pd.DataFrame(rows, columns=["sample_id", "role", "group_id", "text"])


def causal_network(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model to score: a PeftModel's base model, its adapter layers in place and active; InputError
    for a model without a causal LM head."""
    network = model.get_base_model() if hasattr(model, "get_base_model") else model
    if family_of([type(network).__name__]) != "clm":
        raise InputError(f"CheckpointAudit: {type(network).__name__} is not a causal LM (its class name ends neither in "
                         "ForCausalLM nor LMHeadModel); audit a masked LM's or a classifier's saved checkpoints with "
                         "`lmaudit audit` instead")
    return network


def planted_scores(model: torch.nn.Module, tokenizer, canaries: pd.DataFrame, settings: SignalSettings) -> np.ndarray:
    """(m,) each canary's mean log-probability (nats per token) of its secret's tokens alone, higher = planted: the
    canary audit's score, on the per-token signal of the same scorer."""
    tokens = resolved(settings.model_copy(update={"signal": "clm_tokens"}), model.device.type)
    values = in_memory_signal(model, tokenizer, canaries["sample_id"].tolist(), canaries["text"].tolist(), tokens)
    scores = secrets_log_probability(values["value"], secret_token_ids(tokenizer, canaries["secret"]))
    if np.isnan(scores).any():
        raise InputError(f"CheckpointAudit canaries: canary '{canaries['sample_id'].iloc[int(np.isnan(scores).argmax())]}'"
                         " loses its secret to truncation; raise max_length")
    return scores


def membership_entry(samples: pd.DataFrame, target_loss: np.ndarray) -> dict:
    """The loss attack's numbers on `samples` (`audited_samples`) with each one's target loss (nats per token), by the
    audit's attack registry and evaluation: counts, AUC with its 95% interval (resampling whole groups; each text
    alone without one), TPR at 1% FPR."""
    values = {TARGET_LOSS: np.asarray(target_loss, dtype=float)}
    data = AttackInput("clm_loss", samples[["sample_id", "role", "group_id"]], values)
    [scores], _ = run_attacks([data], [replace(attack_spec("loss"), aggregated_to=())])
    result = evaluate_slice(scores, "all", scores.frame, scores.frame.iloc[:0], EvaluationSettings(alphas=(FPR,)))
    return {"members": result.n_members, "population": result.n_nonmembers, "auc": result.auc,
            "auc_low": result.auc_ci[0], "auc_high": result.auc_ci[1], "tpr_at_1pct_fpr": result.tpr_at_fpr[str(FPR)].tpr}


class CurvePoint(BaseModel):
    """One repetition count's canaries at one save: how many planted, TPR at 1% FPR with its 95% interval (None with
    fewer than 100 controls), AUC, and whether the run is claimed to memorise them (Holm over the counts, 5%)."""

    model_config = ConfigDict(extra="forbid")
    repeats: int
    planted: int
    tpr: float | None
    tpr_low: float | None
    tpr_high: float | None
    auc: float
    memorised: bool


def curve_points(scores: np.ndarray, included: np.ndarray, repeats: np.ndarray, seed: int) -> tuple[list[dict], int | None]:
    """The memorisation curve's points at one save, and the smallest repetition count claimed memorised."""
    curve = memorisation_curve(scores, included, repeats, n_boot=200, seed=seed)
    points = [{"repeats": tier.repeats, "planted": tier.planted, "tpr": tier.tpr, "auc": tier.auc,
               "tpr_low": tier.tpr_ci[0] if tier.tpr_ci else None, "tpr_high": tier.tpr_ci[1] if tier.tpr_ci else None,
               "memorised": tier.memorised} for tier in curve.tiers]
    return points, curve.smallest_memorised


class CheckpointEntry(BaseModel):
    """One save's entry of lmaudit_checkpoint_audits.json: the step and epoch, the members and population texts scored,
    the loss attack's AUC with its 95% interval and TPR at 1% FPR, and with canaries their one-run epsilon lower bound
    and rank check (None where not measured)."""

    model_config = ConfigDict(extra="forbid")
    step: int
    epoch: float | None
    members: int
    population: int
    auc: float | None
    auc_low: float | None
    auc_high: float | None
    tpr_at_1pct_fpr: float | None
    canary_epsilon_lower_bound: float | None
    canaries_valid: bool | None = None
    canary_rank_auc: float | None = None
    canary_p_below: float | None = None
    memorisation: list[CurvePoint] | None = None
    smallest_memorised: int | None = None


CHECKPOINT_AUDITS = TypeAdapter(list[CheckpointEntry])  # the file: one entry per save, by step


def read_audits(output_dir: str | Path) -> list[dict]:
    """The entries a run's CheckpointAudit wrote into `output_dir`, by step (None where not measured); none before the
    first save; InputError naming the file when it is not one CheckpointAudit writes."""
    path = Path(output_dir) / AUDITS_FILE
    if not path.is_file():
        return []
    try:
        entries = CHECKPOINT_AUDITS.validate_json(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValidationError) as error:
        raise InputError(f"{path}: unreadable ({error.__class__.__name__}); move it away to start the curve again") from None
    return [entry.model_dump(exclude_unset=True) for entry in entries]


def write_audits(output_dir: str | Path, entries: list[dict]) -> None:
    """Write the entries as lmaudit_checkpoint_audits.json, whole or not at all, once they match CheckpointEntry
    (strict JSON: a number that is not one, NaN, is null)."""
    text = json_text(entries)
    CHECKPOINT_AUDITS.validate_json(text)  # a writer's bug is refused before the file is replaced
    write_text(Path(output_dir) / AUDITS_FILE, text)


def with_entry(entries: list[dict], entry: dict) -> list[dict]:
    """`entries` with `entry` added, replacing one of the same step (a resumed run saves it again), by step."""
    return sorted([*(e for e in entries if e["step"] != entry["step"]), entry], key=lambda e: e["step"])


class CheckpointAudit(TrainerCallback):
    """At every checkpoint save, the membership audit of the in-memory causal LM: `members` (texts it trains on)
    against `population` (texts of the same kind it never sees); optionally the one-run bound of the canaries
    in `canaries` (a folder of `lmaudit canaries make --design new_token`, their tokens reserved with
    `add_canary_tokens`, or `--design secret`; with several `--repeat` counts, the memorisation curve at each save). Group ids (patients) keep roles disjoint and make the AUC's interval resample whole groups.
    At most `max_texts` texts per role are scored, a seeded subset chosen once; `tokenizer` defaults to the trainer's
    processing_class; texts are truncated to `max_length` tokens (default: what the model accepts)."""

    def __init__(self, members: Sequence[str], population: Sequence[str], member_groups: Sequence | None = None,
                 population_groups: Sequence | None = None, canaries: str | Path | None = None,
                 max_texts: int = DEFAULT_MAX_TEXTS, seed: int = 0, tokenizer=None,
                 max_length: int | None = None) -> None:
        members = checked_texts("member", members, member_groups)
        population = checked_texts("population", population, population_groups)
        shared = shared_group(member_groups, population_groups)
        if shared is not None:
            raise InputError(f"CheckpointAudit member_groups, population_groups: group '{shared}' is in both; give "
                             "members and population texts of different groups (patients)")
        if max_texts < 1:
            raise InputError(f"CheckpointAudit max_texts: {max_texts}; give at least 1")
        # Chosen once, so that every checkpoint scores the same texts; each role by a generator of its own.
        chosen = [subset(len(texts), groups, max_texts, [seed, role]) for role, (texts, groups)
                  in enumerate(((members, member_groups), (population, population_groups)))]
        self.samples = audited_samples((members, population), (member_groups, population_groups), chosen)
        self.canary_folder = None if canaries is None else secret_folder(canaries)
        self.canaries = None if canaries is None else read_table(self.canary_folder / CANARIES_FILE)
        self.canary_set = None if canaries is None else read_canary_set(canaries)
        self.seed = seed
        self.tokenizer = tokenizer
        self.settings = SignalSettings(signal="clm_loss", max_length=max_length)

    def scoring_tokenizer(self, processing_class):
        """The tokenizer given, else the trainer's; InputError when there is none, or it lacks the canaries' tokens."""
        tokenizer = processing_class if self.tokenizer is None else self.tokenizer
        if tokenizer is None:
            raise InputError("CheckpointAudit: the trainer has no processing_class; pass the tokenizer, "
                             "CheckpointAudit(..., tokenizer=tokenizer)")
        if self.canary_folder is not None and not set(reserved_tokens(self.canary_folder)) <= set(tokenizer.get_added_vocab()):
            raise InputError(f"CheckpointAudit canaries: the tokenizer lacks the new tokens of {self.canary_folder}; "
                             "reserve them with add_canary_tokens(model, tokenizer, folder) before training")
        return tokenizer

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        """Refuse, before the first step, a model that is no causal LM or a tokenizer the audit cannot use."""
        causal_network(model)
        self.scoring_tokenizer(processing_class)

    def audit(self, model: torch.nn.Module, tokenizer) -> dict:
        """The entry's numbers for `model` as it is now (eval mode while scoring, its mode restored after)."""
        network = causal_network(model)
        training = model.training
        model.eval()  # no dropout: every save scores the same function of the weights
        try:
            with torch.no_grad():
                losses = in_memory_signal(network, tokenizer, self.samples["sample_id"].tolist(),
                                          self.samples["text"].tolist(), resolved(self.settings, network.device.type))
                canaries = None if self.canaries is None else planted_scores(network, tokenizer, self.canaries,
                                                                             self.settings)
        finally:
            model.train(training)
        entry = membership_entry(self.samples, losses["value"].to_numpy(dtype=float))
        entry["canary_epsilon_lower_bound"] = None
        if canaries is not None:  # the key is read only now, every canary scored
            from lmaudit.canaries.audit import read_key  # with the report's modules: loaded when canaries are audited

            included = read_key(self.canary_folder, self.canaries)
            entry["canary_epsilon_lower_bound"] = one_run_bound(canaries, included, DELTA, CONFIDENCE).epsilon_lower_bound
            check = rank_check(canaries, included)  # planted below unplanted: no audit at all (metrics/canary_validity.py)
            entry |= {"canaries_valid": not check.invalid, "canary_rank_auc": check.auc, "canary_p_below": check.p_below}
            if self.canary_set.is_curve:
                entry["memorisation"], entry["smallest_memorised"] = curve_points(
                    canaries, included, self.canary_set.repetition_counts(), self.seed)
            if check.invalid:
                log.warning("checkpoint audit: INVALID canary audit, the planted canaries score below the unplanted "
                            "ones (rank AUC %.3f, p = %.2g): a bug in planting or scoring", check.auc, check.p_below)
        return entry

    def on_save(self, args, state, control, model=None, processing_class=None, **kwargs):
        """Audit the model just saved; add its entry to the run's AUDITS_FILE (on the main process)."""
        entry = {"step": int(state.global_step), "epoch": None if state.epoch is None else float(state.epoch),
                 **self.audit(model, self.scoring_tokenizer(processing_class))}
        if not state.is_world_process_zero:
            return
        write_audits(args.output_dir, with_entry(read_audits(args.output_dir), entry))
        bound = entry["canary_epsilon_lower_bound"]
        log.info("checkpoint audit, step %d: AUC %.3f (95%% CI %.3f-%.3f), TPR %.3f at 1%% FPR%s", entry["step"],
                 entry["auc"], entry["auc_low"], entry["auc_high"], entry["tpr_at_1pct_fpr"],
                 "" if bound is None else f", canaries' epsilon >= {bound:.2f}")
