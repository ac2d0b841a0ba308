"""A downstream task on generated notes, the analogue of MedNLI (Romanov and Shivade 2018), with which Jagannatha et al.
measure the utility of their DP language models (Tables 4-5): does a statement follow from a note (entailment),
contradict it, or neither (neutral)?

As in MedNLI, each premise gets one hypothesis of each label. The premise is a note that reports a lab or vital value
or a drug's dose; the hypotheses all read "NAME was VALUE.": entailment names a value the note reports, contradiction
the same name with a value seen for it elsewhere and not in this note, neutral a name the note does not report (drawn
as often as names are entailed) with a value seen for that name. The three have the same form and values from the
same pools, so the hypothesis alone does not give the label away: telling them apart needs the premise.
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


def reported_values(text: str) -> dict[str, list[str]]:
    """Every value a note reports for each name: lab and vital values, and drug doses with their route."""
    values: dict[str, list[str]] = {}
    for match in _FACT.finditer(text):
        values.setdefault(match["measure"] or match["drug"], []).append(match["value"] or match["dose"])
    return values


def note_facts(text: str) -> dict[str, str]:
    """The (name, value) facts a note reports, a name given twice with its first value."""
    return {name: values[0] for name, values in reported_values(text).items()}


def note_inference_pairs(notes: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Three pairs (one per label) for each note of `notes` (columns text, group_id) that reports a fact: columns text
    (hypothesis, SEPARATOR, premise), label, group_id (the note's patient). Seeded: the fact and the other values drawn."""
    rng = np.random.default_rng(seed)
    reported = [reported_values(text) for text in notes["text"]]
    pools: dict[str, list[str]] = {}
    for values in reported:
        for name, given in values.items():
            pools.setdefault(name, []).extend(given)
    pools = {name: sorted(set(values)) for name, values in pools.items()}
    # Each note's entailed name: one of its facts, uniformly. A neutral name is drawn from these choices (of all notes),
    # so that neutral hypotheses name what entailed ones name, as often: the name alone is no cue to the label.
    chosen = [sorted(values)[rng.integers(len(values))] if values else None for values in reported]
    named = [name for name in chosen if name is not None]
    rows = []
    for text, group, values, name in zip(notes["text"], notes["group_id"], reported, chosen, strict=True):
        others = [value for value in pools.get(name, ()) if value not in values.get(name, ())]
        absent = [other for other in named if other not in values]
        if name is None or not others or not absent:
            continue
        neutral_name = absent[rng.integers(len(absent))]
        hypotheses = {"entailment": (name, values[name][0]), "contradiction": (name, others[rng.integers(len(others))]),
                      "neutral": (neutral_name, pools[neutral_name][rng.integers(len(pools[neutral_name]))])}
        rows += [{"text": f"{claim} was {value}.{SEPARATOR}{text}", "label": label, "group_id": group}
                 for label, (claim, value) in hypotheses.items()]
    return pd.DataFrame(rows, columns=["text", "label", "group_id"])
