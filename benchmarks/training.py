"""How long one epoch of masked-LM training takes with the LM head at the masked positions only (lmaudit's
`models/heads.py:masked_lm_loss`) against the model's own loss, which runs the head at every position: the full demo's
first reference (a 2-layer BERT, width 64, on the notes of the full demo's reference patients), the same recipe and
seed, in one run, the two ways taking turns.

    python benchmarks/training.py [--out docs/performance.md] [--epochs 3] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from markdown_section import machine_line, markdown_table, publish

import lmaudit.models.train as training
from lmaudit.data.roles import split_groups
from lmaudit.data.synth import generate_notes
from lmaudit.studies.setup import DEMO_SIZES, DEMO_SPLIT, REFERENCE_TRAIN, demo_recipe


def own_loss(model, input_ids, attention_mask, labels):
    """The model's own masked-LM loss: the LM head over the whole vocabulary at every position."""
    return model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


def seconds_per_epoch(texts: list[str], epochs: int, loss) -> float:
    """Wall seconds per epoch of training a reference on `texts` with `loss` as the training loss."""
    training.masked_lm_loss = loss
    recipe = replace(demo_recipe(epochs), seed=1)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        training.train_language_model("mlm", texts, Path(folder) / "model", recipe)
        return (time.perf_counter() - start) / epochs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    size = DEMO_SIZES["full"]
    notes = generate_notes(size.patients, 0)
    roles = split_groups(notes["group_id"].tolist(), DEMO_SPLIT, 0)
    texts = notes[notes["group_id"].map(roles) == REFERENCE_TRAIN]["text"].tolist()
    ways = {"LM head at every position (the model's own loss)": own_loss,
            "LM head at the masked positions (lmaudit)": training.masked_lm_loss}
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(args.repeats):
        for way, loss in ways.items():
            times[way].append(seconds_per_epoch(texts, args.epochs, loss))
    baseline = statistics.median(times[next(iter(ways))])
    rows = [{"training loss": way, "s per epoch (median)": f"{statistics.median(t):.2f}",
             "speed-up": f"{baseline / statistics.median(t):.2f}x"} for way, t in times.items()]
    text = (f"{machine_line()} "
            f"{len(texts)} notes, {args.epochs} epochs per run, {args.repeats} runs each, batch size 32.\n\n"
            + markdown_table(rows))
    publish(text, args.out, "training")


if __name__ == "__main__":
    main()
