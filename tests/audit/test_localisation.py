"""Localisation's alignment (audit/localisation.py): the stored per-token ids of a causal LM (every token after the
first, as signals/causal.py scores them) and of a masked LM (the content tokens) mapped onto the characters they cover,
truncated texts included; a text whose stored ids are shifted by one is left out, never misaligned."""

import numpy as np

from lmaudit.attacks.base import TOKEN_IDS
from lmaudit.audit.localisation import aligned_offsets
from lmaudit.signals.base import encode

TEXTS = ["Mr Smith took aspirin 12.5 mg, for 9 days.", "No fever. Seen by Dr Jones on 3 May."]


def stored_ids(rows: list[np.ndarray]) -> np.ndarray:
    """Token ids NaN-padded as the store unpacks them (signals/base.py:unpack_token_values)."""
    table = np.full((len(rows), max(map(len, rows))), np.nan)
    for index, row in enumerate(rows):
        table[index, : len(row)] = row
    return table


def test_causal_and_masked_token_ids_map_onto_their_characters(tiny_tokenizer):
    samples = encode(tiny_tokenizer, TEXTS, ["a", "b"], 64)
    for kind, rows in (("clm", [s.input_ids[1:] for s in samples]),
                       ("mlm", [s.input_ids[s.content_positions] for s in samples])):
        spans = aligned_offsets(tiny_tokenizer, TEXTS, stored_ids(rows), kind)
        for text, row, row_spans in zip(TEXTS, rows, spans, strict=True):
            assert len(row_spans) == len(row)
            pieces = [text[start:end].lower() for start, end in row_spans]
            tokens = [token.removeprefix("##") for token in tiny_tokenizer.convert_ids_to_tokens(row.tolist())]
            # every content token is the characters it covers (lowercased, as the tokenizer normalises); specials none
            assert [p for p, t in zip(pieces, tokens, strict=True) if t not in ("[SEP]", "[CLS]")] == [
                t for t in tokens if t not in ("[SEP]", "[CLS]")]
            assert all(piece == "" for piece, t in zip(pieces, tokens, strict=True) if t in ("[SEP]", "[CLS]"))


def test_truncated_texts_align_and_shifted_ids_are_left_out(tiny_tokenizer):
    samples = encode(tiny_tokenizer, TEXTS, ["a", "b"], 8)  # truncated to 8 tokens, as a length limit would
    rows = [samples[0].input_ids[1:], samples[1].input_ids[:-1]]  # the second shifted by one: the first token kept
    spans = aligned_offsets(tiny_tokenizer, TEXTS, stored_ids(rows), "clm")
    assert spans[1] is None
    # the last stored token of a truncated text is the [SEP] the truncation appends: it covers no character
    assert [TEXTS[0][start:end] for start, end in spans[0]] == ["M", "r", "S", "m", "i", "t", ""]
    masked = aligned_offsets(tiny_tokenizer, TEXTS, stored_ids([s.input_ids[s.content_positions] for s in samples]), "mlm")
    assert [TEXTS[0][start:end] for start, end in masked[0]] == ["M", "r", "S", "m", "i", "t"]


def test_a_masked_lm_without_reference_is_localised_by_the_calibrated_score(tiny_model_dirs, tiny_tokenizer, notes):
    """The token signal of a masked LM (content tokens, no reference): Min-K%++'s calibrated score, every text aligned,
    members against the population; an audit with no per-token values gets the reason in one line."""
    from types import SimpleNamespace

    import pandas as pd

    from lmaudit.attacks.base import TOKEN_LOG_PROBS, TOKEN_MEANS, TOKEN_STDS, AttackInput
    from lmaudit.audit.localisation import localisation_section
    from lmaudit.audit.records import ScoredSamples
    from lmaudit.metrics.settings import EvaluationSettings

    corpus = notes.groupby("group_id").head(2).head(12).reset_index(drop=True)
    corpus["role"] = np.where(corpus.index < 6, "member", "population")
    samples = encode(tiny_tokenizer, corpus["text"].tolist(), corpus["sample_id"].tolist(), 64)
    ids = stored_ids([s.input_ids[s.content_positions] for s in samples])
    rng = np.random.default_rng(0)
    values = {TOKEN_IDS: ids, TOKEN_LOG_PROBS: np.where(np.isnan(ids), np.nan, rng.normal(-3, 1, ids.shape)),
              TOKEN_MEANS: np.full(ids.shape, -3.0), TOKEN_STDS: np.full(ids.shape, 2.0)}
    data = AttackInput("mlm_tokens", corpus[["sample_id", "role", "group_id"]], values)
    audit = SimpleNamespace(target=tiny_model_dirs[0], placement=SimpleNamespace(trust_remote_code=False),
                            evaluation=EvaluationSettings(bootstrap=20, permutations=100), include_text=False)
    section, shown = localisation_section(audit, ScoredSamples(data.samples, [data]), corpus, [r"dose=\d+ mg"])
    assert section["statistic"] == "calibrated" and section["compared_with"] == "population" and shown is None
    assert section["texts"] == {"member": 6, "comparison": 6, "misaligned": 0} and section["unclassified_tokens"] == 0
    total = int(np.sum(~np.isnan(ids)))
    assert sum(c["member_tokens"] + c["comparison_tokens"] for c in section["classes"]) == total
    plain = AttackInput("mlm_energy", data.samples, {})
    section, shown = localisation_section(audit, ScoredSamples(data.samples, [plain]), pd.DataFrame(), [])
    assert section["unavailable"].startswith("no per-token values to localise") and shown is None
