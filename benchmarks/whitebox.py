"""Benchmark the white-box features per sample, next to the black-box MLM energy, in one run.

For each model of benchmarks/scoring.py (random weights) and sequence length (32, 128 tokens), on
the same sequences:
  - energy: the black-box signal (K = 10 masks, fp32), for scale;
  - attention: layers x heads x 4 concentration statistics (one eager forward pass);
  - gradient (batched): per-tensor squared gradient norms of the k = 1 MLM loss for a batch of
    samples from one backward pass, as lmaudit computes them (signals/gradnorms.py);
  - gradient (vmap): the same from torch.func.vmap over per-sample gradients (materialised);
  - gradient (loop): the same from one forward and backward pass per sample.
It reports milliseconds per sample, the speed-ups, and the largest difference between the batched
and the loop numbers, relative to the sample's largest norm.

    python benchmarks/whitebox.py [--out docs/performance.md] [--quick]
"""

from __future__ import annotations

import argparse
import time
from datetime import date
from pathlib import Path

import numpy as np
import torch
from markdown_section import replace_section
from scoring import (
    MASK_TOKEN,
    MODELS,
    build_model,
    machine_description,
    patterns_for,
    samples_of_length,
)

from lmaudit.signals.base import exact_length_groups
from lmaudit.signals.mlm import score_masked_copies
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.whitebox import attention_features_of, gradient_features_of

SETTINGS = SignalSettings(seed=0)


def loop_gradient_norms(model, samples) -> np.ndarray:
    """One forward and backward pass per sample with the model's own masked-LM loss (the obvious way)."""
    from lmaudit.signals.masks import random_masks

    rows = []
    for sample in samples:
        positions = sample.content_positions[random_masks(sample.sample_id, len(sample.content_positions), 1, SETTINGS.seed)[0]]
        ids = torch.from_numpy(sample.input_ids)[None]
        labels = torch.full_like(ids, -100)
        labels[0, positions] = ids[0, positions]
        inputs = ids.clone()
        inputs[0, positions] = MASK_TOKEN
        model.zero_grad(set_to_none=True)
        model(input_ids=inputs, labels=labels).loss.backward()
        rows.append([p.grad.double().pow(2).sum().item() if p.grad is not None else 0.0 for p in model.parameters()])
    return np.array(rows)


def vmap_gradient_norms(model, samples) -> np.ndarray:
    """Per-sample gradients materialised by torch.func.vmap over grad (exact-length batches), then their norms."""
    from torch.func import functional_call, grad, vmap

    from lmaudit.signals.masks import random_masks

    params = {n: p.detach() for n, p in model.named_parameters()}
    embedding = next(n for n, p in model.named_parameters() if p is model.get_input_embeddings().weight)

    def loss(p, inputs, positions, tokens):
        # inputs_embeds: transformers' input_ids checks are data-dependent control flow that vmap cannot trace
        embeds = torch.nn.functional.embedding(inputs, p[embedding])[None]
        logits = functional_call(model, p, args=(), kwargs={"inputs_embeds": embeds}).logits[0]
        return -torch.log_softmax(logits[positions], -1).gather(1, tokens[:, None]).mean()

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0, 0))
    rows = np.zeros((len(samples), len(params)))
    for group in exact_length_groups(samples):
        for start in range(0, len(group), 8):
            batch = group[start : start + 8]
            ids = torch.from_numpy(np.stack([samples[i].input_ids for i in batch]))
            positions = torch.from_numpy(np.stack([samples[i].content_positions[random_masks(
                samples[i].sample_id, len(samples[i].content_positions), 1, SETTINGS.seed)[0]] for i in batch]))
            grads = per_sample(params, ids.scatter(1, positions, MASK_TOKEN), positions, ids.gather(1, positions))
            rows[batch] = torch.stack([g.flatten(1).double().pow(2).sum(1) for g in grads.values()], 1).numpy()
    return rows


def per_sample_ms(function, count: int) -> tuple[float, object]:
    start = time.perf_counter()
    value = function()
    return 1000 * (time.perf_counter() - start) / count, value


def run_case(name: str, length: int, count: int) -> dict:
    model = build_model(name)
    samples = samples_of_length(length, count, MODELS[name][4])
    patterns = patterns_for(samples)
    gradient_features_of(model, samples[:1], SETTINGS, MASK_TOKEN)  # warm-up (also switches to eager attention)
    energy_ms, _ = per_sample_ms(lambda: score_masked_copies(model, MASK_TOKEN, samples, patterns), count)
    attention_ms, _ = per_sample_ms(lambda: attention_features_of(model, samples), count)
    batched_ms, batched = per_sample_ms(lambda: gradient_features_of(model, samples, SETTINGS, MASK_TOKEN), count)
    vmap_ms, _ = per_sample_ms(lambda: vmap_gradient_norms(model, samples), count)
    loop_ms, looped = per_sample_ms(lambda: loop_gradient_norms(model, samples), count)
    model.zero_grad(set_to_none=True)
    # Relative to each sample's largest norm: some tensors (key biases) have a true gradient of zero, so float noise.
    relative = np.max(np.abs(batched - looped) / looped.max(axis=1, keepdims=True))
    return {"model": name, "tokens": length, "samples": count, "energy_ms": energy_ms, "attention_ms": attention_ms,
            "batched_ms": batched_ms, "vmap_ms": vmap_ms, "loop_ms": loop_ms, "max_relative_difference": float(relative),
            "features": (MODELS[name][0] * MODELS[name][2] * 4, len(list(model.parameters())))}


def markdown(rows: list[dict]) -> str:
    lines = [
        f"Machine: {machine_description()}",
        "",
        "| model | tokens | samples | attention features | gradient features | energy K=10 (ms) | attention (ms) | "
        "gradient, batched (ms) | gradient, vmap (ms) | gradient, loop (ms) | loop / batched | gradient / energy | "
        "max diff batched vs loop (relative) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['tokens']} | {r['samples']} | {r['features'][0]} | {r['features'][1]} | {r['energy_ms']:.1f} | "
            f"{r['attention_ms']:.1f} | {r['batched_ms']:.1f} | {r['vmap_ms']:.1f} | {r['loop_ms']:.1f} | "
            f"{r['loop_ms'] / r['batched_ms']:.2f}x | {r['batched_ms'] / r['energy_ms']:.2f}x | {r['max_relative_difference']:.1e} |"
        )
    lines += ["", f"(Table written by benchmarks/whitebox.py on {date.today().isoformat()}; milliseconds per sample.)"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="Write the table into this markdown file.")
    parser.add_argument("--quick", action="store_true", help="Fewer samples (a smoke run, not for the record).")
    args = parser.parse_args()
    cases = [("tiny 2x64", 32, 64), ("tiny 2x64", 128, 32), ("4x256", 32, 32), ("4x256", 128, 16),
             ("BERT-base 12x768", 32, 8), ("BERT-base 12x768", 128, 4)]
    rows = []
    for name, length, count in cases:
        rows.append(run_case(name, length, max(2, count // 4) if args.quick else count))
        print(f"done: {name}, {length} tokens", flush=True)
    table = markdown(rows)
    print(table)
    if args.out:
        replace_section(args.out, "whitebox", table)


if __name__ == "__main__":
    main()
