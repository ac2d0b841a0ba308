"""The canary epsilon of the DP studies: held-out notes planted in every language-model target's training, each a coin
flip, and audited after it (Steinke et al.'s one-run lower bound) beside the accountant's and the attacks' epsilons.

The canaries are one note each of patients generated apart from the study's (in no role), so that planting them
changes no role and no audited sample; every target of a study plants the same ones (one key per study).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmaudit.canaries.make import MANIFEST_FILE, make_canaries, plant
from lmaudit.config import AuditConfig

CANARY_COUNTS = {"smoke": 100, "full": 500}
CANARY_PATIENTS_SEED = 611953  # added to the study's seed: canary patients apart from the study's


def note_canaries(out: Path, size: str, seed: int, notes: pd.DataFrame) -> Path:
    """out/canaries: sample canaries, one note of each of CANARY_COUNTS[size] patients in no role (made once), none
    with the text of any of the study's `notes` (the generator repeats boilerplate notes: such a canary is not held
    out)."""
    from lmaudit.data.synth import generate_notes

    folder = out / "canaries"
    if not (folder / MANIFEST_FILE).is_file():
        count = CANARY_COUNTS[size]
        source = out / "canary-patients.csv"
        source.parent.mkdir(parents=True, exist_ok=True)
        patients = generate_notes(2 * count, seed + CANARY_PATIENTS_SEED)  # twice as many: some have only boilerplate
        patients = patients[~patients["text"].isin(set(notes["text"]))]
        patients[["sample_id", "group_id", "text"]].to_csv(source, index=False)
        make_canaries(folder, "sample", count, seed, source=source)
    return folder


def with_canaries(rows: pd.DataFrame, folder: Path) -> tuple[list[str], list]:
    """The texts and groups of the training `rows` with the planted canaries appended (each canary its own group)."""
    planted = plant(rows[["text", "group_id"]], folder)
    return planted["text"].tolist(), planted["group_id"].tolist()


def canary_measurement(model: Path, references: list[Path], folder: Path, signal: str, out: Path, cache: Path,
                       delta: float, seed: int, k: int) -> dict:
    """The one-run epsilon lower bound (95%, at `delta`) of the canaries `model` trained with, scored by the
    likelihood ratio against `references` (mask seed and count as the study's audits), and the guesses behind it."""
    from lmaudit.canaries.audit import audit_canaries

    config = AuditConfig(target=str(model), reference=[str(r) for r in references], out=str(out), cache_dir=str(cache),
                         signal={"signal": signal, "k": k, "seed": seed}, evaluation={"seed": seed})
    bound = audit_canaries(config, folder, delta=delta, candidates=0).bound
    return {"canary_epsilon": bound.epsilon_lower_bound, "canary_correct": bound.guesses.correct,
            "canary_guesses": bound.guesses.guesses}
