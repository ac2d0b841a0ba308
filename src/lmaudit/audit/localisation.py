"""Localisation in an audit: the per-token values of a language-model audit mapped onto the characters of each text
(the target's fast tokenizer's offsets, checked token by token against the stored token ids), each token classed
(data/token_classes.py), and the classes compared between members and the comparison texts (metrics/localisation.py).

Stored per-token values are laid out as the scorers write them (attacks/base.py): for a causal LM, the tokens after the
first of the tokenizer's encoding, special tokens included (signals/causal.py scores input_ids[1:]); for a masked LM,
the content tokens, specials left out (signals/mlm.py). A text whose re-encoding differs from its stored ids is left out
and counted, never aligned by guess.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from lmaudit.attacks.base import TOKEN_IDS, TOKEN_SIGNAL_ADVICE, AttackInput
from lmaudit.audit.records import ResolvedAudit, ScoredSamples
from lmaudit.data.fields import FieldRule
from lmaudit.data.roles import MEMBER, NONMEMBER, POPULATION
from lmaudit.data.token_classes import WORD_CLASSES, field_rules, token_classes
from lmaudit.metrics.clusters import cluster_codes
from lmaudit.metrics.localisation import ScoredTokens, localise, token_scores, top_spans
from lmaudit.signals.registry import signal_spec
from lmaudit.strict_json import json_ready

LEAST_PERMUTATIONS = 1999  # p-values resolve 1/2000: below a Bonferroni level of 0.05 over a dozen classes


def token_input(inputs: Sequence[AttackInput]) -> AttackInput | None:
    """The first attack input with per-token values a token statistic can be read from, and their token ids."""
    return next((data for data in inputs if TOKEN_IDS in data.values and token_scores(data.values) is not None), None)


def stored_spans(ids: Sequence[int], offsets: Sequence, special: Sequence[int], stored: np.ndarray,
                 model_kind: str) -> np.ndarray | None:
    """The (k, 2) character spans of the k `stored` ids within one encoding (its ids, offsets, special-token mask), or
    None where the encoding does not hold those very ids at the positions the scorer read."""
    # a causal LM scores every token after the first; a masked LM its content tokens
    positions = (np.arange(1, len(ids)) if model_kind == "clm" else np.flatnonzero(np.asarray(special) == 0))[: len(stored)]
    if len(positions) != len(stored) or not np.array_equal(np.asarray(ids)[positions], stored):
        return None
    return np.asarray(offsets, dtype=np.int64).reshape(-1, 2)[positions]


def aligned_offsets(tokenizer, texts: Sequence[str], token_ids: np.ndarray, model_kind: str) -> list[np.ndarray | None]:
    """Per text, the (k, 2) character spans of its k stored tokens (NaN-padded `token_ids` row), or None where the
    tokenizer's encoding of the text does not give those very ids at the stored positions."""
    from lmaudit.models.text import text_heads

    heads, _ = text_heads(tokenizer, texts, token_ids.shape[1] + 2)  # only the stored tokens' part of each text
    options = {"return_offsets_mapping": True, "return_special_tokens_mask": True}
    encoded = tokenizer(heads, **options)
    spans = []
    for index, row in enumerate(token_ids):
        stored = row[~np.isnan(row)].astype(np.int64)
        fields = [encoded[key][index] for key in ("input_ids", "offset_mapping", "special_tokens_mask")]
        found = stored_spans(*fields, stored, model_kind)
        if found is None:
            # a truncated text ends as the scorer's truncation ended it (with the end token it appends): encode it so
            specials = 1 if model_kind == "clm" else tokenizer.num_special_tokens_to_add()
            again = tokenizer(heads[index], truncation=True, max_length=len(stored) + specials, **options)
            found = stored_spans(again["input_ids"], again["offset_mapping"], again["special_tokens_mask"], stored,
                                 model_kind)
        spans.append(found)
    return spans


def patient_names(samples: pd.DataFrame) -> tuple[np.ndarray, tuple[str, ...]]:
    """(n,) patient codes of `samples` (`cluster_codes`: a sample without a group is its own) and each code's name (its
    group id, or the sample's id)."""
    groups = samples["group_id"].to_numpy() if "group_id" in samples else None
    codes = cluster_codes(samples["sample_id"].to_numpy(), groups)
    names = [""] * (codes.max() + 1 if len(codes) else 0)
    for code, sample, group in zip(codes, samples["sample_id"], groups if groups is not None else [None] * len(codes),
                                   strict=True):
        names[code] = str(group) if group is not None and not pd.isna(group) else str(sample)
    return codes, tuple(names)


def flat_tokens(scores: np.ndarray, spans: Sequence[np.ndarray | None], texts: Sequence[str], rules: Sequence[FieldRule],
                rows: np.ndarray, member: np.ndarray, codes: np.ndarray, names: tuple[str, ...]) -> tuple[ScoredTokens, int]:
    """The classified, scored tokens of the aligned texts among `rows`, flat; and how many scored tokens had no class
    (special tokens)."""
    class_names = (*[rule.kind for rule in rules], *WORD_CLASSES)
    index = {name: position for position, name in enumerate(class_names)}
    parts: list[tuple[np.ndarray, ...]] = []
    unclassified = 0
    for text_number, row in enumerate(rows):
        if spans[row] is None:
            continue
        classes = token_classes(texts[row], [tuple(span) for span in spans[row]], rules)
        row_scores = scores[row, : len(classes)]
        codes_of = np.array([index.get(token_class, -1) for token_class in classes], dtype=np.int64)
        scored = ~np.isnan(row_scores)
        unclassified += int(np.sum(scored & (codes_of < 0)))
        kept = scored & (codes_of >= 0)
        count = int(kept.sum())
        parts.append((row_scores[kept], codes_of[kept], np.full(count, text_number), np.full(count, codes[row]),
                      np.full(count, member[row])))
    dtypes = (float, np.int64, np.int64, np.int64, bool)
    arrays = ([np.concatenate(column).astype(dtype) for column, dtype in zip(zip(*parts, strict=True), dtypes, strict=True)]
              if parts else [np.empty(0, dtype) for dtype in dtypes])
    return ScoredTokens(*arrays, class_names=class_names, patient_names=names), unclassified


def highlighted_texts(scores: np.ndarray, spans: Sequence[np.ndarray | None], texts: Sequence[str],
                      samples: pd.DataFrame, rows: np.ndarray) -> list[dict]:
    """Per aligned member text: its id, text and top spans as character ranges with their highest token score (for
    --include-text only: this is training text)."""
    shown = []
    for row in rows:
        if spans[row] is None:
            continue
        count = len(spans[row])
        characters = []
        for first, last, score in top_spans(scores[row, :count]):
            covered = [span for span in spans[row][first:last] if span[1] > span[0]]  # special tokens cover nothing
            if covered:
                characters.append((int(min(s[0] for s in covered)), int(max(s[1] for s in covered)), score))
        shown.append({"sample_id": str(samples["sample_id"].iloc[row]), "text": texts[row], "spans": characters})
    return shown


def localisation_section(audit: ResolvedAudit, scored: ScoredSamples, corpus: pd.DataFrame,
                         fields: Sequence[str] = ()) -> tuple[dict, list[dict] | None]:
    """report.json's `localisation` section (numbers and class names only; `unavailable` with the reason where it cannot
    be computed) and, with --include-text only, each member text with its top spans."""
    from lmaudit.models.tokenizer import load_tokenizer

    rules = field_rules(fields)
    data = token_input(scored.inputs)
    if data is None:
        return {"unavailable": f"no per-token values to localise ({TOKEN_SIGNAL_ADVICE})"}, None
    statistic, scores = token_scores(data.values)
    samples = data.samples.reset_index(drop=True)
    roles = samples["role"].to_numpy()
    compared = POPULATION if (roles == POPULATION).any() else NONMEMBER
    rows = np.flatnonzero(np.isin(roles, (MEMBER, compared)))
    tokenizer = load_tokenizer(audit.target, audit.placement.trust_remote_code)
    if not getattr(tokenizer, "is_fast", False):
        return {"unavailable": "the target's tokenizer is not a fast tokenizer, so tokens have no character offsets"}, None
    texts = corpus.set_index("sample_id").loc[samples["sample_id"], "text"].tolist()
    spans: list[np.ndarray | None] = [None] * len(samples)
    aligned = aligned_offsets(tokenizer, [texts[row] for row in rows], data.values[TOKEN_IDS][rows],
                              signal_spec(data.signal).model_kind)
    for row, row_spans in zip(rows, aligned, strict=True):
        spans[row] = row_spans
    codes, names = patient_names(samples)
    tokens, unclassified = flat_tokens(scores, spans, texts, rules, rows, roles == MEMBER, codes, names)
    misaligned = sum(row_spans is None for row_spans in aligned)
    if not tokens.member.any() or tokens.member.all():
        return {"unavailable": f"no scored tokens of members and of {compared} texts to compare ({misaligned} texts' "
                               "tokens did not match the stored token ids)"}, None
    result = localise(tokens, max(audit.evaluation.permutations, LEAST_PERMUTATIONS), audit.evaluation.bootstrap,
                      audit.evaluation.seed)
    member_rows = rows[roles[rows] == MEMBER]
    kept = {role: int(sum(spans[row] is not None and roles[row] == role for row in rows)) for role in (MEMBER, compared)}
    section = {"statistic": statistic, "signal": data.signal, "compared_with": compared,
               "texts": {"member": kept[MEMBER], "comparison": kept[compared], "misaligned": int(misaligned)},
               "unclassified_tokens": unclassified, "fields": [rule.kind for rule in rules], **json_ready(result)}
    shown = highlighted_texts(scores, spans, texts, samples, member_rows) if audit.include_text else None
    return section, shown
