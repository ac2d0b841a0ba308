"""A model folder's lmaudit_training.json: what trained the model, the canaries planted in it and its DP-SGD watch,
which `lmaudit canaries audit` trusts. One model (`TrainingRecord`), one reader and one writer: every write is
validated and replaces the whole file atomically, keeping the fields it does not set. Strict JSON: a run without noise
spends an infinite epsilon, written as the string "Infinity" (null would read as "not computed")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, WithJsonSchema

from lmaudit.atomic import write_text
from lmaudit.errors import InputError
from lmaudit.models.source import SUMMARY_FILE

# A finite number, or "Infinity" (an epsilon without noise): strict JSON has no infinite number.
Epsilon = Annotated[float, WithJsonSchema({"anyOf": [{"type": "number"}, {"const": "Infinity"}]})]


class Strict(BaseModel):
    """A record of the file: no field it does not name, an infinite number written as "Infinity"."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class PlantedCanaries(Strict):
    """One canary folder planted in the run: its design, how many were planted, and the fingerprints of the folder and
    of its key, which `canaries audit` checks against the folder it is given (None: a model trained before lmaudit
    recorded it, which the audit refuses)."""

    design: str
    planted: int
    folder_fingerprint: str
    key_fingerprint: str | None = None


class GradientCheck(Strict):
    """One implementation check of DP-SGD (`models/dp_checks.py`): its name, whether it held, what was measured."""

    name: str
    passed: bool
    detail: str


class GradientCanaryObservations(Strict):
    """The white-box gradient canaries of a DP-SGD run: each one's score (synthetic coordinates, no secret), whether it
    was included, and the implementation checks, from which `metrics/dp_audit.py` makes the verdict."""

    scores: list[float]
    included: list[bool]
    checks: list[GradientCheck]


class DPRecord(Strict):
    """A DP-SGD run's settings as run (sigma, clipping norm C, delta, the per-group cap, the canaries asked for, the
    target epsilon), its sampling rate q, steps, and the epsilon spent at delta by the RDP and PRV accountants (PRV:
    None above its range)."""

    noise_multiplier: float
    max_grad_norm: float
    delta: float
    max_samples_per_group: int | None = None
    gradient_canaries: int = 0
    target_epsilon: float | None = None
    sample_rate: float
    steps: int
    poisson_sampling: bool
    epsilon_rdp: Epsilon
    epsilon_prv: Epsilon | None
    gradient_canary_observations: GradientCanaryObservations | None = None


class LoraRecord(Strict):
    """The LoRA adapters trained: rank, scaling alpha, dropout."""

    rank: int
    alpha: float
    dropout: float


class TrainingRecord(Strict):
    """lmaudit_training.json. `lmaudit train` writes a language model's (`models/train.py:TrainingSummary`) or a
    classifier's (`models/classifier.py:ClassifierTrainingSummary`) fields; a user's script with one of
    `lmaudit.training`'s callbacks writes `trained_by` and what it planted or watched. Losses in nats per token,
    accuracies as fractions; None where a field does not apply."""

    trained_by: str | None = None
    kind: Literal["mlm", "clm", "classifier"] | None = None
    architecture: str | None = None
    size: str | None = None
    n_samples: int | None = None
    n_validation: int | None = None
    n_test: int | None = None
    labels: list[str] | None = None
    epochs: int | None = None
    max_epochs: int | None = None
    patience: int | None = None
    epochs_run: int | None = None
    best_epoch: int | None = None
    seed: int | None = None
    batch_size: int | None = None
    learning_rate: float | None = None
    max_length: int | None = None
    dropout: float | None = None
    final_train_loss: float | None = None
    epoch_losses: list[float] | None = None
    train_accuracy: float | None = None
    validation_accuracy: float | None = None
    test_accuracy: float | None = None
    generalization_gap: float | None = None
    gap_measured_on: str | None = None
    validation_accuracies: list[float] | None = None
    dp: DPRecord | None = None
    init_from: str | None = None
    init_fingerprint: str | None = None
    lora: LoraRecord | None = None
    checkpoint_of: int | None = None  # a checkpoint saved during a run of this many epochs
    tokenization: str | None = None
    vocab_size: int | None = None
    device: str | None = None
    precision: str | None = None
    canaries: list[PlantedCanaries] = []


def read_training_summary(folder: str | Path) -> TrainingRecord | None:
    """The lmaudit_training.json of a model folder, or None when there is none; InputError naming it when unreadable or
    not the file lmaudit writes."""
    path = Path(folder) / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        return TrainingRecord.model_validate_json(path.read_bytes())
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the file"
        raise InputError(f"{path}: not the file lmaudit writes ({where}: {first['msg']}); retrain, or remove it") from None


def write_training_summary(folder: str | Path, summary: dict | TrainingRecord) -> TrainingRecord:
    """Write `summary` as the folder's lmaudit_training.json, whole or not at all, once it is a TrainingRecord."""
    record = summary if isinstance(summary, TrainingRecord) else TrainingRecord.model_validate(summary)
    write_text(Path(folder) / SUMMARY_FILE, record.model_dump_json(indent=2, exclude_unset=True) + "\n")
    return record


def update_training_summary(folder: str | Path, update: dict, created: dict | None = None) -> TrainingRecord:
    """Set `update`'s fields in the folder's lmaudit_training.json, keeping its others; a folder without one starts from
    `created` (InputError when none is given). The record written."""
    summary = read_training_summary(folder)
    if summary is None:
        if created is None:
            raise InputError(f"{Path(folder) / SUMMARY_FILE}: missing; only a model folder lmaudit or its callbacks "
                             "wrote has one")
        summary = TrainingRecord.model_validate(created)
    return write_training_summary(folder, {**summary.model_dump(exclude_unset=True), **update})
