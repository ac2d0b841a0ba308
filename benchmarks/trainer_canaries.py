"""What new-token canaries prove when planted in a user's own transformers `Trainer` run (`lmaudit.training`), against
the same canaries through `lmaudit train`: a tiny causal LM base (GPT-2, 2 layers, width 64) is trained by lmaudit on 30
other patients' generated notes; it is then fine-tuned on 30 patients' notes with m new-token canaries planted (each
with probability 1/2), by `Trainer` with `CanaryCallback`, (1) in full, (2) with LoRA adapters and the embeddings
trainable (`modules_to_save=["wte", "lm_head"]`), (3) with LoRA and the embeddings frozen, the run the pre-flight stops, here
trained without the callback to measure what its audit would have said; (4) by TRL's `SFTTrainer` on prompt-completion
rows (each note's first words the prompt) with its completion-only loss, the canaries in the completion (`plant_canaries`)
and, the run the pre-flight stops, in the prompt; and (5) by `lmaudit train clm --init-from` in full, the reference.
Each saved model (LoRA merged) is audited by `lmaudit canaries audit` (Steinke et al.'s one-run bound and the f-DP one,
delta 1e-5, 95% confidence). The callback's overhead: the seconds its hooks take in the full Trainer run, against the
run's (timing whole runs with and without it measures the machine's noise, several times larger).

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
from lmaudit.training.checkpoint_audit import CheckpointAudit, read_audits
from lmaudit.training.planting import add_canary_tokens, canary_texts, plant_canaries, secret_only

PATIENTS, SEED, LEARNING_RATE, BATCH = 30, 0, 2e-3, 32
PROMPT_WORDS = 8  # of each note, the prompt of its SFT row


def fine_tuned(base: Path, notes: list[str], folder: Path, out: Path, epochs: int, case: str, checked: bool,
               audited: CheckpointAudit | None = None, timed: bool = False) -> float:
    """Fine-tune `base` by Trainer on `notes` with `folder`'s canaries planted (`case`: full, lora-rows, lora-frozen),
    with the callback when `checked` (and, given `audited`, a checkpoint audit at each of 5 saves); save the model
    (LoRA merged) into `out`; seconds per epoch."""
    model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    secret_ids = add_canary_tokens(model, tokenizer, folder)
    rows = [{"input_ids": tokenizer(text, truncation=True, max_length=128)["input_ids"]}
            for text in [*notes, *canary_texts(folder)]]
    if case != "full":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn"], fan_in_fan_out=True,
                                                 modules_to_save=["wte", "lm_head"] if case == "lora-rows" else None))
    saves = {"save_strategy": "steps", "save_only_model": True,
             "save_steps": epochs * -(-len(rows) // BATCH) // 5} if audited else {"save_strategy": "no"}
    arguments = TrainingArguments(output_dir=str(out.parent / "trainer"), num_train_epochs=epochs, seed=SEED,
                                  per_device_train_batch_size=BATCH, learning_rate=LEARNING_RATE, report_to=[],
                                  logging_strategy="no", use_cpu=True, **saves)
    callback = (TimedCanaryCallback if timed else CanaryCallback)(folder)
    callbacks = ([callback] if checked else []) + ([audited] if audited else [])
    trainer = Trainer(model=model, args=arguments, train_dataset=rows, processing_class=tokenizer, callbacks=callbacks,
                      data_collator=secret_only(DataCollatorForLanguageModeling(tokenizer, mlm=False), secret_ids))
    started = time.perf_counter()
    trainer.train()
    seconds = (time.perf_counter() - started) / epochs
    (model.merge_and_unload() if case != "full" else model).save_pretrained(out)
    tokenizer.save_pretrained(out)
    CanaryCallback(folder).record(out)
    return seconds


def sft_fine_tuned(base: Path, notes: list[str], folder: Path, out: Path, epochs: int, canaries_in: str) -> float:
    """Fine-tune `base` by TRL's SFTTrainer (completion-only loss) on prompt-completion rows of `notes` with `folder`'s
    canaries planted in the completion (`canaries_in`: completion) or the prompt; save into `out`; seconds per epoch."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    tokenizer.eos_token = tokenizer.eos_token or tokenizer.sep_token  # TRL ends each completion with it
    add_canary_tokens(model, tokenizer, folder)
    rows = [{"prompt": " ".join(note.split()[:PROMPT_WORDS]), "completion": " " + " ".join(note.split()[PROMPT_WORDS:])}
            for note in notes]
    if canaries_in == "completion":
        rows = plant_canaries(rows, folder)
    else:  # the mistake: the whole canary in the prompt, which the completion-only loss never reads
        rows += [{"prompt": text, "completion": " noted ."} for text in canary_texts(folder)]
    arguments = SFTConfig(output_dir=str(out.parent / "trainer"), num_train_epochs=epochs, seed=SEED, max_length=128,
                          per_device_train_batch_size=BATCH, learning_rate=LEARNING_RATE, report_to=[],
                          save_strategy="no", logging_strategy="no", use_cpu=True)
    trainer = SFTTrainer(model=model, args=arguments, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                         callbacks=[CanaryCallback(folder)])
    started = time.perf_counter()
    trainer.train()
    seconds = (time.perf_counter() - started) / epochs
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    CanaryCallback(folder).record(out)
    return seconds


def stopped(run) -> str:
    """'stopped before step 1: <check>' if `run()` is stopped by the pre-flight, else 'not stopped'."""
    try:
        run()
    except CanaryCheckFailed as error:
        return f"stopped before step 1: {str(error).split(':')[0]}"
    return "not stopped"


class TimedCanaryCallback(CanaryCallback):
    """CanaryCallback with the seconds spent in its hooks summed (it has none per step: its cost is these)."""

    seconds = 0.0

    def __getattribute__(self, name: str):
        hook = super().__getattribute__(name)
        if not name.startswith("on_"):
            return hook

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return hook(*args, **kwargs)
            finally:
                TimedCanaryCallback.seconds += time.perf_counter() - started

        return timed


def overhead(base: Path, notes: list[str], folder: Path, root: Path, epochs: int) -> str:
    """The callback's cost: the seconds its hooks take in the full Trainer fine-tune, against the run's."""
    TimedCanaryCallback.seconds = 0.0
    per_epoch = fine_tuned(base, notes, folder, root / "overhead" / "model", epochs, "full", True, timed=True)
    steps = epochs * -(-(len(notes) + len(canary_texts(folder))) // BATCH)
    share = TimedCanaryCallback.seconds / (per_epoch * epochs)
    return (f"The callback's overhead: its hooks took {TimedCanaryCallback.seconds:.3f} s of the full Trainer fine-tune's "
            f"{per_epoch * epochs:.1f} s ({share:.2%}; {steps} steps, {TimedCanaryCallback.seconds / steps * 1e3:.2f} ms a "
            "step); it has no hook per step, so its cost is the scan before step 1 and one comparison per epoch, "
            "and falls per step as a run grows.")


def bound_row(name: str, model: Path, folder: Path, seconds: float | str) -> dict:
    """Audit the canaries of `folder` in `model`: one table row."""
    audit = audit_canaries(AuditConfig(target=str(model), out=str(model.parent / "audit")), folder, candidates=0)
    return {"fine-tune": name, "Steinke epsilon": f"{audit.bound.epsilon_lower_bound:.2f}",
            "right / guesses": f"{audit.bound.guesses.correct} / {audit.bound.guesses.guesses}",
            "f-DP epsilon": f"{audit.gaussian.epsilon_lower_bound:.2f}", "seconds per epoch": seconds}


def prepared(root: Path, canaries: int, epochs: int) -> tuple[list[str], list[str], Path, Path]:
    """The fine-tune's notes, the base's notes, the canary folder and the base model (trained by lmaudit, the canaries'
    tokens reserved), made under `root`."""
    notes = generate_notes(PATIENTS, SEED)["text"].tolist()
    public = generate_notes(PATIENTS, SEED + 7)["text"].tolist()
    folder = root / "canaries"
    make_canaries(folder, "new_token", canaries, seed=SEED + 1)
    base = root / "base"
    train_language_model("clm", public, base, TrainingRecipe(epochs=epochs, seed=SEED + 2,
                                                              reserved_tokens=reserved_tokens(folder)))
    return notes, public, folder, base


def leakage_curve(base: Path, notes: list[str], folder: Path, root: Path, epochs: int) -> str:
    """The full Trainer fine-tune again, with `CheckpointAudit` at 5 saves (the notes' patients against 30 other
    patients' notes, and the canaries): its curve as a table."""
    population, members = generate_notes(PATIENTS, SEED + 13), generate_notes(PATIENTS, SEED)
    assert members["text"].tolist() == notes
    # The two generations number their patients alike: told apart by role.
    audited = CheckpointAudit(notes, population["text"].tolist(), canaries=folder,
                              member_groups=[f"member-{g}" for g in members["group_id"]],
                              population_groups=[f"population-{g}" for g in population["group_id"]])
    fine_tuned(base, notes, folder, root / "curve" / "model", epochs, "full", checked=True, audited=audited)
    entries = read_audits(root / "curve" / "trainer")
    return ("Leakage over the full Trainer fine-tune (`CheckpointAudit`, the loss attack on its notes against "
            f"{len(population)} notes of {PATIENTS} other patients, and the canaries' bound):\n\n" + markdown_table([
                {"epoch": f"{e['epoch']:.1f}", "AUC": f"{e['auc']:.3f} [{e['auc_low']:.3f}, {e['auc_high']:.3f}]",
                 "TPR at 1% FPR": f"{e['tpr_at_1pct_fpr']:.3f}", "canaries' Steinke epsilon":
                 f"{e['canary_epsilon_lower_bound']:.2f}"} for e in entries]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--canaries", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        notes, public, folder, base = prepared(root, args.canaries, args.epochs)
        for case, name in (("full", "Trainer, full"), ("lora-rows", "Trainer, LoRA, embeddings trainable")):
            seconds = fine_tuned(base, notes, folder, root / case / "model", args.epochs, case, checked=True)
            rows.append(bound_row(name, root / case / "model", folder, f"{seconds:.2f}"))
        refused = stopped(lambda: fine_tuned(base, notes, folder, root / "refused" / "model", 1, "lora-frozen", True))
        seconds = fine_tuned(base, notes, folder, root / "lora-frozen" / "model", args.epochs, "lora-frozen",
                             checked=False)
        rows.append(bound_row(f"Trainer, LoRA, embeddings frozen, no pre-flight (with it: {refused})",
                              root / "lora-frozen" / "model", folder, f"{seconds:.2f}"))
        seconds = sft_fine_tuned(base, notes, folder, root / "sft" / "model", args.epochs, "completion")
        refused = stopped(lambda: sft_fine_tuned(base, notes, folder, root / "sft-prompt" / "model", 1, "prompt"))
        rows.append(bound_row(f"SFTTrainer, completion-only loss, canaries in the completion (in the prompt: {refused})",
                              root / "sft" / "model", folder, f"{seconds:.2f}"))
        training = plant(pd.DataFrame({"text": notes, "group_id": range(len(notes))}), folder)
        recipe = TrainingRecipe(epochs=args.epochs, seed=SEED, init_from=base, learning_rate=LEARNING_RATE,
                                reserved_tokens=reserved_tokens(folder))
        started = time.perf_counter()
        train_language_model("clm", training["text"].tolist(), root / "lmaudit" / "model", recipe)
        record_planted(root / "lmaudit" / "model", folder)
        rows.append(bound_row("lmaudit train clm --init-from, full", root / "lmaudit" / "model", folder,
                              f"{(time.perf_counter() - started) / args.epochs:.2f}"))
        curve = leakage_curve(base, notes, folder, root, args.epochs)
        cost = overhead(base, notes, folder, root, args.epochs)
    text = (f"{machine_line()} A base trained on {len(public)} notes of {PATIENTS} other patients; fine-tuned on "
            f"{len(notes)} notes of {PATIENTS} patients with {args.canaries} new-token canaries (each planted with "
            f"probability 1/2), {args.epochs} epochs, batch {BATCH}, learning rate {LEARNING_RATE:g}, seed {SEED}; "
            "bounds at delta 1e-05, 95% confidence.\n\n" + markdown_table(rows) + "\n\n" + curve + "\n\n" + cost)
    publish(text, args.out, "trainer-canaries")


if __name__ == "__main__":
    main()
