"""Which samples leak (Mireshghallah et al. 2022, Table 7): the demo's target audited once; each member note labelled
exposed when the likelihood ratio calls it a member at the population's 10% FPR threshold; then a logistic regression
from simple features of the note predicts exposure, fitted on the members of half the patients and tested on the other
half. Features: (A) digits, (B) length in tokens, (C) non-alphanumeric characters (spaces aside), (D) the training-set
frequencies of its three rarest tokens."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.data.roles import MEMBER
from lmaudit.report.tables import population_threshold_at, result_of
from lmaudit.studies.notes import TARGET_ROLES, notes_study
from lmaudit.studies.runner import StudyPlan

FEATURE_SETS = {"A digits": ["digits"], "B length": ["length"], "C non-alphanumeric": ["non_alphanumeric"],
                "D 3 rarest tokens": ["rarest_1", "rarest_2", "rarest_3"]}
COMBINED = {"C + D": ("C non-alphanumeric", "D 3 rarest tokens"),
            "B + C + D": ("B length", "C non-alphanumeric", "D 3 rarest tokens"),
            "A + B + C + D": tuple(FEATURE_SETS)}
EXPOSING_ATTACK = "likelihood_ratio"


def token_frequencies(token_ids: Sequence[Sequence[int]]) -> dict[int, float]:
    """Each token's share of all the tokens of the training texts."""
    counts = Counter(token for ids in token_ids for token in ids)
    total = sum(counts.values())
    return {token: count / total for token, count in counts.items()}


def sample_features(texts: Sequence[str], token_ids: Sequence[Sequence[int]], frequencies: dict[int, float]) -> pd.DataFrame:
    """Per text: digits, length (tokens), non-alphanumeric characters other than spaces, and the training frequencies
    of its three rarest tokens, rarest first (a token never seen in training has frequency 0; a text of fewer than
    three tokens repeats its most frequent one)."""
    rows = []
    for text, ids in zip(texts, token_ids, strict=True):
        rarest = sorted(frequencies.get(token, 0.0) for token in ids)[:3]
        rarest += [rarest[-1]] * (3 - len(rarest))
        rows.append({"digits": sum(c.isdigit() for c in text), "length": len(ids),
                     "non_alphanumeric": sum(not c.isalnum() and not c.isspace() for c in text),
                     "rarest_1": rarest[0], "rarest_2": rarest[1], "rarest_3": rarest[2]})
    return pd.DataFrame(rows)


def exposure_predictor(features: pd.DataFrame, exposed: np.ndarray, train: np.ndarray, seed: int = 0) -> dict:
    """For each feature set and combination: a logistic regression (standardised features) fitted on the `train` rows
    predicting `exposed`, with precision and recall of the exposed class on the train and the other rows, and the
    coefficients of the regression on every feature (per standard deviation)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import precision_score, recall_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    sets = {**{name: columns for name, columns in FEATURE_SETS.items()},
            **{name: [c for part in parts for c in FEATURE_SETS[part]] for name, parts in COMBINED.items()}}
    results, coefficients = {}, {}
    for name, columns in sets.items():
        model = make_pipeline(StandardScaler(), LogisticRegression(random_state=seed))
        model.fit(features.loc[train, columns], exposed[train])
        row = {}
        for part, rows in (("train", train), ("test", ~train)):
            predicted = model.predict(features.loc[rows, columns])
            row[f"{part} precision"] = float(precision_score(exposed[rows], predicted, zero_division=0))
            row[f"{part} recall"] = float(recall_score(exposed[rows], predicted, zero_division=0))
        results[name] = row
        if name == "A + B + C + D":
            coefficients = dict(zip(columns, map(float, model[-1].coef_[0]), strict=True))
    return {"feature sets": results, "coefficients": coefficients}


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """One cell (the demo's target and reference); the predictor is the study's analysis."""
    study = notes_study(out, size, seed, progress)

    def analyse(records: list[dict]) -> dict:
        from lmaudit.models.tokenizer import load_tokenizer

        report, scores = study.cell_outputs(records[0])
        threshold = population_threshold_at(result_of(report.results, EXPOSING_ATTACK, "sample"))
        if threshold is None:
            return {"not run": "the population calibrates no 10% FPR threshold for the likelihood ratio"}
        members = scores[scores["role"] == MEMBER].merge(study.notes[["sample_id", "text"]], on="sample_id")
        tokenizer = load_tokenizer(out / "models" / "target")
        encode = lambda texts: tokenizer(list(texts), add_special_tokens=False)["input_ids"]  # noqa: E731
        features = sample_features(members["text"].tolist(), encode(members["text"]),
                                   token_frequencies(encode(study.texts(*TARGET_ROLES))))
        exposed = (members["score_" + EXPOSING_ATTACK] >= threshold.value).to_numpy()
        patients = sorted(members["group_id"].unique())
        rng = np.random.default_rng(seed)
        train_patients = set(rng.permutation(patients)[: len(patients) // 2])
        train = members["group_id"].isin(train_patients).to_numpy()
        return {"exposed members": {"exposed": int(exposed.sum()), "members": len(exposed),
                                    "train members": int(train.sum()), "test members": int((~train).sum())},
                **exposure_predictor(features, exposed, train, seed)}

    return StudyPlan(
        study="memorisation-predictor",
        description="Which member notes the likelihood ratio exposes (called members at the population's 10% FPR "
                    "threshold), and whether simple features of a note predict it: a logistic regression fitted on the "
                    "member notes of half the patients, tested on the other half.",
        paper="non-alphanumeric characters predict exposure best alone (Table 7: test precision 69.2%, recall 47.5%); "
              "adding the rarest tokens' frequencies and the length helps (72.1%, 61.3%); digits and length alone "
              "predict nothing (0, 0).",
        cells=[study.demo_cell()], x="target", analyse=analyse,
        shown=(("loss", "sample"), ("likelihood_ratio", "sample")),
        setup={"patients": study.size.patients, "seed": seed, "exposing attack": EXPOSING_ATTACK},
    )
