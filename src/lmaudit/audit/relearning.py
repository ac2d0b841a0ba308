"""The erasure audit's relearning probe (Hu et al., ICLR 2025): an unlearning that only hides what the model still
holds comes back after a little training on related text. The after model is fine-tuned briefly on half of every
subject's texts, forget and holdout alike, and tested on the other half; treated alike, the two sets stay exchangeable
when nothing of the forget subjects remains, so the probe's test keeps its level (metrics/erasure.py). Given related
public text, none of the subjects', the after model is also fine-tuned on it alone and tested on every text."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lmaudit.models.source import ModelSource


def relearned_rows(subjects: np.ndarray, seed: int) -> np.ndarray:
    """(n,) True for the texts the model relearns: for each subject, half of its texts rounded down, drawn at random
    (a subject of one text keeps it for the test), so that every subject keeps at least one text to test."""
    rng = np.random.default_rng(seed)
    relearned = np.zeros(len(subjects), bool)
    for subject in dict.fromkeys(subjects):
        rows = np.flatnonzero(subjects == subject)
        relearned[rng.choice(rows, size=len(rows) // 2, replace=False)] = True
    return relearned


def relearned_folder(out: str | Path, kind: str = "relearned") -> Path:
    """Where a relearnt model is kept: beside the output folder, never in it (it learnt from the audited texts, or from
    the public text): `<out>.relearned` and `<out>.relearned-public`."""
    out = Path(out)
    return out.parent / f"{out.name}.{kind}"


def relearned_model(after: ModelSource, family: str, texts: list[str], folder: Path, epochs: int,
                    learning_rate: float | None, seed: int, device: str, progress: bool = False) -> ModelSource:
    """The after model fine-tuned fully for `epochs` epochs on `texts` (AdamW at `learning_rate`; None: the fine-tuning
    default), saved in `folder`; one already there from the same recipe on as many texts is reused."""
    from lmaudit.models.recipe import TrainingRecipe
    from lmaudit.models.train import train_language_model
    from lmaudit.models.trained import train_unless_done

    recipe = TrainingRecipe(init_from=after.folder, epochs=epochs, learning_rate=learning_rate, seed=seed,
                            device=device)
    train_unless_done(folder, family, recipe, len(texts),
                      lambda: train_language_model(family, texts, folder, recipe, progress=progress,
                                                   label="the relearning probe"))
    return ModelSource(str(folder))
