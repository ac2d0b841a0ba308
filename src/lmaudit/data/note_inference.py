"""A downstream task on generated notes, the analogue of MedNLI (Romanov and Shivade 2018), with which Jagannatha et al.
measure the utility of their DP language models (Tables 4-5): does a statement follow from a note (entailment),
contradict it, or neither (neutral)?

As in MedNLI, each premise gets one hypothesis of each label. The premise is a note that reports a lab or vital value
or a drug's dose; the hypotheses all read "NAME was VALUE.": entailment names a value the note reports, contradiction
the same name with another value seen for it elsewhere, neutral a name the note does not report (drawn as often as
names are reported) with a value seen for that name. The three have the same form and values from the same pools, so the hypothesis alone does not give the label
away: telling them apart needs the premise.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from lmaudit.data.synth import DIAGNOSES

LABELS = ("entailment", "contradiction", "neutral")
_MEASURES = ("Na", "K", "Cl", "HCO3", "BUN", "Cr", "Glu", "WBC", "Hgb", "Plt", "INR", "Lactate", "HR", "RR", "BNP",
             "troponin", "TSH", "HbA1c")
_DRUGS = sorted({drug for _, _, drug in DIAGNOSES}, key=len, reverse=True)  # longest first: no drug cut short
_FACT = re.compile(
    r"\b(?P<measure>" + "|".join(_MEASURES) + r") (?P<value>\d+(?:\.\d+)?%?)(?![\w.]*\d)"
    r"|\b(?P<drug>" + "|".join(map(re.escape, _DRUGS)) + r") (?P<dose>\d+(?:\.\d+)? mg (?:PO|IV|SC|IM))")
SEPARATOR = " [SEP] "  # between hypothesis and premise; the hypothesis first, so that truncation keeps it


def note_facts(text: str) -> dict[str, str]:
    """The (name, value) facts a note reports: lab and vital values, and drug doses with their route; a name given twice
    keeps its first value."""
    facts: dict[str, str] = {}
    for match in _FACT.finditer(text):
        name = match["measure"] or match["drug"]
        facts.setdefault(name, match["value"] or match["dose"])
    return facts


def note_inference_pairs(notes: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Three pairs (one per label) for each note of `notes` (columns text, group_id) that reports a fact: columns text
    (hypothesis, SEPARATOR, premise), label, group_id (the note's patient). Seeded: the fact and the other values drawn."""
    rng = np.random.default_rng(seed)
    facts = [note_facts(text) for text in notes["text"]]
    seen: dict[str, list[str]] = {}
    for reported in facts:
        for name, value in reported.items():
            seen.setdefault(name, []).append(value)
    pools = {name: sorted(set(values)) for name, values in seen.items()}
    names = sorted(pools)
    rows = []
    for text, group, reported in zip(notes["text"], notes["group_id"], facts, strict=True):
        name = sorted(reported)[rng.integers(len(reported))] if reported else None
        others = [value for value in pools.get(name, ()) if value != reported.get(name)]
        absent = [other for other in names if other not in reported]
        if name is None or not others or not absent:
            continue
        # As often as each name is reported, like the entailed names: a rare name is no sign of neutral.
        weights = np.array([len(seen[other]) for other in absent], dtype=float)
        neutral_name = absent[rng.choice(len(absent), p=weights / weights.sum())]
        hypotheses = {"entailment": (name, reported[name]), "contradiction": (name, others[rng.integers(len(others))]),
                      "neutral": (neutral_name, pools[neutral_name][rng.integers(len(pools[neutral_name]))])}
        rows += [{"text": f"{claim} was {value}.{SEPARATOR}{text}", "label": label, "group_id": group}
                 for label, (claim, value) in hypotheses.items()]
    return pd.DataFrame(rows, columns=["text", "label", "group_id"])
