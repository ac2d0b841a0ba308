"""A language-model audit's signals: the target and its references on every sample of the target's roles, paired (the
same masks), what the token-level attacks read from the target, and white-box features."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lmaudit.attacks.base import (
    REFERENCE_LOSSES,
    REFERENCE_TOKEN_LOG_PROBS,
    REFERENCE_TOP1_SIMILARITY,
    SAMPLED_OVERLAPS,
    TARGET_LOSS,
    TOKEN_IDS,
    TOKEN_TOP1_IDS,
    TOP1_SIMILARITY,
    AttackInput,
)
from lmaudit.audit.corpus import audited_set_column
from lmaudit.audit.records import ResolvedAudit, ScoredSamples
from lmaudit.audit.tokens import losses_of, reference_kl_values, sampled_overlaps, token_level_values
from lmaudit.audit.whitebox import Scorer, ScoringPlan, whitebox_inputs
from lmaudit.data.roles import TARGET_ROLES
from lmaudit.errors import InputError
from lmaudit.signals.base import unpack_token_values
from lmaudit.signals.registry import signal_spec


def language_model_signals(audit: ResolvedAudit, corpus: pd.DataFrame) -> ScoredSamples:
    """The target's and the references' signal on every sample of the target's roles (paired), what the token-level
    attacks read from the target (from the audited signal, or from the token signal besides it), and white-box
    features."""
    from lmaudit.signals.compute import model_signals

    rows = corpus[corpus["role"].isin(TARGET_ROLES)].reset_index(drop=True)
    ids, texts = rows["sample_id"].tolist(), rows["text"].tolist()
    signal, spec = audit.signal.signal, signal_spec(audit.signal.signal)
    caveats = tokenizer_caveats(audit)
    serving = served_checks(audit)
    per_model = model_signals({"target": audit.target, **audit.references}, ids, texts, audit.signal, audit.scoring)
    losses = {name: losses_of(frame["value"], spec.output) for name, frame in per_model.items()}
    samples = rows[["sample_id", "role", "group_id", "subgroup_id", *audited_set_column(rows)]].copy()
    for name, loss in losses.items():
        samples[f"{name}_{signal}"] = loss
    samples["length"] = per_model["target"]["n_tokens"].to_numpy()
    samples["truncated"] = per_model["target"]["truncated"].to_numpy()
    values = {TARGET_LOSS: losses["target"]}
    if audit.references:
        values[REFERENCE_LOSSES] = np.column_stack([losses[name] for name in audit.references])
    missing: dict[str, str] = {}
    if spec.output == "tokens":
        token_values, missing = token_level_values(audit, audit.signal, rows, per_model["target"]["value"])
        values |= token_values
        values |= reference_token_values(audit, per_model, token_values, missing, spec.model_kind)
        values |= reference_kl_values(audit, rows, values, missing, spec.model_kind)
    if spec.model_kind == "clm" and audit.tokens.samia:
        values[SAMPLED_OVERLAPS] = sampled_overlaps(audit, rows)
    else:
        missing[SAMPLED_OVERLAPS] = ("not asked for: give --samia N (N generations per text)" if spec.model_kind == "clm"
                                     else "continues texts, so it needs a causal LM")
    inputs = [AttackInput(signal, samples, values, audit.evaluation.seed, settings=audit.attacks, missing=missing)]
    if audit.tokens.token_signal and spec.output != "tokens":
        inputs.append(token_signal_input(audit, rows, samples))
    if not audit.whitebox:
        return ScoredSamples(samples, inputs, warnings=caveats, serving=serving)
    plan = ScoringPlan(rows, [Scorer("target", audit.target, np.ones(len(rows), bool))], TARGET_ROLES)
    whitebox, skipped = whitebox_inputs(audit, plan, samples)
    return ScoredSamples(samples, inputs + whitebox, skipped, warnings=caveats, serving=serving)


def served_checks(audit: ResolvedAudit) -> dict[str, dict]:
    """Each served model's conformance check (signals/conformance.py), run before any of the audit's texts is sent:
    by model name, what serves it and the check's numbers, with the seed of the order the samples are sent in."""
    from lmaudit.models.tokenizer import load_tokenizer
    from lmaudit.serving.scorers import served_scorer
    from lmaudit.signals.conformance import conformance
    from lmaudit.signals.served import served_limit

    checks = {}
    for name, source in {"target": audit.target, **audit.references}.items():
        if source.served is None:
            continue
        tokenizer = load_tokenizer(source, audit.placement.trust_remote_code)
        limit = served_limit(source, tokenizer, audit.signal, served_scorer(source).identity)
        check = conformance(source, audit.placement, tokenizer, limit, audit.serving_tolerance, audit.evaluation.seed)
        checks[name] = check | {"request_order_seed": audit.scoring.order_seed}
    return checks


def reference_token_values(audit: ResolvedAudit, per_model: dict[str, pd.DataFrame], target: dict[str, np.ndarray],
                           missing: dict[str, str], model_kind: str) -> dict[str, np.ndarray]:
    """The first reference's per-token log-probabilities, where it scored the target's very tokens (same tokenizer and
    truncation), for the attacks that compare the two token by token; for a causal LM also how close each model's
    first choice is to the true token, in the reference's input-embedding space (PETAL). Else nothing, and the reason
    in `missing`."""
    from lmaudit.models.embeddings import normalised_input_embeddings
    from lmaudit.signals.variants import first_choice_similarity

    if not audit.references:
        missing[REFERENCE_TOKEN_LOG_PROBS] = "no reference model: give --reference (the fine-tune's base model)"
        return {}
    source = next(iter(audit.references.values()))
    table = unpack_token_values(per_model[next(iter(audit.references))]["value"].to_numpy())
    target_ids = target[TOKEN_IDS]
    if table["token_id"].shape != target_ids.shape or not np.array_equal(table["token_id"], target_ids, equal_nan=True):
        missing[REFERENCE_TOKEN_LOG_PROBS] = ("the first reference scored other tokens than the target (another "
                                              "tokenizer or length limit), so the two cannot be compared token by token")
        return {}
    values = {REFERENCE_TOKEN_LOG_PROBS: table["log_prob"]}
    if model_kind == "clm" and (TOKEN_TOP1_IDS not in target or np.isnan(table["top1_id"][~np.isnan(target_ids)]).all()):
        missing[TOP1_SIMILARITY] = missing.get(TOKEN_TOP1_IDS, "the first reference's answers do not name its most "
                                                                "likely tokens' ids")
    elif model_kind == "clm":
        embeddings = normalised_input_embeddings(source, audit.placement)
        values[TOP1_SIMILARITY] = first_choice_similarity(embeddings, target[TOKEN_TOP1_IDS], target_ids)
        values[REFERENCE_TOP1_SIMILARITY] = first_choice_similarity(embeddings, table["top1_id"], target_ids)
    else:
        missing[TOP1_SIMILARITY] = "compares a causal LM's greedy next tokens; a masked LM generates none"
    return values


def tokenizer_caveats(audit: ResolvedAudit) -> list[str]:
    """Refuse references whose tokenizer differs from the target's (their masks would not be paired with the
    target's), unless the audit allows the mismatch; then one warning per such reference, for the report and its
    verdict."""
    from lmaudit.models.tokenizer import tokenizer_difference

    caveats = []
    for name, source in audit.references.items():
        difference = tokenizer_difference(audit.target, source, audit.placement.trust_remote_code)
        if difference is None:
            continue
        if not audit.allow_tokenizer_mismatch:
            raise InputError(f"{source.folder}: its tokenizer differs from the target's ({difference}), so the masks "
                             "of target and reference cannot be paired; give a reference with the target's tokenizer, "
                             "or --allow-tokenizer-mismatch to audit anyway")
        caveats.append(f"{name}'s tokenizer differs from the target's ({difference}): each model's masks are drawn over "
                       "its own tokens, not paired, so the reference-based attacks compare different masked positions "
                       "(audited with --allow-tokenizer-mismatch)")
    return caveats


def token_signal_input(audit: ResolvedAudit, rows: pd.DataFrame, samples: pd.DataFrame) -> AttackInput:
    """The token-level attacks' input from the token signal, computed for the target only (the references keep the
    audited signal); its mean NLL becomes the samples table's target_<token signal> column."""
    from lmaudit.signals.compute import model_signal

    token_signal = audit.tokens.token_signal
    settings = audit.signal.model_copy(update={"signal": token_signal, "normalize": None})
    stored = model_signal(audit.target, rows["sample_id"].tolist(), rows["text"].tolist(), settings, audit.scoring,
                          f"target {token_signal}")["value"]
    values, missing = token_level_values(audit, settings, rows, stored)
    samples[f"target_{token_signal}"] = values[TARGET_LOSS] = losses_of(stored, "tokens")
    missing[REFERENCE_LOSSES] = f"the references are scored with the audited signal ({audit.signal.signal}) only"
    return AttackInput(token_signal, samples, values, audit.evaluation.seed, settings=audit.attacks, missing=missing)
