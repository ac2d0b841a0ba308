"""What each canary design proves from one training run: tiny masked and causal LMs (2 layers, width 64) trained at
smoke size (30 patients' generated notes, 20 epochs) with m canaries planted (each with probability 1/2), without DP
and with DP-SGD at an accountant epsilon of 4 (PRV, delta 1e-5), and a tiny topic classifier (BERT-style, 2 layers,
early stopping) on generated user posts with sample or mislabelled canaries; then `lmaudit canaries audit` with each
design's default scoring. Reports both one-run bounds (Steinke et al.; the f-DP one of Mahloujifar et al.) and, for
reading only, the AUC of the canary scores against the key; the new-token runs are repeated with `--seeds` seeds (other
canaries, key, initial weights, batches and noise) for the run-to-run spread of the bounds.

    python benchmarks/canary_designs.py [--out docs/canaries.md] [--canaries 500] [--epochs 20] [--seeds 3]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
from markdown_section import machine_line, markdown_table, publish
from sklearn.metrics import roc_auc_score

from lmaudit.canaries.audit import audit_canaries
from lmaudit.canaries.make import KEY_FILE, make_canaries, plant, record_planted, reserved_tokens
from lmaudit.config import AuditConfig
from lmaudit.data.synth import generate_notes
from lmaudit.data.users import generate_user_posts
from lmaudit.models.classifier import ClassifierData, train_classifier
from lmaudit.models.dp import noise_for_epsilon
from lmaudit.models.recipe import DPSettings, TrainingRecipe
from lmaudit.models.train import train_language_model

PATIENTS, USERS, SEED, DELTA = 30, 120, 0, 1e-5
SAMPLE_SOURCE_SEED = 611953  # other patients' notes: the sample design's held-out canaries


def dp_settings(epsilon: float | None, n_samples: int, recipe: TrainingRecipe) -> DPSettings | None:
    """DP-SGD whose PRV epsilon after the recipe's epochs on `n_samples` is `epsilon` (None: no DP)."""
    if epsilon is None:
        return None
    steps = recipe.epochs * math.ceil(n_samples / recipe.batch_size)
    return DPSettings(noise_for_epsilon(epsilon, DELTA, recipe.batch_size / n_samples, steps), delta=DELTA)


def run(root: Path, kind: str, design: str, epsilon: float | None, notes: pd.DataFrame, count: int,
        epochs: int, seed: int = SEED) -> dict:
    """Make the design's canaries, train the language model `kind` with them planted, audit: one table row."""
    name = f"{kind}-{design}-{'dp' if epsilon else 'plain'}-{seed}"
    folder = root / name / "canaries"
    make_canaries(folder, design, count, seed=seed + 1, source=root / "others.csv" if design == "sample" else None)
    training = plant(notes[["text", "group_id"]], folder)
    recipe = TrainingRecipe(epochs=epochs, seed=seed, reserved_tokens=reserved_tokens(folder))
    recipe = replace(recipe, dp=dp_settings(epsilon, len(training), recipe))
    started = time.perf_counter()
    summary = train_language_model(kind, training["text"].tolist(), root / name / "model", recipe,
                                   training["group_id"].tolist())
    return {"DP target": "-" if epsilon is None else f"{epsilon:g}"} | audited(
        root / name, folder, kind, design, summary.dp, {}, started) | {"seed": seed}


def run_classifier(root: Path, design: str, posts: pd.DataFrame, count: int, epochs: int) -> dict:
    """Make the design's canaries from other users' posts, train the classifier with them planted, audit: one row."""
    name = f"classifier-{design}"
    folder = root / name / "canaries"
    make_canaries(folder, design, count, seed=SEED + 1, source=root / "other-posts.csv")
    users = sorted(posts["group_id"].unique())
    held_out = posts["group_id"].isin(users[: len(users) // 5])
    training, validation = plant(posts.loc[~held_out, ["text", "group_id", "label"]], folder), posts[held_out]
    started = time.perf_counter()
    train_classifier(ClassifierData(training["text"].tolist(), training["label"].astype(str).tolist(),
                                    (validation["text"].tolist(), validation["label"].tolist())),
                     root / name / "model", TrainingRecipe(epochs=epochs, patience=epochs, seed=SEED))
    return {"DP target": "-"} | audited(root / name, folder, "classifier", design, None, {"signal": "classifier"},
                                        started) | {"seed": SEED}


def audited(run_folder: Path, folder: Path, kind: str, design: str, dp: dict | None, signal: dict,
            started: float) -> dict:
    """Audit the canaries of `folder` in run_folder/model with the design's default scoring: one table row."""
    record_planted(run_folder / "model", folder)
    config = AuditConfig(target=str(run_folder / "model"), out=str(run_folder / "audit"), signal=signal)
    audit = audit_canaries(config, folder, candidates=0)
    key = pd.read_parquet(folder / KEY_FILE).set_index("sample_id").loc[audit.scores["sample_id"], "included"]
    fdp = audit.gaussian
    return {"model": kind, "design": design,
            "accountant epsilon": "no DP" if dp is None else f"{dp['epsilon_prv']:.2f}",
            "Steinke epsilon": f"{audit.bound.epsilon_lower_bound:.2f}",
            "right / guesses": f"{audit.bound.guesses.correct} / {audit.bound.guesses.guesses}",
            "f-DP mu": f"{fdp.mu_lower_bound:.3f}", "f-DP epsilon": f"{fdp.epsilon_lower_bound:.2f}",
            "score AUC": f"{roc_auc_score(key.to_numpy(), audit.scores['score']):.3f}",
            "seconds": f"{time.perf_counter() - started:.0f}"}


def spread(rows: list[dict]) -> str:
    """The run-to-run spread of both bounds over the seeds of each (model, design, DP target epsilon) run more than
    once: a table of their smallest and largest."""
    frame = pd.DataFrame(rows)
    frame[["Steinke epsilon", "f-DP epsilon"]] = frame[["Steinke epsilon", "f-DP epsilon"]].astype(float)
    summary = [{"model": model, "design": design, "DP target": target, "seeds": len(runs),
                "Steinke epsilon, min - max": f"{runs['Steinke epsilon'].min():.2f} - {runs['Steinke epsilon'].max():.2f}",
                "f-DP epsilon, min - max": f"{runs['f-DP epsilon'].min():.2f} - {runs['f-DP epsilon'].max():.2f}"}
               for (model, design, target), runs in frame.groupby(["model", "design", "DP target"], sort=False)
               if len(runs) > 1]
    return "Run to run, over seeds:\n\n" + markdown_table(summary) if summary else ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--canaries", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    notes = generate_notes(PATIENTS, SEED)
    others = generate_notes(2 * args.canaries, SEED + SAMPLE_SOURCE_SEED)
    others = others[~others["text"].isin(set(notes["text"]))]
    posts = generate_user_posts(USERS, SEED)
    other_posts = generate_user_posts(args.canaries, SEED + SAMPLE_SOURCE_SEED)  # one canary per user
    grid = [(kind, design, None, SEED) for kind in ("mlm", "clm") for design in ("sample", "secret", "new_token")]
    grid += [("mlm", "new_token", 4.0, SEED), ("clm", "new_token", 4.0, SEED)]
    grid += [(kind, "new_token", epsilon, seed) for seed in range(SEED + 1, SEED + args.seeds)
             for epsilon in (None, 4.0) for kind in ("mlm", "clm")]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        others[["sample_id", "group_id", "text"]].to_csv(root / "others.csv", index=False)
        other_posts.to_csv(root / "other-posts.csv", index=False)
        rows = [run(root, kind, design, epsilon, notes, args.canaries, args.epochs, seed)
                for kind, design, epsilon, seed in grid]
        rows += [run_classifier(root, design, posts, args.canaries, args.epochs) for design in ("sample", "mislabelled")]
    text = (f"{machine_line()} "
            f"{len(notes)} notes of {PATIENTS} patients (language models) and {len(posts)} posts of {USERS} users "
            f"(classifiers: early stopping on a fifth of the users, held out), {args.canaries} canaries "
            f"(each planted with probability 1/2), {args.epochs} epochs, seed {SEED}; bounds at delta {DELTA:g}, "
            f"95% confidence.\n\n" + markdown_table(rows) + "\n\n" + spread(rows))
    publish(text, args.out, "canary-designs")


if __name__ == "__main__":
    main()
