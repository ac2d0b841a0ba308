"""Leakage per training epoch (Jagannatha et al. 2021, Figures 1-3 and Tables 2-3's maximum over epochs): one masked LM
and one causal LM trained on the members, each saved after epochs spaced evenly on a log scale up to the size's
epochs, every checkpoint audited against a reference of its kind trained in full (white-box attacks included); and the
classifier demo's target and shadow classifiers (user posts), trained without early stopping and saved after the same
kind of epochs, each checkpoint audited with the shadow at the same epoch. The analysis takes each attack's maximum over
the epochs, as the paper reports leakage."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from lmaudit.studies.notes import TARGET_ROLES, notes_study
from lmaudit.studies.runner import Cell, StudyPlan
from lmaudit.studies.setup import REFERENCE_TRAIN

KINDS = {"mlm": "mlm_energy", "clm": "clm_loss"}
POINTS = 5  # checkpoints per model, from epoch 1 to the last


def checkpoint_epochs(epochs: int, points: int = POINTS) -> list[int]:
    """`points` epochs from 1 to `epochs`, evenly spaced on a log scale (rounded, without repeats)."""
    return sorted({max(1, round(epochs ** (i / (points - 1)))) for i in range(points)})


def maximum_over_epochs(records: list[dict]) -> dict:
    """Per model kind, attack and level (and signal, where an attack reads several: the classifier's features): the
    largest AUC and population advantage over the checkpoints, and the epoch at which each was reached."""
    best: dict[str, dict] = {}
    for record in records:
        signals = Counter((summary["attack"], summary["level"]) for summary in record["results"])
        for summary in record["results"]:
            on = f" on {summary['signal']}" if signals[(summary["attack"], summary["level"])] > 1 else ""
            key = f"{record['settings']['kind']} {summary['attack']}{on} {summary['level']}"
            row = best.setdefault(key, {"max AUC": -1.0, "at epoch": None, "max advantage": None, "advantage at epoch": None})
            if summary["auc"] > row["max AUC"]:
                row.update({"max AUC": summary["auc"], "at epoch": record["settings"]["epochs"]})
            advantage = summary["population_advantage"]
            if advantage is not None and (row["max advantage"] is None or advantage > row["max advantage"]):
                row.update({"max advantage": advantage, "advantage at epoch": record["settings"]["epochs"]})
    return {"maximum over epochs": best}


def classifier_cells(out: Path, size: str, seed: int, progress: bool) -> tuple[list[Cell], list[int]]:
    """One cell per checkpoint epoch of the classifier demo's target, audited with the shadow's checkpoint of the same
    epoch (white-box attacks left out), and those epochs."""
    from lmaudit.models.trained import checkpoint_folder
    from lmaudit.studies.setup import (
        CLASSIFIER_DEMO_SIZES,
        classifier_audit_config,
        classifier_recipe,
        train_classifier_pair,
        write_classifier_roles,
    )

    demo = CLASSIFIER_DEMO_SIZES[size]
    epochs = checkpoint_epochs(demo.max_epochs)
    posts, files = write_classifier_roles(size, seed, out / "data-classifier")

    def cell(epoch: int) -> Cell:
        def prepare(folder: Path):
            # Patience as long as the run: every checkpoint is reached, none is cut by early stopping.
            recipe = classifier_recipe(size, seed=seed, checkpoints=tuple(epochs), patience=demo.max_epochs)
            target, shadow = train_classifier_pair(posts, out / "models" / "classifier", recipe, progress)
            return classifier_audit_config(checkpoint_folder(target, epoch), checkpoint_folder(shadow, epoch), files,
                                           folder, demo.bootstrap, seed, whitebox=False)

        return Cell(f"classifier-epoch-{epoch}", {"kind": "classifier", "epochs": epoch}, prepare)

    return [cell(epoch) for epoch in epochs], epochs


def plan(out: Path, size: str, seed: int, progress: bool = False) -> StudyPlan:
    """One cell per (model kind, checkpoint epoch)."""
    from lmaudit.models.trained import checkpoint_folder

    study = notes_study(out, size, seed, progress)
    epochs = checkpoint_epochs(study.size.epochs)
    classifier, classifier_epochs = classifier_cells(out, size, seed, progress)

    def cell(kind: str, epoch: int) -> Cell:
        def prepare(folder: Path):
            target = study.train(kind, f"target-{kind}", study.texts(*TARGET_ROLES), checkpoints=tuple(epochs))
            reference = (study.reference() if kind == "mlm" else
                         study.train(kind, f"reference-{kind}", study.texts(REFERENCE_TRAIN), seed=seed + 1))
            model = target if epoch == study.size.epochs else checkpoint_folder(target, epoch)
            # White-box too, as the paper's Figure 1 (b, c): attention concentration and gradient norms per checkpoint.
            return study.audit(folder, model, [reference], KINDS[kind]).model_copy(update={"whitebox": True})

        return Cell(f"{kind}-epoch-{epoch}", {"kind": kind, "epochs": epoch}, prepare)

    return StudyPlan(
        study="epochs",
        description=f"A masked LM and a causal LM trained on the members for {study.size.epochs} epochs, saved after "
                    f"epochs {', '.join(map(str, epochs))}; each checkpoint audited against a reference of its kind "
                    "trained in full on the reference patients, white-box attacks included. The classifier demo's "
                    f"target and shadow topic classifiers, trained for {classifier_epochs[-1]} epochs without early "
                    "stopping and saved after "
                    f"epochs {', '.join(map(str, classifier_epochs))}; each target checkpoint audited with the shadow's "
                    "checkpoint of the same epoch.",
        paper="leakage grows with training epochs and is reported as the maximum over epochs (Tables 2-3; Figures "
              "1-3: the black-box and white-box advantage rises from the first epoch on for BERT and GPT-2).",
        cells=[cell(kind, epoch) for kind in KINDS for epoch in epochs] + classifier, x="epochs", series="kind",
        shown=(("loss", "sample"), ("likelihood_ratio", "sample"), ("loss", "group"), ("sample_threshold", "sample"),
               ("user_threshold_avg", "group")),
        analyse=maximum_over_epochs,
        setup={"patients": study.size.patients, "checkpoints": ", ".join(map(str, epochs)),
               "classifier checkpoints": ", ".join(map(str, classifier_epochs)), "seed": seed},
    )
