"""A tiny causal LM trained on half of a small generated corpus, with the corpus split by patient into the audit's
roles: what the served-model tests audit, in process and through a server. Head size 32, which vLLM's CPU attention
needs (it refuses 16)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmaudit.data.synth import generate_notes
from lmaudit.models.tokenizer import train_tokenizer


def write_roles(folder: Path, n_patients: int = 24, seed: int = 5) -> dict[str, Path]:
    """members (half the patients), non-members and population (a quarter each), as CSV files in `folder`."""
    notes = generate_notes(n_patients=n_patients, seed=seed)
    patients = sorted(notes["group_id"].unique())
    half, three_quarters = len(patients) // 2, 3 * len(patients) // 4
    roles = {"members": patients[:half], "nonmembers": patients[half:three_quarters],
             "population": patients[three_quarters:]}
    files = {}
    for role, chosen in roles.items():
        files[role] = folder / f"{role}.csv"
        notes[notes["group_id"].isin(chosen)].to_csv(files[role], index=False)
    return files


def train_tiny_clm(folder: Path, members: pd.DataFrame, steps: int = 60, seed: int = 0, vocabulary_texts=None) -> Path:
    """A 2-layer GPT-2 (hidden 64, two heads of 32) trained `steps` steps on the members' texts, saved with its
    tokenizer (trained on `vocabulary_texts`, default the members') into `folder`."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    texts = members["text"].tolist()
    tokenizer = train_tokenizer(list(vocabulary_texts or texts), vocab_size=400, max_length=64)
    torch.manual_seed(seed)
    config = GPT2Config(n_embd=64, n_layer=2, n_head=2, n_positions=64, vocab_size=len(tokenizer),
                        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    model = GPT2LMHeadModel(config)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = tokenizer(texts, truncation=True, max_length=64, padding=True, return_tensors="pt")
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    model.train()
    for step in range(steps):
        rows = torch.arange(step * 16, step * 16 + 16) % len(texts)
        loss = model(input_ids=batch["input_ids"][rows], attention_mask=batch["attention_mask"][rows],
                     labels=labels[rows]).loss
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def audit_files(root: Path, n_patients: int, seed: int, steps: int) -> dict[str, Path]:
    """The roles' files (`write_roles`) and two checkpoints trained on the members: the target (`steps`, seed 0) and
    another (a quarter of the steps, seed 1), the checkpoint a wrong server might serve instead."""
    files = write_roles(root, n_patients=n_patients, seed=seed)
    members = pd.read_csv(files["members"])
    files["target"] = train_tiny_clm(root / "target", members, steps=steps, seed=0)
    files["other"] = train_tiny_clm(root / "other", members, steps=steps // 4, seed=1)
    return files
