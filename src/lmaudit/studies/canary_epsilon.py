"""The canary epsilon of the DP studies: new-token canaries (`canaries/make.py`, the design found best) planted in every
language-model target's training, each a coin flip, and audited after it (Steinke et al.'s one-run lower bound and the
f-DP one) beside the accountant's and the attacks' epsilons.

The canaries' words are in no note, so planting them changes no role and no audited sample; every model of a study,
references included, reserves them in its vocabulary (one tokenizer throughout, so the references still pair with the
targets), and every target plants the same ones (one key per study). A target trained from scratch is scored alone: a
reference trained apart holds nothing of the canaries and would only add its own noise; a fine-tuned target is scored
against its base, which started every canary's embedding where the target did.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from lmaudit.canaries.make import MANIFEST_FILE, make_canaries, plant, record_planted
from lmaudit.config import AuditConfig

if TYPE_CHECKING:
    from lmaudit.models.training_file import TrainingRecord

CANARY_COUNTS = {"smoke": 100, "full": 500}
CANARY_SEED = 611953  # added to the study's seed: the canaries' own draws


def study_canaries(out: Path, size: str, seed: int) -> Path:
    """out/canaries: CANARY_COUNTS[size] new-token canaries (made once)."""
    folder = out / "canaries"
    if not (folder / MANIFEST_FILE).is_file():
        make_canaries(folder, "new_token", CANARY_COUNTS[size], seed + CANARY_SEED)
    return folder


def with_canaries(rows: pd.DataFrame, folder: Path) -> tuple[list[str], list]:
    """The texts and groups of the training `rows` with the planted canaries appended (each canary its own group)."""
    planted = plant(rows[["text", "group_id"]], folder)
    return planted["text"].tolist(), planted["group_id"].tolist()


def record_canaries(models: list[Path], folder: Path) -> None:
    """Record in each trained model (and checkpoint) that it planted `folder`'s canaries, as `train --canaries` does."""
    for model in models:
        record_planted(model, folder)


def canary_measurement(model: Path, base: Path | None, folder: Path, out: Path, cache: Path, delta: float,
                       seed: int) -> dict:
    """The one-run epsilon lower bounds (95%, at `delta`; Steinke et al.'s and the f-DP one) of the canaries `model`
    trained with, each read on its secret alone (less the `base` model's where it was fine-tuned), and the guesses."""
    from lmaudit.canaries.audit import audit_canaries

    config = AuditConfig(target=str(model), reference=[str(base)] if base else [], out=str(out), cache_dir=str(cache),
                         signal={"seed": seed}, evaluation={"seed": seed})
    audit = audit_canaries(config, folder, delta=delta, candidates=0)
    return {"canary_epsilon": audit.bound.epsilon_lower_bound,
            "canary_f_dp_epsilon": audit.gaussian.epsilon_lower_bound,
            "canary_correct": audit.bound.guesses.correct, "canary_guesses": audit.bound.guesses.guesses}


def white_box_measurement(training: TrainingRecord) -> dict:
    """A DP-SGD checkpoint's white-box audit (its gradient canaries' bound, f-DP bound and verdict); {} without one."""
    from lmaudit.canaries.audit import white_box_of

    audit = white_box_of(training)
    return {} if audit is None else {"white_box_epsilon": audit["epsilon_lower_bound"],
                                     "white_box_f_dp_epsilon": audit["f_dp_epsilon_lower_bound"],
                                     "white_box_verdict": audit["verdict"]}
