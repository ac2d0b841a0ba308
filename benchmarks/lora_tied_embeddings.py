"""A user's trial of docs/canaries.md's Trainer + LoRA recipe on GPT-2, whose input and output embeddings are tied: a
2-layer GPT-2 (width 64) with a byte-level BPE tokenizer trained by the `tokenizers` library (vocab_size 2,000) on 30
patients' generated notes, 500 new-token canaries, `modules_to_save=["wte", "lm_head"]`, the `secret_only` collator
and Trainer's defaults (3 epochs, learning rate 5e-5, batch 8), the merged model saved as the recipe saves it and
audited by `lmaudit canaries audit`'s function. It prints the right guesses, the planted and unplanted canaries' mean
secret log-probability, the saved configuration's tie_word_embeddings and the library versions.

The libraries decide whether the trained output rows survive saving and loading; to measure older ones, install them
beside the project's and put them first (no other change):

    pip install --target /tmp/old --no-deps transformers==4.57.1 peft==0.17.1 tokenizers==0.22.1 \
        "huggingface_hub<1.0" accelerate==1.10.1 datasets==4.0.0
    PYTHONPATH=/tmp/old:src python benchmarks/lora_tied_embeddings.py --out /tmp/trial [--no-callback]

`--no-callback` trains without `CanaryCallback` (so without its untying of the configuration): the recipe as it ran
before lmaudit untied it; where the loader then replaces the saved output rows, the audit is refused and the line says
why. About 15 seconds alone on 2 cores.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def tokenizer_of(texts: list[str]):
    """A byte-level BPE tokenizer trained by `tokenizers` on `texts`, as a user builds one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


def trial(out: Path, callback: bool) -> dict:
    """Train and save by the recipe, audit; the numbers printed."""
    import peft
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, DataCollatorForLanguageModeling, GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from lmaudit.canaries.audit import audit_canaries
    from lmaudit.canaries.make import KEY_FILE, make_canaries
    from lmaudit.config import AuditConfig
    from lmaudit.data.corpus import read_table
    from lmaudit.data.synth import generate_notes
    from lmaudit.errors import InputError
    from lmaudit.training import CanaryCallback, add_canary_tokens, canary_texts, secret_only

    notes = generate_notes(n_patients=30, seed=0)["text"].tolist()
    tokenizer = tokenizer_of(notes)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_layer=2, n_embd=64, n_head=2, n_positions=512))
    make_canaries(out / "canaries", "new_token", count=500, seed=0)
    secret_ids = add_canary_tokens(model, tokenizer, out / "canaries")
    model = get_peft_model(model, LoraConfig(r=8, target_modules=["c_attn"], modules_to_save=["wte", "lm_head"]))
    rows = [{"input_ids": tokenizer(t, truncation=True, max_length=512)["input_ids"]}
            for t in notes + canary_texts(out / "canaries")]
    collator = secret_only(DataCollatorForLanguageModeling(tokenizer, mlm=False), secret_ids)
    Trainer(model=model, args=TrainingArguments(output_dir=str(out / "run"), report_to=[], save_strategy="no"),
            train_dataset=rows, data_collator=collator, processing_class=tokenizer,
            callbacks=[CanaryCallback(out / "canaries")] if callback else []).train()
    model.merge_and_unload().save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    CanaryCallback(out / "canaries").record(out / "model")
    versions = {"transformers": transformers.__version__, "peft": peft.__version__, "callback": callback,
                "tokens": len(tokenizer) - 500,
                "saved_tie_word_embeddings": AutoConfig.from_pretrained(out / "model").tie_word_embeddings}
    try:
        audit = audit_canaries(AuditConfig(target=str(out / "model"), out=str(out / "audit")), out / "canaries")
    except InputError as refused:  # the loader's check of the saved output embeddings
        return versions | {"refused": str(refused)}
    key = read_table(out / "canaries" / KEY_FILE)
    scores = audit.scores.merge(key, on="sample_id")
    return versions | {"right": audit.bound.guesses.correct, "guesses": audit.bound.guesses.guesses,
            "planted_mean": float(scores.loc[scores.included, "score"].mean()),
            "unplanted_mean": float(scores.loc[~scores.included, "score"].mean()),
            "rank_auc": audit.report["validity"]["rank_auc"]}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a new folder for the trial's files")
    parser.add_argument("--no-callback", action="store_true", help="train without CanaryCallback")
    options = parser.parse_args()
    print(json.dumps(trial(options.out, not options.no_callback)))
