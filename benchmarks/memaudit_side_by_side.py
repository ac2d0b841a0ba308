"""lmaudit's memorisation curve against memaudit 0.2.0's on the same fine-tune, each tool's canaries planted as its
README recommends, at a similar row budget, in one run.

lmaudit's tiny GPT-2 base is trained by lmaudit on one half of the generated notes; a plain transformers
`Trainer` fine-tunes it with LoRA (r=8 on attention and MLP, `fan_in_fan_out`, the embeddings frozen: the recipe as
most are written, unchanged by either tool) on notes of other patients, with both tools' canaries planted in the same
training set:
- memaudit: `generate_canaries(tokenizer, n=32, n_controls=100, family="high_ppl", repetitions=(1, 4, 16),
  model=base)`, `inject(..., fmt="auto")` and `MemorizationAuditCallback(ref="auto")` (the base by
  `disable_adapter()`), which writes memaudit-report.json at the end of training;
- lmaudit: `canaries make --design words --vocabulary base --n 250 --repeat 1,4,16` (16 random words of the base's
  vocabulary), or `--design secret` (8-digit numbers after a shared sentence), `plant_canaries` and `CanaryCallback`,
  then `lmaudit canaries audit` of the saved adapter with the base as reference (for `secret`, 1,000 random secrets
  for exposure); one run per design, memaudit's canaries planted in each.
Each run reports, per repetition count, each tool's TPR at 1% FPR with its 95% interval and its AUC. The target
(issue 65): lmaudit's 16-copy tier's lower bound above 1% wherever memaudit's is, and never fewer found.

memaudit is installed for this benchmark only, never in lmaudit's environment:

    .venv/bin/pip install --no-deps --target benchmarks/.memaudit memaudit==0.2.0
    PYTHONPATH=benchmarks/.memaudit .venv/bin/python benchmarks/memaudit_side_by_side.py [--out docs/canaries.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from markdown_section import machine_line, markdown_table, publish
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments

from lmaudit.canaries.audit import audit_canaries
from lmaudit.canaries.make import make_canaries
from lmaudit.canaries.settings import SecretShape
from lmaudit.config import AuditConfig
from lmaudit.data.synth import generate_notes
from lmaudit.models.recipe import TrainingRecipe
from lmaudit.models.train import train_language_model
from lmaudit.training.callback import CanaryCallback
from lmaudit.training.planting import plant_canaries

BATCH, LEARNING_RATE, MAX_LENGTH = 16, 2e-3, 96


def base_model(root: Path, patients: int, epochs: int, seed: int) -> tuple[Path, list[str]]:
    """The base, trained on half of the patients' notes, and the other half's notes (the fine-tune's)."""
    notes = generate_notes(n_patients=patients, seed=seed)
    patients_of_base = set(notes["group_id"].drop_duplicates().iloc[: patients // 2])
    base_texts = notes.loc[notes["group_id"].isin(patients_of_base), "text"].tolist()
    train_language_model("clm", base_texts, root / "base", TrainingRecipe(epochs=epochs, seed=seed))
    return root / "base", notes.loc[~notes["group_id"].isin(patients_of_base), "text"].tolist()


def fine_tune(base: Path, texts: list[str], root: Path, epochs: int, seed: int) -> tuple[Path, dict]:
    """Both tools' canaries planted in one LoRA fine-tune of `base`; the adapter's folder and memaudit's report."""
    from datasets import Dataset
    from memaudit import MemorizationAuditCallback, generate_canaries, inject
    from peft import LoraConfig, get_peft_model

    model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    planted = plant_canaries(Dataset.from_list([{"text": text} for text in texts]), root / "lmaudit-canaries")
    theirs = generate_canaries(tokenizer, n=32, n_controls=100, family="high_ppl", repetitions=(1, 4, 16), seed=seed,
                               model=model)
    planted, manifest = inject(planted, theirs, fmt="auto", seed=seed)
    rows = planted.map(lambda row: tokenizer(row["text"], truncation=True, max_length=MAX_LENGTH),
                       remove_columns=planted.column_names)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn", "c_proj", "c_fc"],
                                             fan_in_fan_out=True))
    out = root / "adapter"
    arguments = TrainingArguments(output_dir=str(out), num_train_epochs=epochs, seed=seed, report_to=[],
                                  per_device_train_batch_size=BATCH, learning_rate=LEARNING_RATE,
                                  save_strategy="no", logging_strategy="no", use_cpu=True)
    trainer = Trainer(model=model, args=arguments, train_dataset=rows, processing_class=tokenizer,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
                      callbacks=[CanaryCallback(root / "lmaudit-canaries")])
    trainer.add_callback(MemorizationAuditCallback(trainer=trainer, manifest=manifest, ref="auto"))
    trainer.train()
    trainer.save_model(str(out))
    return out, json.loads((out / "memaudit-report.json").read_text())


def interval_text(value: float | None, interval) -> str:
    """'0.312 [0.200, 0.444]', or n/a."""
    return "n/a" if value is None or value != value else f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def run(root: Path, seed: int, patients: int, base_epochs: int, epochs: int, design: str) -> list[dict]:
    """One seed: the base, one fine-tune with both tools' canaries (lmaudit's of `design`), both audits; a row per
    repetition count."""
    base, texts = base_model(root, patients, base_epochs, seed)
    make_canaries(root / "lmaudit-canaries", design, 250, seed=seed, shape=SecretShape(vocabulary=str(base)),
                  repeats=(1, 4, 16))
    adapter, theirs = fine_tune(base, texts, root, epochs, seed)
    config = AuditConfig(target=str(base), adapter=str(adapter), reference=[str(base)], out=str(root / "audit"))
    ours = audit_canaries(config, root / "lmaudit-canaries", candidates=1000 if design == "secret" else 0)
    ours = ours.report["memorisation"]
    membership = theirs["membership"]
    rows = []
    for tier in ours["tiers"]:
        their = membership["by_repetition"].get(str(tier["repeats"]), {})
        rows.append({"seed": seed, "epochs": epochs, "lmaudit design": design, "copies": tier["repeats"],
                     "memaudit detected": f"{their.get('detected')} of {their.get('n')}",
                     "memaudit TPR at 1% FPR [95%]": interval_text(their.get("tpr"), (their.get("ci_low"),
                                                                                      their.get("ci_high"))),
                     "memaudit AUC (pooled)": f"{membership['auc']:.3f}" if membership.get("auc") is not None else "n/a",
                     "lmaudit TPR at 1% FPR [95%]": interval_text(tier["tpr"], tier["tpr_ci"]),
                     "lmaudit AUC": f"{tier['auc']:.3f}", "lmaudit memorised (Holm 5%)": "yes" if tier["memorised"] else "no",
                     "lmaudit given back": f"{tier['given_back']} of {tier['planted']}"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--patients", type=int, default=120)
    parser.add_argument("--base-epochs", type=int, default=10)
    parser.add_argument("--epochs", default="1,10", help="fine-tune epochs, one run each")
    parser.add_argument("--designs", default="words,secret", help="lmaudit's canary designs, one run each")
    parser.add_argument("--out", type=Path, help="markdown file whose section to replace (docs/canaries.md)")
    arguments = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    started, rows = time.time(), []
    for seed in range(arguments.seeds):
        for epochs in map(int, arguments.epochs.split(",")):
            for design in arguments.designs.split(","):
                with tempfile.TemporaryDirectory() as folder:
                    rows += run(Path(folder), seed, arguments.patients, arguments.base_epochs, epochs, design)
                    print(rows[-1], flush=True)
    command = (f"PYTHONPATH=benchmarks/.memaudit python benchmarks/memaudit_side_by_side.py --seeds {arguments.seeds} "
               f"--patients {arguments.patients} --base-epochs {arguments.base_epochs} --epochs {arguments.epochs} "
               f"--designs {arguments.designs}")
    header = f"`{command}` at {commit} ({machine_line()} {time.time() - started:.0f} s in all).\n\n"
    publish(header + markdown_table(rows), arguments.out, "memaudit-side-by-side")


if __name__ == "__main__":
    main()
