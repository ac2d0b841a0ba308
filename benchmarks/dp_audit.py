"""The white-box audit of DP-SGD (`lmaudit train --dp --audit-dp`) on the tiny causal LM (2 layers, width 64) trained on
30 patients' generated notes for 20 epochs: the bound it proves against the accountant's epsilon, at accountant
epsilons 2 and 4 (PRV, delta 1e-5), with Poisson batches of 32 and with full batches (every note in every step, the
setting of Nasr et al. 2023), and whether every implementation check held.

    python benchmarks/dp_audit.py [--out docs/canaries.md] [--canaries 5000]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from markdown_section import machine_line, markdown_table, publish

from lmaudit.data.synth import generate_notes
from lmaudit.metrics.dp_audit import white_box_audit
from lmaudit.models.dp import noise_for_epsilon
from lmaudit.models.recipe import DPSettings, TrainingRecipe
from lmaudit.models.train import train_language_model
from lmaudit.report.privacy_words import with_verdict

PATIENTS, SEED, DELTA, EPOCHS = 30, 0, 1e-5, 20


def run(texts: list[str], epsilon: float, batch_size: int, canaries: int, folder: Path) -> dict:
    """Train with DP-SGD at the accountant's `epsilon` and gradient canaries; one table row."""
    steps = EPOCHS * math.ceil(len(texts) / batch_size)
    sigma = noise_for_epsilon(epsilon, DELTA, batch_size / len(texts), steps)
    recipe = TrainingRecipe(epochs=EPOCHS, seed=SEED, batch_size=batch_size,
                            dp=DPSettings(sigma, 1.0, DELTA, gradient_canaries=canaries))
    started = time.perf_counter()
    audit = with_verdict(white_box_audit(train_language_model("clm", texts, folder, recipe).dp))
    return {"batches": "full" if batch_size >= len(texts) else f"Poisson, {batch_size}", "steps": steps,
            "sigma": f"{sigma:.3f}", "accountant epsilon": f"{audit['accountant_epsilon']:.2f}",
            "Steinke epsilon": f"{audit['epsilon_lower_bound']:.3f}",
            "right / guesses": f"{audit['correct']} / {audit['guesses']}",
            "f-DP epsilon": f"{audit['f_dp_epsilon_lower_bound']:.3f}",
            "checks": "all held" if all(c["passed"] for c in audit["checks"]) else "FAILED",
            "verdict": audit["verdict"].split(":")[0], "seconds": f"{time.perf_counter() - started:.0f}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--canaries", type=int, default=5000)
    args = parser.parse_args()
    texts = generate_notes(PATIENTS, SEED)["text"].tolist()
    with tempfile.TemporaryDirectory() as folder:
        rows = [run(texts, epsilon, batch, args.canaries, Path(folder) / f"{epsilon}-{batch}")
                for epsilon in (2.0, 4.0) for batch in (32, len(texts))]
    text = (f"{machine_line()} "
            f"A tiny causal LM on {len(texts)} notes of {PATIENTS} patients, {EPOCHS} epochs, seed {SEED}, "
            f"{args.canaries} gradient canaries; bounds at delta {DELTA:g}, 95% confidence.\n\n" + markdown_table(rows))
    publish(text, args.out, "dp-audit")


if __name__ == "__main__":
    main()
