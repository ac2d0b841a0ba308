"""White-box signals of an audit: each scored row's attention and gradient features under the model that scores it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmaudit.attacks.base import FEATURE_VECTORS, GRADIENT_NORMS, AttackInput, Skipped
from lmaudit.audit.records import ResolvedAudit
from lmaudit.errors import InputError
from lmaudit.models.source import ModelSource
from lmaudit.signals.registry import SIGNALS
from lmaudit.signals.settings import SignalSettings


@dataclass(frozen=True)
class Scorer:
    """A model that computes signals for some of the scored rows: its name in the report, the model, which rows."""

    name: str
    model: ModelSource
    rows: np.ndarray


@dataclass(frozen=True)
class ScoringPlan:
    """Who scores what: the corpus rows behind the samples table (with their texts), the model that scores each row,
    the roles the audit scores, and each row's label index (classifiers: their gradient depends on it)."""

    rows: pd.DataFrame
    scorers: list[Scorer]
    scored_roles: tuple[str, ...]
    label_ids: np.ndarray | None = None


def whitebox_inputs(audit: ResolvedAudit, plan: ScoringPlan, samples: pd.DataFrame) -> tuple[list[AttackInput], list[Skipped]]:
    """One attack input per white-box signal: each row's features under the model that scores it. A signal the
    target cannot give (attention, for an LSTM) is skipped with the reason."""
    from lmaudit.models.config_json import architecture_difference, has_attention
    from lmaudit.signals.compute import model_signal

    for scorer in plan.scorers[1:]:  # a regression fitted on one architecture's features means nothing on another's
        difference = architecture_difference(audit.target, scorer.model)
        if difference:
            raise InputError(f"{scorer.model}: the {scorer.name} model's architecture differs from the target's "
                             f"({difference}); the white-box attacks need a {scorer.name} trained with the target's architecture")
    inputs, skipped = [], []
    for spec in (s for s in SIGNALS if s.output == "features"):
        if spec.needs_attention and not has_attention(audit.target):
            skipped.append(Skipped("*", "*", "the model has no attention layers", spec.name))
            continue
        # The gradient is of the signal's own loss: for an MLM, the sample's first mask (k = 1, mean).
        settings = SignalSettings(signal=spec.name, seed=audit.signal.seed, max_length=audit.signal.max_length,
                                  mask_fraction=audit.signal.mask_fraction, batch_tokens=audit.signal.batch_tokens)
        matrix = None
        for scorer in plan.scorers:
            part = plan.rows[scorer.rows]
            labels = plan.label_ids[scorer.rows].tolist() if plan.label_ids is not None and spec.label_dependent else None
            values = model_signal(scorer.model, part["sample_id"].tolist(), part["text"].tolist(), settings, audit.scoring,
                                  f"{scorer.name} {spec.name}", class_labels=labels)
            features = np.stack(values["value"].to_numpy())
            matrix = np.zeros((len(samples), features.shape[1])) if matrix is None else matrix
            matrix[scorer.rows] = features
        # A squared norm computed without forming the gradient can come out a rounding error below zero.
        norms = {GRADIENT_NORMS: np.sqrt(np.maximum(matrix, 0.0))} if spec.squared_gradient_norms else {}
        values = {FEATURE_VECTORS: matrix} | norms
        inputs.append(AttackInput(spec.name, samples, values, audit.evaluation.seed, plan.scored_roles, audit.attacks))
    return inputs, skipped
