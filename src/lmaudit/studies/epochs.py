"""Leakage per training epoch (Jagannatha et al. 2021, Figures 2-4 and Tables 2-3's maximum over epochs): one masked LM
and one causal LM trained on the members, each saved after epochs spaced evenly on a log scale up to the size's
epochs, every checkpoint audited against a reference of its kind trained in full; the analysis takes each attack's
maximum over the epochs, as the paper reports leakage."""

from __future__ import annotations

from pathlib import Path

from lmaudit.demos import REFERENCE_TRAIN
from lmaudit.studies.notes import TARGET_ROLES, notes_study
from lmaudit.studies.runner import Cell, StudyPlan

KINDS = {"mlm": "mlm_energy", "clm": "clm_loss"}
POINTS = 5  # checkpoints per model, from epoch 1 to the last


def checkpoint_epochs(epochs: int, points: int = POINTS) -> list[int]:
    """`points` epochs from 1 to `epochs`, evenly spaced on a log scale (rounded, without repeats)."""
    return sorted({max(1, round(epochs ** (i / (points - 1)))) for i in range(points)})


def maximum_over_epochs(records: list[dict]) -> dict:
    """Per model kind, attack and level: the largest AUC and population advantage over the checkpoints, and the epoch
    at which each was reached."""
    best: dict[str, dict] = {}
    for record in records:
        for summary in record["results"]:
            key = f"{record['settings']['kind']} {summary['attack']} {summary['level']}"
            row = best.setdefault(key, {"max AUC": -1.0, "at epoch": None, "max advantage": None, "advantage at epoch": None})
            if summary["auc"] > row["max AUC"]:
                row.update({"max AUC": summary["auc"], "at epoch": record["settings"]["epochs"]})
            advantage = summary["population_advantage"]
            if advantage is not None and (row["max advantage"] is None or advantage > row["max advantage"]):
                row.update({"max advantage": advantage, "advantage at epoch": record["settings"]["epochs"]})
    return {"maximum over epochs": best}


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """One cell per (model kind, checkpoint epoch)."""
    from lmaudit.models.train import checkpoint_folder

    study = notes_study(out, size, seed, progress)
    epochs = checkpoint_epochs(study.size.epochs)

    def cell(kind: str, epoch: int) -> Cell:
        def prepare(folder: Path):
            target = study.train(kind, f"target-{kind}", study.texts(*TARGET_ROLES), checkpoints=tuple(epochs))
            reference = (study.reference() if kind == "mlm" else
                         study.train(kind, f"reference-{kind}", study.texts(REFERENCE_TRAIN), seed=seed + 1))
            model = target if epoch == study.size.epochs else checkpoint_folder(target, epoch)
            return study.audit(folder, model, [reference], KINDS[kind])

        return Cell(f"{kind}-epoch-{epoch}", {"kind": kind, "epochs": epoch}, prepare)

    return StudyPlan(
        study="epochs",
        description=f"A masked LM and a causal LM trained on the members for {study.size.epochs} epochs, saved after "
                    f"epochs {', '.join(map(str, epochs))}; each checkpoint audited against a reference of its kind "
                    "trained in full on the reference patients.",
        paper="leakage grows with training epochs and is reported as the maximum over epochs (Tables 2-3; Figures "
              "2-4: the black-box advantage rises from the first epoch on for BERT and GPT-2).",
        cells=[cell(kind, epoch) for kind in KINDS for epoch in epochs], x="epochs", series="kind",
        shown=(("loss", "sample"), ("likelihood_ratio", "sample"), ("loss", "group")),
        analyse=maximum_over_epochs,
        setup={"patients": study.size.patients, "checkpoints": ", ".join(map(str, epochs)), "seed": seed},
    )
