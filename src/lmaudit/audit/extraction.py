"""`lmaudit extract`: does the model give the text back? For a causal LM, each member's and non-member's text is split
into its first k tokens (the prefix, counted from the start token the model was trained with) and the next L (the
suffix); greedy decoding from the prefix is compared with the
suffix (discoverable memorisation: exact, common prefix, approximate), and one teacher-forced pass gives, per sampling
scheme, the probability p_z that one query reproduces the suffix (probabilistic extraction). Members against each
non-member set, per sample and per patient, for every prefix length asked; metrics/extraction.py has the maths.

Writes extraction.json (counts, rates and curves: no text) and extraction.parquet (one row per sample and prefix
length: ids, role, matches, log p_z; the prefix, generated and true suffix texts only with `include_text`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.atomic import write_json_and_table
from lmaudit.audit.corpus import load_audit_corpus
from lmaudit.config import AuditConfig
from lmaudit.data.roles import AUDITED_ROLES, MEMBER, NONMEMBER_SET
from lmaudit.errors import InputError
from lmaudit.locks import output_lock
from lmaudit.metrics.extraction import SuffixMatch, extraction_summary, suffix_matches
from lmaudit.metrics.slices import members_against_each_set
from lmaudit.report.build import environment_info, json_ready
from lmaudit.signals.sampling import SamplingScheme

RESULT_FILE, TABLE_FILE = "extraction.json", "extraction.parquet"
MATCH_FIELDS = tuple(field.name for field in fields(SuffixMatch))  # columns of the per-sample table


@dataclass(frozen=True)
class ExtractionSettings:
    """What an extraction audit asks: prefix lengths and the suffix length (tokens), the sampling schemes, the batch
    size of generation, and whether the per-sample table may hold texts."""

    prefix_tokens: tuple[int, ...] = (32,)
    suffix_tokens: int = 32
    schemes: tuple[SamplingScheme, ...] = (SamplingScheme(temperature=1.0, top_k=40),)
    batch_size: int = 32
    include_text: bool = False

    def __post_init__(self) -> None:
        if self.suffix_tokens < 1 or any(k < 1 for k in self.prefix_tokens) or not self.prefix_tokens:
            raise InputError("extraction needs a suffix of at least one token and prefixes of at least one token")


def load_generator(target: str):
    """The target as a causal LM with its tokenizer, or a one-line refusal for any other model."""
    from lmaudit.models.load import load_causal_lm

    try:
        return load_causal_lm(target)
    except InputError as error:
        raise InputError(f"{error}; extraction continues texts, so it needs a causal LM (for a masked LM, "
                         "`lmaudit reconstruct` ranks sensitive fields among candidates)") from None


def text_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """Each text's token ids as the model saw them in training (its start token included), less any end tokens: a
    suffix is text, not the end of it."""
    encoded = tokenizer(texts, return_special_tokens_mask=True)
    ids = []
    for row, special in zip(encoded["input_ids"], encoded["special_tokens_mask"], strict=True):
        end = len(row)
        while end > 0 and special[end - 1]:
            end -= 1
        ids.append(list(row[:end]))
    return ids


def split_tokens(ids: list[list[int]], prefix: int, suffix: int) -> tuple[np.ndarray, list, list]:
    """Which texts are long enough for a prefix of `prefix` tokens and a suffix of `suffix`, and their prefixes and
    suffixes (token ids)."""
    long_enough = np.array([len(row) >= prefix + suffix for row in ids], bool)
    chosen = [row for row, keep in zip(ids, long_enough, strict=True) if keep]
    return long_enough, [row[:prefix] for row in chosen], [row[prefix:prefix + suffix] for row in chosen]


def per_set_summaries(table: pd.DataFrame, log_p: np.ndarray, schemes) -> dict:
    """extraction_summary of the members against each non-member set (the rows of one prefix length, with the
    columns of their SuffixMatch)."""
    sets = {}
    for name, rows in members_against_each_set(table):
        part = table[rows]
        matches = SuffixMatch(*(part[field].to_numpy() for field in MATCH_FIELDS))
        groups = part["group_id"].to_numpy() if part["group_id"].notna().all() else None
        sets[name] = {
            "n_member": int((part["role"] == MEMBER).sum()), "n_nonmember": int((part["role"] != MEMBER).sum()),
            **extraction_summary(matches, log_p[rows], schemes, (part["role"] == MEMBER).to_numpy(), groups)}
    return sets


def extract(config: AuditConfig, settings: ExtractionSettings) -> dict:
    """Run the extraction audit of `config`'s target on its members and non-members, write extraction.json and
    extraction.parquet into its output folder, and return extraction.json's document."""
    from lmaudit.models.generation import greedy_continuations
    from lmaudit.signals.extraction import suffix_log_probabilities

    corpus = load_audit_corpus(config.role_files())
    corpus = corpus[corpus["role"].isin(AUDITED_ROLES)].reset_index(drop=True)
    with output_lock(config.out):
        loaded = load_generator(config.target)
        tokenizer, model = loaded.tokenizer, loaded.model
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        ids = text_ids(tokenizer, corpus["text"].tolist())
        lengths, tables = {}, []
        for prefix in settings.prefix_tokens:
            long_enough, prefixes, suffixes = split_tokens(ids, prefix, settings.suffix_tokens)
            lengths[prefix] = {"used": int(long_enough.sum()), "too_short": int((~long_enough).sum())}
            if not long_enough.any():
                continue
            generated = greedy_continuations(model, prefixes, settings.suffix_tokens, pad, tokenizer.eos_token_id,
                                             settings.batch_size)
            log_p = suffix_log_probabilities(model, prefixes, suffixes, settings.schemes, pad, settings.batch_size)
            matches = asdict(suffix_matches(generated, suffixes))
            table = corpus.loc[long_enough, ["sample_id", "role", "group_id", NONMEMBER_SET]].assign(
                prefix_tokens=prefix, prefix=prefixes, suffix=suffixes, generated=generated, **matches)
            lengths[prefix]["sets"] = per_set_summaries(table, log_p, settings.schemes)
            tables.append(table.assign(**{f"log_p[{scheme.name}]": log_p[:, i]
                                          for i, scheme in enumerate(settings.schemes)}))
        document = json_ready({
            "target": config.target, "suffix_tokens": settings.suffix_tokens,
            "schemes": [scheme.name for scheme in settings.schemes], "prefix_lengths": lengths,
            "rules": "greedy exact: every suffix token reproduced (a generation that ends early fails); approximate: "
                     "token edit similarity >= 0.75; probabilistic: (n, p)-extractable when 1 - (1 - p_z)^n >= p",
            "environment": environment_info(str(next(model.parameters()).device))})
        write_outputs(Path(config.out), document, tables, tokenizer, settings.include_text)
    return document


def write_outputs(out: Path, document: dict, tables: list[pd.DataFrame], tokenizer, include_text: bool) -> None:
    """extraction.json and extraction.parquet, both or neither; token ids and texts only with `include_text`."""
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    if len(table):
        if include_text:
            for column in ("prefix", "suffix", "generated"):
                table[f"{column}_text"] = tokenizer.batch_decode(table[column].tolist())
        table = table.drop(columns=[] if include_text else ["prefix", "suffix", "generated"])
    write_json_and_table(out, RESULT_FILE, document, TABLE_FILE, table)
