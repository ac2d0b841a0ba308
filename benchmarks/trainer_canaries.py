"""What new-token canaries prove when planted in a user's own transformers `Trainer` run (`lmaudit.training`), against
the same canaries through `lmaudit train`: a tiny causal LM base (GPT-2, 2 layers, width 64) is trained by lmaudit on 30
other patients' generated notes; it is then fine-tuned on 30 patients' notes with m new-token canaries planted (each
with probability 1/2), by `Trainer` with `CanaryCallback`, (1) in full, (2) with LoRA adapters and the embeddings
trainable (`modules_to_save=["wte", "lm_head"]`), (3) with LoRA and the embeddings frozen, the run the pre-flight stops, here
trained without the callback to measure what its audit would have said; and (4) by `lmaudit train clm --init-from` in
full, the reference. Each saved model (LoRA merged) is audited by `lmaudit canaries audit` (Steinke et al.'s one-run
bound and the f-DP one, delta 1e-5, 95% confidence), and each Trainer run's seconds per epoch are timed with and without
the callback (its overhead).

    python benchmarks/trainer_canaries.py [--out docs/canaries.md] [--canaries 500] [--epochs 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
from markdown_section import machine_line, markdown_table, publish
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments

from lmaudit.canaries.audit import audit_canaries
from lmaudit.canaries.make import make_canaries, plant, record_planted, reserved_tokens
from lmaudit.config import AuditConfig
from lmaudit.data.synth import generate_notes
from lmaudit.models.recipe import TrainingRecipe
from lmaudit.models.train import train_language_model
from lmaudit.training.callback import CanaryCallback, CanaryCheckFailed
from lmaudit.training.planting import add_canary_tokens, canary_texts, secret_only

PATIENTS, SEED, LEARNING_RATE, BATCH = 30, 0, 2e-3, 32


def fine_tuned(base: Path, notes: list[str], folder: Path, out: Path, epochs: int, case: str, checked: bool) -> float:
    """Fine-tune `base` by Trainer on `notes` with `folder`'s canaries planted (`case`: full, lora-rows, lora-frozen),
    with the callback when `checked`; save the model (LoRA merged) into `out`; seconds per epoch."""
    model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    secret_ids = add_canary_tokens(model, tokenizer, folder)
    rows = [{"input_ids": tokenizer(text, truncation=True, max_length=128)["input_ids"]}
            for text in [*notes, *canary_texts(folder)]]
    if case != "full":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn"], fan_in_fan_out=True,
                                                 modules_to_save=["wte", "lm_head"] if case == "lora-rows" else None))
    arguments = TrainingArguments(output_dir=str(out.parent / "trainer"), num_train_epochs=epochs, seed=SEED,
                                  per_device_train_batch_size=BATCH, learning_rate=LEARNING_RATE, report_to=[],
                                  save_strategy="no", logging_strategy="no", use_cpu=True)
    callbacks = [CanaryCallback(folder, secret_ids)] if checked else []
    trainer = Trainer(model=model, args=arguments, train_dataset=rows, processing_class=tokenizer, callbacks=callbacks,
                      data_collator=secret_only(DataCollatorForLanguageModeling(tokenizer, mlm=False), secret_ids))
    started = time.perf_counter()
    trainer.train()
    seconds = (time.perf_counter() - started) / epochs
    (model.merge_and_unload() if case != "full" else model).save_pretrained(out)
    tokenizer.save_pretrained(out)
    CanaryCallback(folder, secret_ids).record(out)
    return seconds


def bound_row(name: str, model: Path, folder: Path, seconds: float | str) -> dict:
    """Audit the canaries of `folder` in `model`: one table row."""
    audit = audit_canaries(AuditConfig(target=str(model), out=str(model.parent / "audit")), folder, candidates=0)
    return {"fine-tune": name, "Steinke epsilon": f"{audit.bound.epsilon_lower_bound:.2f}",
            "right / guesses": f"{audit.bound.guesses.correct} / {audit.bound.guesses.guesses}",
            "f-DP epsilon": f"{audit.gaussian.epsilon_lower_bound:.2f}", "seconds per epoch": seconds}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--canaries", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    notes = generate_notes(PATIENTS, SEED)["text"].tolist()
    public = generate_notes(PATIENTS, SEED + 7)["text"].tolist()
    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        folder = root / "canaries"
        make_canaries(folder, "new_token", args.canaries, seed=SEED + 1)
        base = root / "base"
        train_language_model("clm", public, base, TrainingRecipe(epochs=args.epochs, seed=SEED + 2,
                                                                  reserved_tokens=reserved_tokens(folder)))
        for case, name in (("full", "Trainer, full"), ("lora-rows", "Trainer, LoRA, embeddings trainable")):
            seconds = fine_tuned(base, notes, folder, root / case / "model", args.epochs, case, checked=True)
            plain = fine_tuned(base, notes, folder, root / f"{case}-plain" / "model", args.epochs, case, checked=False)
            rows.append(bound_row(name, root / case / "model", folder,
                                  f"{seconds:.2f} (without the callback {plain:.2f})"))
        try:
            fine_tuned(base, notes, folder, root / "refused" / "model", 1, "lora-frozen", checked=True)
            stopped = "not stopped"
        except CanaryCheckFailed as error:
            stopped = f"stopped before step 1: {str(error).split(':')[0]}"
        seconds = fine_tuned(base, notes, folder, root / "lora-frozen" / "model", args.epochs, "lora-frozen",
                             checked=False)
        rows.append(bound_row(f"Trainer, LoRA, embeddings frozen, no pre-flight (with it: {stopped})",
                              root / "lora-frozen" / "model", folder, f"{seconds:.2f}"))
        training = plant(pd.DataFrame({"text": notes, "group_id": range(len(notes))}), folder)
        recipe = TrainingRecipe(epochs=args.epochs, seed=SEED, init_from=base, learning_rate=LEARNING_RATE,
                                reserved_tokens=reserved_tokens(folder))
        started = time.perf_counter()
        train_language_model("clm", training["text"].tolist(), root / "lmaudit" / "model", recipe)
        record_planted(root / "lmaudit" / "model", folder)
        rows.append(bound_row("lmaudit train clm --init-from, full", root / "lmaudit" / "model", folder,
                              f"{(time.perf_counter() - started) / args.epochs:.2f}"))
    text = (f"{machine_line()} A base trained on {len(public)} notes of {PATIENTS} other patients; fine-tuned on "
            f"{len(notes)} notes of {PATIENTS} patients with {args.canaries} new-token canaries (each planted with "
            f"probability 1/2), {args.epochs} epochs, batch {BATCH}, learning rate {LEARNING_RATE:g}, seed {SEED}; "
            "bounds at delta 1e-05, 95% confidence.\n\n" + markdown_table(rows))
    publish(text, args.out, "trainer-canaries")


if __name__ == "__main__":
    main()
