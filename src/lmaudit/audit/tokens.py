"""What the token-level attacks read besides the target's loss: its per-token values, the texts' compressed lengths,
token frequencies of non-audited text, the target's losses of lowercased, prefixed and neighbour texts, and the first
reference's KL from the target at every token."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lmaudit.attacks.base import (
    COMPRESSED_BYTES,
    LOWERCASE_LOSS,
    MEMBER_PREFIXED_LOG_PROBS,
    NEIGHBOUR_LOSSES,
    PREFIXED_LOG_PROBS,
    REFERENCE_KL,
    REFERENCE_TOKEN_LOG_PROBS,
    REPEATED_LOG_PROBS,
    SELF_PROMPT_LOSS,
    SELF_PROMPT_NEIGHBOUR_LOSSES,
    TOKEN_FREQUENCIES,
    TOKEN_IDS,
    TOKEN_IS_TOP1,
    TOKEN_LOG_PROBS,
    TOKEN_MEANS,
    TOKEN_STDS,
    TOKEN_TOP1_IDS,
)
from lmaudit.audit.records import ResolvedAudit
from lmaudit.data.corpus import load_corpus
from lmaudit.data.roles import CALIBRATION_MEMBER, POPULATION
from lmaudit.signals.base import unpack_token_values
from lmaudit.signals.registry import signal_spec
from lmaudit.signals.settings import SignalSettings

# The attack input a per-token signal's fields become (signals.base.TOKEN_FIELDS).
TOKEN_VALUES = {"log_prob": TOKEN_LOG_PROBS, "mean": TOKEN_MEANS, "std": TOKEN_STDS, "top1_id": TOKEN_TOP1_IDS,
                "token_id": TOKEN_IDS}


def losses_of(values: pd.Series, output: str) -> np.ndarray:
    """Each sample's loss (the signal's unit) from stored values: the value itself, or the mean NLL of its tokens."""
    if output == "tokens":
        return -np.nanmean(unpack_token_values(values.to_numpy())["log_prob"], axis=1)
    return values.to_numpy(dtype=float)


def why_missing(audit: ResolvedAudit, model_kind: str) -> dict[str, str]:
    """Why each value of the extra passes would be missing, as the audit is set up (overwritten by those computed)."""
    passes = audit.tokens
    return {
        TOKEN_FREQUENCIES: "no non-audited text to count token frequencies in: give --population or --frequency-data",
        LOWERCASE_LOSS: "not asked for (--no-lowercase)",
        PREFIXED_LOG_PROBS: ("conditions a causal LM on a prefix; a masked LM has no such form" if model_kind != "clm"
                             else f"needs more than --recall-prefix {passes.recall_prefix} population samples"
                             if passes.recall_prefix else "not asked for (--recall-prefix 0)"),
        MEMBER_PREFIXED_LOG_PROBS: ("conditions a causal LM on a prefix; a masked LM has no such form"
                                    if model_kind != "clm" else
                                    f"needs more than --recall-prefix {passes.recall_prefix} calibration members (known "
                                    "members, never audited) for its member prefix, and a population"
                                    if passes.recall_prefix else "not asked for (--recall-prefix 0)"),
        NEIGHBOUR_LOSSES: "not asked for: give --neighbours N (N more passes of the target)",
        REPEATED_LOG_PROBS: ("not asked for: give --camia (one more pass, of each text repeated 6 times)"
                             if model_kind == "clm" else "repeats a text for a causal LM; a masked LM has no such form"),
        SELF_PROMPT_LOSS: ("SPV-MIA calibrates a causal LM; a masked LM generates no self-prompt text" if model_kind != "clm"
                           else "no self-prompt reference: build one with `lmaudit train self-prompt` and give "
                                "--self-prompt-reference" if passes.self_prompt_reference is None
                           else "the self-prompt reference scores the neighbour texts: give --neighbours N"),
    }


def token_level_values(audit: ResolvedAudit, settings: SignalSettings, rows: pd.DataFrame,
                       stored: pd.Series) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """What the token-level attacks read besides the target's loss, from the target's stored per-token values of
    `rows` under `settings`, and the extra passes the audit asks for; and why any of these is missing."""
    from lmaudit.models.tokenizer import load_tokenizer
    from lmaudit.signals.compute import model_signal
    from lmaudit.signals.variants import compressed_bytes, corpus_counts, smoothed_frequencies, token_ids_of

    ids, texts = rows["sample_id"].tolist(), rows["text"].tolist()
    tokens = unpack_token_values(stored.to_numpy())
    values = {TOKEN_VALUES[field]: table for field, table in tokens.items()}
    values[TOKEN_IS_TOP1] = np.where(np.isnan(tokens["token_id"]), np.nan, tokens["top1_id"] == tokens["token_id"])
    unserved = served_gaps(audit, tokens)
    values = {name: table for name, table in values.items() if name not in unserved}
    values[COMPRESSED_BYTES] = compressed_bytes(texts)
    population = np.flatnonzero(rows["role"].to_numpy() == POPULATION)
    spec = signal_spec(settings.signal)
    loss_settings = settings.model_copy(update={"signal": spec.loss_signal, "normalize": None})

    def target_losses(variant_ids: list[str], variant_texts: list[str], label: str) -> np.ndarray:
        frame = model_signal(audit.target, variant_ids, variant_texts, loss_settings, audit.scoring, label)
        return frame["value"].to_numpy(dtype=float)

    passes = audit.tokens
    tokenizer = load_tokenizer(audit.target, audit.placement.trust_remote_code)
    extra_texts = load_corpus(passes.frequency_data)["text"].tolist() if passes.frequency_data else []
    missing = why_missing(audit, spec.model_kind)
    if len(population) or extra_texts:
        population_ids = token_ids_of(tokenizer, [texts[i] for i in population])
        counts = corpus_counts(population_ids + token_ids_of(tokenizer, extra_texts), len(tokenizer))
        own: list[np.ndarray | None] = [None] * len(rows)
        for position, token_ids in zip(population, population_ids, strict=True):
            own[position] = token_ids
        values[TOKEN_FREQUENCIES] = smoothed_frequencies(counts, tokens["token_id"], own)
    if passes.lowercase:
        lowered = [text.lower() for text in texts]
        if all(np.array_equal(a, b) for a, b in zip(token_ids_of(tokenizer, lowered), token_ids_of(tokenizer, texts),
                                                    strict=True)):
            missing[LOWERCASE_LOSS] = "the target's tokenizer lowercases every text, so lowercasing changes nothing"
        else:
            values[LOWERCASE_LOSS] = target_losses(ids, lowered, "target, lowercased")
    if spec.model_kind == "clm" and passes.recall_prefix and len(population) > passes.recall_prefix:
        values[PREFIXED_LOG_PROBS] = prefixed_log_probs(audit, settings, rows, population, "a non-member prefix")
        known_members = np.flatnonzero(rows["role"].to_numpy() == CALIBRATION_MEMBER)
        if len(known_members) > passes.recall_prefix:
            values[MEMBER_PREFIXED_LOG_PROBS] = prefixed_log_probs(audit, settings, rows, known_members,
                                                                   "a member prefix")
    if spec.model_kind == "clm" and passes.camia:
        from lmaudit.attacks.camia import REPEATS

        repeated = [" ".join([text] * REPEATS) for text in texts]
        stored_repeats = model_signal(audit.target, ids, repeated, settings, audit.scoring, "target, repeated texts")
        values[REPEATED_LOG_PROBS] = unpack_token_values(stored_repeats["value"].to_numpy())["log_prob"]
    if passes.neighbour_model:
        neighbours = neighbour_texts_of(audit, ids, texts)
        flat = [text for per_sample in neighbours for text in per_sample]
        losses = target_losses([i for i in ids for _ in range(passes.neighbours)], flat, "target, neighbours")
        values[NEIGHBOUR_LOSSES] = losses.reshape(len(ids), passes.neighbours)
        if spec.model_kind == "clm" and passes.self_prompt_reference is not None:
            values |= self_prompt_losses(audit, loss_settings, ids, texts, flat)
    return values, {value: reason for value, reason in (missing | unserved).items() if value not in values}


def served_gaps(audit: ResolvedAudit, tokens: dict[str, np.ndarray]) -> dict[str, str]:
    """The per-token values a served target does not give (all NaN where a token was scored), each with its reason."""
    if audit.target.served is None:
        return {}
    where = f"the target is served ({audit.target.served})"
    scored = ~np.isnan(tokens["token_id"])
    gaps = {}
    if np.isnan(tokens["mean"][scored]).all():
        reason = f"{where}, which gives its tokens' log-probabilities, not the whole next-token distribution"
        gaps |= {TOKEN_MEANS: reason, TOKEN_STDS: reason}
    if np.isnan(tokens["top1_id"][scored]).all():
        reason = f"{where}, whose answers do not name the most likely token's id"
        gaps |= {TOKEN_TOP1_IDS: reason, TOKEN_IS_TOP1: reason}
    return gaps


def self_prompt_losses(audit: ResolvedAudit, settings: SignalSettings, ids: list[str], texts: list[str],
                       neighbours: list[str]) -> dict[str, np.ndarray]:
    """SPV-MIA's passes: the self-prompt reference's mean NLL (nats per token) of each text and of its neighbours (the
    flat list, --neighbours per text in order)."""
    from lmaudit.signals.compute import model_signal

    reference, per_text = audit.tokens.self_prompt_reference, audit.tokens.neighbours
    own = model_signal(reference, ids, texts, settings, audit.scoring, "self-prompt reference")["value"]
    perturbed = model_signal(reference, [i for i in ids for _ in range(per_text)], neighbours, settings, audit.scoring,
                             "self-prompt reference, neighbours")["value"]
    return {SELF_PROMPT_LOSS: own.to_numpy(dtype=float),
            SELF_PROMPT_NEIGHBOUR_LOSSES: perturbed.to_numpy(dtype=float).reshape(len(ids), per_text)}


def prefixed_log_probs(audit: ResolvedAudit, settings: SignalSettings, rows: pd.DataFrame, pool: np.ndarray,
                       label: str) -> np.ndarray:
    """ReCaLL's pass: the target's per-token log-probabilities of every row after a prefix of --recall-prefix samples
    drawn (seeded) from the rows at `pool` (population samples: a non-member prefix; calibration members: Con-ReCall's
    member prefix), NaN for the prefix's own samples (a sample scored after itself says nothing)."""
    from lmaudit.signals.compute import model_signal
    from lmaudit.signals.variants import prefix_samples, prefix_text

    texts = rows["text"].tolist()
    in_prefix = pool[prefix_samples(pool.tolist(), audit.tokens.recall_prefix, audit.evaluation.seed)]
    prefix = prefix_text([texts[i] for i in in_prefix])
    prefixed = model_signal(audit.target, rows["sample_id"].tolist(), texts, settings, audit.scoring,
                            f"target, after {label}", prefix=prefix)
    log_probs = unpack_token_values(prefixed["value"].to_numpy())["log_prob"]
    log_probs[in_prefix] = np.nan
    return log_probs


def neighbour_texts_of(audit: ResolvedAudit, ids: list[str], texts: list[str]) -> list[list[str]]:
    """The neighbours of each text, words replaced by the audit's neighbour model (a masked or causal LM)."""
    from lmaudit.models.load import load_model
    from lmaudit.signals.neighbours import neighbour_texts

    proposer = load_model(audit.tokens.neighbour_model, audit.tokens.neighbour_family, audit.placement)
    return neighbour_texts(proposer.model, proposer.tokenizer, texts, ids, audit.tokens.neighbours,
                           audit.tokens.neighbour_words, audit.signal.seed, progress=audit.scoring.progress)


def sampled_overlaps(audit: ResolvedAudit, rows: pd.DataFrame) -> np.ndarray:
    """SaMIA's pass (signals/samia.py) through the signal store: per row, the ROUGE-1 recall of each of --samia sampled
    continuations of its first half; (n, draws), NaN rows for texts too short to halve."""
    from lmaudit.models.fingerprints import weights_fingerprint
    from lmaudit.signals.samia import SAMPLING, SamiaJob
    from lmaudit.signals.store import open_store, stored_signals

    texts = rows["text"].tolist()
    store = open_store(audit.scoring.cache_dir, weights_fingerprint(audit.target, audit.placement),
                       SignalSettings(signal="samia", seed=audit.signal.seed))
    asked = f"\x00samia draws={audit.tokens.samia} {sorted(SAMPLING.items())}"
    [frame] = stored_signals([store], rows["sample_id"].tolist(), texts,
                             SamiaJob(audit.target, audit.placement, audit.tokens.samia, audit.signal.seed),
                             audit.scoring.chunk_size, "SaMIA generations", audit.scoring.progress,
                             keys=[text + asked for text in texts], backend=audit.scoring.backend)
    return np.stack(frame["value"].to_numpy())


def reference_kl_values(audit: ResolvedAudit, rows: pd.DataFrame, values: dict[str, np.ndarray], missing: dict[str, str],
                        model_kind: str) -> dict[str, np.ndarray]:
    """REFERENCE_KL from the joint pass of the target and the first reference (signals/reference_kl.py), where
    --reference-kl asks for it and `values` hold the reference's log-probabilities of the target's very tokens, padded
    as the target's per-token values; else nothing, and the reason in `missing`."""
    from lmaudit.models.tokenizer import load_tokenizer
    from lmaudit.signals.reference_kl import configured_vocabulary, reference_kl_signal, shared_vocabulary

    if model_kind != "clm":
        missing[REFERENCE_KL] = "compares two causal LMs' next-token distributions; a masked LM predicts none"
        return {}
    if not audit.tokens.reference_kl:
        missing[REFERENCE_KL] = "not asked for: give --reference-kl (one more pass, of the target and the first reference together)"
        return {}
    if REFERENCE_TOKEN_LOG_PROBS not in values:
        missing[REFERENCE_KL] = missing.get(REFERENCE_TOKEN_LOG_PROBS, "the first reference did not score the target's tokens")
        return {}
    reference = next(iter(audit.references.values()))
    widths = [configured_vocabulary(source) for source in (audit.target, reference)]
    if None in widths:
        missing[REFERENCE_KL] = "a config.json gives no vocab_size, so the two models' logits cannot be matched"
        return {}
    tokens = len(load_tokenizer(audit.target, audit.placement.trust_remote_code))
    vocabulary = shared_vocabulary(*widths, tokens)
    if vocabulary is None:
        missing[REFERENCE_KL] = (f"the reference's vocabulary differs from the target's ({widths[1]} logits against "
                                 f"{widths[0]}; the tokenizer has {tokens} tokens)")
        return {}
    frame = reference_kl_signal(audit.target, reference, rows["sample_id"].tolist(), rows["text"].tolist(), audit.signal,
                                audit.scoring, vocabulary)
    target = values[TOKEN_LOG_PROBS]
    if [len(per_token) for per_token in frame["value"]] != np.sum(~np.isnan(target), axis=1).tolist():
        # never seen: both passes encode the texts alike
        missing[REFERENCE_KL] = "the KL pass scored other positions than the target's per-token pass"
        return {}
    kl = np.full(target.shape, np.nan)
    for row, per_token in enumerate(frame["value"]):
        kl[row, : len(per_token)] = per_token
    return {REFERENCE_KL: kl}
