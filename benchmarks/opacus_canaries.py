"""What new-token canaries prove under DP-SGD at accountant epsilon 4 when planted in a user's own Opacus loop
(`lmaudit.training`), against `lmaudit train clm --dp` for the same recipe and seed: the base, notes and canaries of
`trainer_canaries.py`; the user's loop tokenizes the notes and the planted canaries, trains each canary row on its
secret alone (`secret_only`), makes the model private with Opacus's `make_private_with_epsilon` (PRV accountant, Poisson
batches of expected size 32, clipping 1.0, AdamW with linear warm-up and decay, the mean of per-sample losses), and is
watched by `watch_dp_sgd` (gradient canaries, the implementation checks, the white-box verdict). Both models are audited
by `lmaudit canaries audit` (Steinke et al.'s one-run bound and the f-DP one, delta 1e-5, 95% confidence), for each of
`--seeds` seeds (the spread between seeds says how close two runs of one recipe can be expected to come).

    python benchmarks/opacus_canaries.py [--out docs/canaries.md] [--canaries 500] [--epochs 20] [--seeds 2]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
from markdown_section import machine_line, markdown_table, publish
from trainer_canaries import BATCH, LEARNING_RATE, bound_row, prepared
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling, get_linear_schedule_with_warmup

from lmaudit.canaries.make import plant, record_planted, reserved_tokens
from lmaudit.models.dp import per_sample_losses
from lmaudit.models.recipe import DPSettings, TrainingRecipe
from lmaudit.models.train import train_language_model
from lmaudit.training.callback import CanaryCallback
from lmaudit.training.dp_watch import watch_dp_sgd
from lmaudit.training.planting import add_canary_tokens, canary_texts, secret_only

EPSILON, DELTA, CLIPPING = 4.0, 1e-5, 1.0


def opacus_loop(base: Path, notes: list[str], folder: Path, out: Path, epochs: int, seed: int) -> tuple[str, float]:
    """The user's own DP-SGD loop over `notes` and the planted canaries, watched; the white-box verdict and the seconds
    per epoch. The model is saved into `out` with what was planted and the DP-SGD record."""
    from opacus import PrivacyEngine

    torch.manual_seed(seed)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    secret_ids = add_canary_tokens(model, tokenizer, folder)
    rows = [{"input_ids": tokenizer(text, truncation=True, max_length=128)["input_ids"]}
            for text in [*notes, *canary_texts(folder)]]
    collator = secret_only(DataCollatorForLanguageModeling(tokenizer, mlm=False), secret_ids)
    loader = torch.utils.data.DataLoader(rows, batch_size=BATCH, collate_fn=collator,
                                         generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    engine = PrivacyEngine(accountant="prv", secure_mode=False)
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=model.train(), optimizer=optimizer, data_loader=loader, target_epsilon=EPSILON, target_delta=DELTA,
        epochs=epochs, max_grad_norm=CLIPPING, noise_generator=torch.Generator().manual_seed(seed))
    watch = watch_dp_sgd(engine, optimizer, model, loader, delta=DELTA, batch_size=BATCH, seed=seed)
    steps_per_epoch = math.ceil(len(rows) / BATCH)
    schedule = get_linear_schedule_with_warmup(optimizer, steps_per_epoch, steps_per_epoch * epochs)
    started = time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            ids = batch["input_ids"]
            # One row of positions per sample: Opacus needs each sample's own gradient at the position embedding.
            positions = torch.arange(ids.shape[1]).expand_as(ids)
            logits = model(input_ids=ids, attention_mask=batch["attention_mask"], position_ids=positions).logits
            per_sample_losses(logits, batch["labels"], causal=True).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            schedule.step()
    seconds = (time.perf_counter() - started) / epochs
    model._module.save_pretrained(out)
    tokenizer.save_pretrained(out)
    CanaryCallback(folder).record(out)  # what was planted, as the Trainer callback records it
    return watch.finish(out)["verdict"], seconds


def lmaudit_dp(base: Path, notes: list[str], folder: Path, out: Path, epochs: int, seed: int) -> tuple[str, float]:
    """The same recipe through `lmaudit train clm --init-from --dp --target-epsilon 4 --audit-dp`; its verdict and
    seconds per epoch."""
    from lmaudit.metrics.dp_audit import white_box_audit
    from lmaudit.report.privacy_words import with_verdict

    training = plant(pd.DataFrame({"text": notes, "group_id": range(len(notes))}), folder)
    recipe = TrainingRecipe(epochs=epochs, seed=seed, init_from=base, learning_rate=LEARNING_RATE, batch_size=BATCH,
                            reserved_tokens=reserved_tokens(folder),
                            dp=DPSettings(None, max_grad_norm=CLIPPING, delta=DELTA, target_epsilon=EPSILON,
                                          gradient_canaries=2000))
    started = time.perf_counter()
    summary = train_language_model("clm", training["text"].tolist(), out, recipe)
    seconds = (time.perf_counter() - started) / epochs
    record_planted(out, folder)
    return with_verdict(white_box_audit(summary.dp))["verdict"], seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--canaries", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        notes, public, folder, base = prepared(root, args.canaries, args.epochs)
        for seed in range(args.seeds):
            for name, train in (("your Opacus loop, watched", opacus_loop), ("lmaudit train clm --dp", lmaudit_dp)):
                out = root / f"{train.__name__}-{seed}" / "model"
                verdict, seconds = train(base, notes, folder, out, args.epochs, seed)
                rows.append({"seed": seed, **bound_row(name, out, folder, f"{seconds:.2f}"), "white-box verdict": verdict})
    text = (f"{machine_line()} The base, notes and {args.canaries} new-token canaries of trainer_canaries.py; DP-SGD at "
            f"accountant epsilon {EPSILON:g} (PRV, delta {DELTA:g}), clipping {CLIPPING:g}, {args.epochs} epochs, expected "
            f"batch {BATCH}, learning rate {LEARNING_RATE:g}; bounds at delta 1e-05, 95% confidence.\n\n"
            + markdown_table(rows))
    publish(text, args.out, "opacus-canaries")


if __name__ == "__main__":
    main()
