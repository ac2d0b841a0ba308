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

from dataclasses import asdict, fields

import numpy as np
import pandas as pd

from lmaudit.audit.corpus import load_audit_corpus
from lmaudit.audit.records import ResolvedAudit, resolve
from lmaudit.config import AuditConfig
from lmaudit.data.roles import AUDITED_ROLES, MEMBER, NONMEMBER_SET
from lmaudit.errors import InputError
from lmaudit.locks import output_lock
from lmaudit.metrics.clusters import frame_clusters
from lmaudit.metrics.extraction import SuffixMatch, extraction_summary, suffix_matches
from lmaudit.metrics.slices import members_against_each_set
from lmaudit.models.source import ModelSource
from lmaudit.report.build import environment_info
from lmaudit.report.documents import refuse_another_run, write_document
from lmaudit.signals.sampling import ExtractionSettings
from lmaudit.strict_json import json_ready

RESULT_FILE, TABLE_FILE = "extraction.json", "extraction.parquet"
MATCH_FIELDS = tuple(field.name for field in fields(SuffixMatch))  # columns of the per-sample table
RULES = ("greedy exact: every suffix token reproduced (a generation that ends early fails); approximate: token edit "
         "similarity >= 0.75; probabilistic: (n, p)-extractable when 1 - (1 - p_z)^n >= p; per-sample intervals: "
         "Clopper-Pearson on Korn-Graubard effective counts over patients (a sample without a patient is its own), "
         "per-patient intervals exact")


def checked_generator(source: ModelSource, family: str | None) -> None:
    """A one-line refusal unless `source`, of `family` (as resolve read it), is a causal LM: extraction continues texts."""
    if family is None:
        raise InputError(f"{source.folder}: extraction continues texts, so it needs a causal LM; its config.json names "
                         "an architecture of no family lmaudit knows")
    if family != "clm":
        raise InputError(f"{source.folder}: extraction continues texts, so it needs a causal LM, not a "
                         f"{'masked LM' if family == 'mlm' else family} (for a masked LM, `lmaudit reconstruct` ranks "
                         "sensitive fields among candidates)")


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
        # groups wherever any sample has one: a sample without a group id is a group of its own
        clusters = frame_clusters(part, "sample_id") if part["group_id"].notna().any() else None
        sets[name] = {
            "n_member": int((part["role"] == MEMBER).sum()), "n_nonmember": int((part["role"] != MEMBER).sum()),
            **extraction_summary(matches, log_p[rows], schemes, (part["role"] == MEMBER).to_numpy(), clusters)}
    return sets


def extraction_section(audit: ResolvedAudit, corpus: pd.DataFrame, settings: ExtractionSettings) -> tuple[dict, pd.DataFrame]:
    """The extraction results of the audit's target on the members and non-members of `corpus`, every prefix length of
    `settings` (passes read from the signal store, or computed there and kept): the document (counts, rates, curves;
    no text) and the per-sample table (ids, role, matches, log p_z; token ids in prefix, suffix, generated)."""
    from lmaudit.models.fingerprints import weights_fingerprint
    from lmaudit.models.text import model_max_length, text_ids
    from lmaudit.signals.compute import loaded_models
    from lmaudit.signals.extraction import ExtractionJob, unpack_extraction
    from lmaudit.signals.settings import SignalSettings
    from lmaudit.signals.store import open_store, stored_signals

    checked_generator(audit.target, audit.target_family)
    [loaded] = loaded_models((audit.target,), "clm", audit.placement)
    limit = model_max_length(loaded.model.config, loaded.tokenizer)
    if max(settings.prefix_tokens) + settings.suffix_tokens > limit:
        raise InputError(f"a {max(settings.prefix_tokens)}-token prefix and a {settings.suffix_tokens}-token suffix need "
                         f"{max(settings.prefix_tokens) + settings.suffix_tokens} positions; {audit.target.folder} takes "
                         f"{limit}: ask for shorter ones (--prefix-tokens, --suffix-tokens)")
    store = open_store(audit.scoring.cache_dir, weights_fingerprint(audit.target, audit.placement),
                       SignalSettings(signal="extraction"))
    texts = corpus["text"].tolist()
    ids = text_ids(loaded.tokenizer, texts)
    schemes = settings.sampling_schemes()
    lengths, tables = {}, []
    for prefix in settings.prefix_tokens:
        long_enough, prefixes, suffixes = split_tokens(ids, prefix, settings.suffix_tokens)
        lengths[prefix] = {"used": int(long_enough.sum()), "too_short": int((~long_enough).sum())}
        if not long_enough.any():
            continue
        chosen = np.flatnonzero(long_enough)
        asked = f"\x00extraction prefix={prefix} suffix={settings.suffix_tokens} schemes={'|'.join(settings.schemes)}"
        [frame] = stored_signals([store], corpus["sample_id"].iloc[chosen].tolist(), [texts[i] for i in chosen],
                                 ExtractionJob(audit.target, audit.placement, settings, prefix), audit.scoring.chunk_size,
                                 f"extraction, prefix {prefix}", audit.scoring.progress,
                                 keys=[texts[i] + asked for i in chosen], backend=audit.scoring.backend)
        generated, log_p = zip(*(unpack_extraction(value, settings.suffix_tokens) for value in frame["value"]), strict=True)
        log_p = np.stack(log_p) if schemes else np.empty((len(chosen), 0))
        matches = asdict(suffix_matches(generated, suffixes))
        table = corpus.iloc[chosen][["sample_id", "role", "group_id", NONMEMBER_SET]].assign(
            prefix_tokens=prefix, prefix=prefixes, suffix=suffixes, generated=list(generated), **matches)
        lengths[prefix]["sets"] = per_set_summaries(table, log_p, schemes)
        tables.append(table.assign(**{f"log_p[{scheme.name}]": log_p[:, i] for i, scheme in enumerate(schemes)}))
    document = json_ready({"suffix_tokens": settings.suffix_tokens, "schemes": [scheme.name for scheme in schemes],
                           "prefix_lengths": lengths, "rules": RULES})
    return document, pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def extract(config: AuditConfig, progress: bool = False, overwrite: bool = False) -> dict:
    """Run the extraction audit of `config`'s target (its `extraction` settings) on its members and non-members, write
    extraction.json and extraction.parquet into its output folder (one holding another run's results only with
    `overwrite`), and return extraction.json's document."""
    corpus = load_audit_corpus(config.role_files(), names=config.columns)
    corpus = corpus[corpus["role"].isin(AUDITED_ROLES)].reset_index(drop=True)
    with output_lock(config.out):
        audit = resolve(config, progress)
        refuse_another_run(audit.out, audit.given, overwrite, RESULT_FILE)
        section, table = extraction_section(audit, corpus, audit.extraction or ExtractionSettings())
        document = {"target": config.target, **section, "config": audit.given,
                    "environment": environment_info(audit.placement.device)}
        if len(table):
            if audit.include_text:
                tokenizer = loaded_tokenizer(audit)
                for column in ("prefix", "suffix", "generated"):
                    table[f"{column}_text"] = tokenizer.batch_decode(table[column].tolist())
            else:
                table = table.drop(columns=["prefix", "suffix", "generated"])
        return write_document(config.out, RESULT_FILE, document, table=(TABLE_FILE, table))


def loaded_tokenizer(audit: ResolvedAudit):
    """The target's tokenizer (its model already loaded by the extraction pass)."""
    from lmaudit.signals.compute import loaded_models

    return loaded_models((audit.target,), "clm", audit.placement)[0].tokenizer
