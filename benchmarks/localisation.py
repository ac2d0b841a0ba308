"""Localisation in the name-insertion setting: does it point at the names the model restores?

Notes generated with the patient's name opening each (as benchmarks/name_reconstruction.py), split by patient as the
demos split them; a causal target trained on the members' named notes and a causal reference on the reference
patients' named notes (the demos' recipe, the target on the reference's tokenizer); `lmaudit audit` with `--field name=...` and the token-level InfoRMIA
statistic (`--reference-kl`), and `lmaudit reconstruct` of the name. Then, per member note: is a token of its name
among its top spans (the localisation's spans: the runs of its highest-scoring tenth of tokens, at most 3), and where
does the name's best token rank among the note's scored tokens; for the notes whose name the causal LM restores first
against those it does not. The first token of a causal LM's text is never scored, so the name is seen through the
tokens after its first. Prints the tables (for docs/results.md).

    python benchmarks/localisation.py [--size quick] [--seed 0] [--out runs/localisation]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from markdown_section import machine_line, markdown_table

from lmaudit.audit.corpus import load_audit_corpus
from lmaudit.audit.language_model import language_model_signals
from lmaudit.audit.localisation import aligned_offsets, localisation_section, token_input
from lmaudit.audit.reconstruction import TABLE_FILE, ReconstructionSettings, reconstruct
from lmaudit.audit.records import resolve
from lmaudit.audit.run import audit
from lmaudit.config import AuditConfig
from lmaudit.data.fields import FieldRule
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER, NONMEMBER, POPULATION
from lmaudit.data.synth import generate_notes
from lmaudit.metrics.clusters import frame_clusters
from lmaudit.metrics.localisation import token_scores, top_spans
from lmaudit.metrics.uncertainty import rate_interval
from lmaudit.models.tokenizer import load_tokenizer
from lmaudit.studies.setup import (
    DEMO_SIZES,
    DEMO_SPLIT,
    REFERENCE_TRAIN,
    demo_recipe,
    split_and_write_roles,
    train_language_model_unless_done,
)

NAME = r"^(\w+ \w+) "


def name_tokens(spans: np.ndarray, name_end: int) -> np.ndarray:
    """Indices of the stored tokens whose character span overlaps the name (characters [0, name_end))."""
    return np.flatnonzero((spans[:, 0] < name_end) & (spans[:, 1] > 0) & (spans[:, 1] > spans[:, 0]))


def note_rows(config: AuditConfig, names: pd.Series) -> tuple[pd.DataFrame, str]:
    """Per aligned member note: whether a name token is among its top spans, and the best name token's rank among
    its scored tokens (1 = its most member-like token) and the count of those tokens; and what the audit's
    localisation costs on the stored values (its tokenization, classes, statistics and permutations; no model pass)."""
    corpus = load_audit_corpus(config.role_files(), config.evaluation.slice_by, config.columns)
    resolved = resolve(config)
    scored = language_model_signals(resolved, corpus)  # read back from the audit's store
    started = time.perf_counter()
    localisation_section(resolved, scored, corpus, config.fields)
    seconds = time.perf_counter() - started
    compared = int(corpus["role"].isin([MEMBER, POPULATION]).sum())
    cost = f"localisation: {seconds:.2f} s for {compared} texts ({seconds / compared * 1000:.2f} s per 1,000)"
    data = token_input(scored.inputs)
    statistic, scores = token_scores(data.values)
    samples = data.samples.reset_index(drop=True)
    members = np.flatnonzero(samples["role"].to_numpy() == MEMBER)
    texts = corpus.set_index("sample_id").loc[samples["sample_id"].iloc[members], "text"].tolist()
    tokenizer = load_tokenizer(resolved.target)
    spans = aligned_offsets(tokenizer, texts, data.values["token_ids"][members], "clm")
    rows = []
    for row, text_spans in zip(members, spans, strict=True):
        if text_spans is None:
            continue
        sample_id = samples["sample_id"].iloc[row]
        own = name_tokens(text_spans, len(names[sample_id]))
        row_scores = scores[row, : len(text_spans)]
        scored = np.flatnonzero(~np.isnan(row_scores))
        own = np.intersect1d(own, scored)
        if not len(own):
            continue
        in_top = any(first <= token < last for first, last, _ in top_spans(row_scores) for token in own)
        best = row_scores[own].max()
        rows.append({"sample_id": sample_id, "group_id": samples["group_id"].iloc[row], "in_top_spans": in_top,
                     "name_rank": int(np.sum(row_scores[scored] > best)) + 1, "scored_tokens": len(scored),
                     "name_tokens": len(own), "statistic": statistic})
    return pd.DataFrame(rows), cost


def summary(notes: pd.DataFrame, label: str) -> dict:
    """One table row: notes, the share with the name in the top spans (patient-clustered interval), the share whose
    name token is the note's most member-like, the median rank, and the share a random choice of tokens would give."""
    clusters = frame_clusters(notes, "sample_id")
    low, high = rate_interval(notes["in_top_spans"].to_numpy(), clusters)
    top1 = notes["name_rank"] == 1
    top1_low, top1_high = rate_interval(top1.to_numpy(), clusters)
    # the chance that the best of k name tokens is the first of n, were the ranks random: k / n
    chance = float((notes["name_tokens"] / notes["scored_tokens"]).mean())
    return {"member notes": label, "notes (patients)": f"{len(notes)} ({notes['group_id'].nunique()})",
            "name in the top spans": f"{notes['in_top_spans'].mean():.3f} [{low:.3f}, {high:.3f}]",
            "name token ranked first": f"{top1.mean():.3f} [{top1_low:.3f}, {top1_high:.3f}]",
            "ranked first by chance": f"{chance:.3f}",
            "median rank of the name (of median tokens)": f"{notes['name_rank'].median():.0f} "
                                                          f"(of {notes['scored_tokens'].median():.0f})"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="quick", choices=sorted(DEMO_SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/localisation"))
    args = parser.parse_args()
    size = DEMO_SIZES[args.size]
    notes = generate_notes(size.patients, args.seed, insert_names=True)
    files = split_and_write_roles(notes, DEMO_SPLIT, args.seed, args.out / "data")
    # the reference first: the target trains on its tokenizer, so that the two score the very same tokens
    reference = replace(demo_recipe(size.epochs), seed=args.seed + 1)
    target = replace(demo_recipe(size.epochs), seed=args.seed, tokenizer_dir=args.out / "reference")
    for folder, roles, recipe in (("reference", (REFERENCE_TRAIN,), reference),
                                  ("target", (MEMBER, CALIBRATION_MEMBER), target)):
        texts = notes.loc[notes["role"].isin(roles), "text"].tolist()
        train_language_model_unless_done("clm", texts, args.out / folder, recipe, folder)
    config = AuditConfig(target=str(args.out / "target"), reference=[str(args.out / "reference")],
                         members=str(files[MEMBER]), nonmembers=str(files[NONMEMBER]),
                         population=str(files[POPULATION]), out=str(args.out / "audit"),
                         signal={"signal": "clm_tokens", "seed": args.seed}, reference_kl=True,
                         fields=[f"name={NAME}"], figures=False)
    report = audit(config, overwrite=True).report
    reconstruct(config.model_copy(update={"out": str(args.out / "reconstruct")}),
                ReconstructionSettings((FieldRule("name", pattern=NAME),)))
    ranks = pd.read_parquet(args.out / "reconstruct" / TABLE_FILE).set_index("sample_id")["rank"]
    names = notes.set_index("sample_id")["text"].str.extract(NAME)[0]
    held, cost = note_rows(config, names)
    held["restored"] = held["sample_id"].map(ranks) == 1
    table = [summary(held[held["restored"]], "name restored first"),
             summary(held[~held["restored"]], "name not restored first"), summary(held, "all")]
    classes = [{"class": c["name"], "difference [95%]": f"{c['difference']:.3f} [{c['difference_ci'][0]:.3f}, "
                f"{c['difference_ci'][1]:.3f}]", "enrichment": f"{c['enrichment']:.2f}", "p": f"{c['p_value']:.4f}",
                "stands out": c["stands_out"]}
               for c in report["localisation"]["classes"] if c["p_value"] is not None and c["enrichment"] is not None]
    print(f"{machine_line()}\n{cost}\nstatistic: {held['statistic'].iloc[0]}\n\n{markdown_table(table)}\n{markdown_table(classes)}")


if __name__ == "__main__":
    main()
