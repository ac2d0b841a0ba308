"""A classifier audit's signals (Shejwalkar et al.'s setting): the target's features on the audited samples and the
shadow model's on its own members and non-members, which calibrate every threshold; white-box features of the same."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lmaudit.attacks.base import CLASSIFIER_FEATURE, CLASSIFIER_RAW_FEATURE, LABEL_RANKS, AttackInput
from lmaudit.audit.corpus import audited_set_column
from lmaudit.audit.records import ResolvedAudit, ScoredSamples
from lmaudit.audit.whitebox import Scorer, ScoringPlan, whitebox_inputs
from lmaudit.config import ROLE_FILE_FIELDS
from lmaudit.data.corpus import check_labels
from lmaudit.data.roles import AUDITED_ROLES, SHADOW_ROLES, check_no_single_sample_groups
from lmaudit.errors import InputError, row_location
from lmaudit.models.source import ModelSource

# The roles a classifier audit scores: the target's audited samples and the shadow model's own.
CLASSIFIER_ROLES = AUDITED_ROLES + SHADOW_ROLES
# What a classifier audit reports about each model, from its training summary.
TRAINING_FIELDS = ("architecture", "size", "n_samples", "epochs_run", "best_epoch", "train_accuracy", "validation_accuracy",
                   "test_accuracy", "generalization_gap", "gap_measured_on")


def classifier_signals(audit: ResolvedAudit, corpus: pd.DataFrame) -> ScoredSamples:
    """The features of the target on the audited samples and of the shadow model on its own samples, and white-box
    features of the same."""
    from lmaudit.models.config_json import classifier_labels
    from lmaudit.signals.compute import model_signal
    from lmaudit.signals.features import FEATURE_DIRECTIONS, classifier_features

    check_shadow_setup(audit.shadow, corpus)
    rows = corpus[corpus["role"].isin(CLASSIFIER_ROLES)].reset_index(drop=True)
    check_labels(rows)
    check_no_single_sample_groups(rows)
    # The target's rows first, then the shadow model's: the order of the samples table.
    rows = pd.concat([rows[rows["role"].isin(AUDITED_ROLES)], rows[rows["role"].isin(SHADOW_ROLES)]], ignore_index=True)
    scorers = [Scorer("target", audit.target, rows["role"].isin(AUDITED_ROLES).to_numpy()),
               Scorer("shadow", audit.shadow, rows["role"].isin(SHADOW_ROLES).to_numpy())]
    label_ids = np.zeros(len(rows), dtype=np.int64)
    parts = []
    for scorer in scorers:
        part = rows[scorer.rows]
        label_ids[scorer.rows] = label_indices(part, classifier_labels(scorer.model), str(scorer.model))
        values = model_signal(scorer.model, part["sample_id"].tolist(), part["text"].tolist(), audit.signal,
                              audit.scoring, scorer.name)
        features = classifier_features(np.stack(values["value"].to_numpy()), label_ids[scorer.rows])
        parts.append(pd.DataFrame({
            "sample_id": part["sample_id"].to_numpy(), "role": part["role"].to_numpy(), "group_id": part["group_id"].to_numpy(),
            **{column: part[column].to_numpy() for column in audited_set_column(rows)},
            "label": part["label"].astype(str).str.strip().to_numpy(), "model": scorer.name,
            "length": values["n_tokens"].to_numpy(), "truncated": values["truncated"].to_numpy(), **features,
        }))
    samples = pd.concat(parts, ignore_index=True)
    inputs = [AttackInput(feature, samples, feature_values(samples, feature, direction), audit.evaluation.seed,
                          CLASSIFIER_ROLES)
              for feature, direction in FEATURE_DIRECTIONS.items()]
    models = {name: summary for name, summary in (("target", training_summary(audit.target.folder)),
                                                  ("shadow", training_summary(audit.shadow.folder))) if summary}
    if not audit.whitebox:
        return ScoredSamples(samples, inputs, models=models)
    whitebox, skipped = whitebox_inputs(audit, ScoringPlan(rows, scorers, CLASSIFIER_ROLES, label_ids), samples)
    return ScoredSamples(samples, inputs + whitebox, skipped, models)


def feature_values(samples: pd.DataFrame, feature: str, direction: float) -> dict[str, np.ndarray]:
    """What the classifier attacks read of one feature: the feature oriented (higher = member) and raw, and with the
    rank feature the ranks themselves, which the rank-histogram attack reads (once, not once per feature)."""
    raw = samples[feature].to_numpy(dtype=float)
    return {CLASSIFIER_FEATURE: direction * raw, CLASSIFIER_RAW_FEATURE: raw} | ({LABEL_RANKS: raw} if feature == "rank" else {})


def check_shadow_setup(shadow: ModelSource | None, corpus: pd.DataFrame) -> None:
    """Refuse a classifier audit without a shadow model or without shadow data of both kinds."""
    if shadow is None:
        raise InputError("the classifier attacks are calibrated on a shadow model: pass --shadow MODEL, a classifier "
                         "trained like the target (`lmaudit train classifier`) on the shadow_member data")
    for role in SHADOW_ROLES:
        if not (corpus["role"] == role).any():
            option = "--" + ROLE_FILE_FIELDS[role].replace("_", "-")
            raise InputError(f"no {role} samples: pass {option} FILE (or rows with role {role}); the shadow thresholds "
                             "are fitted on the shadow model's members and non-members")


def label_indices(rows: pd.DataFrame, model_labels: list[str], model_dir: str) -> np.ndarray:
    """Each row's label as the model's output index; integers also match default LABEL_<i> names."""
    position = {name: index for index, name in enumerate(model_labels)}
    if all(name == f"LABEL_{i}" for i, name in enumerate(model_labels)):
        position.update({str(i): i for i in range(len(model_labels))})
    names = rows["label"].astype(str).str.strip()
    unknown = rows[~names.isin(list(position))]
    if not unknown.empty:
        shown = ", ".join(model_labels[:10]) + (", ..." if len(model_labels) > 10 else "")
        raise InputError(f"{row_location(unknown.iloc[0])}: label '{names[unknown.index[0]]}' is not a label of the model "
                         f"{model_dir} ({shown}); fix the label or audit with the model trained on these labels")
    return names.map(position).to_numpy(dtype=np.int64)


def training_summary(model_dir: str) -> dict | None:
    """What the report shows of a classifier trained by lmaudit (accuracies, generalisation gap); None otherwise."""
    from lmaudit.models.training_file import read_training_summary

    summary = read_training_summary(model_dir)
    return {key: getattr(summary, key) for key in TRAINING_FIELDS} if summary and summary.kind == "classifier" else None
