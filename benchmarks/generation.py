"""Batched greedy continuations (`models/generation.py:greedy_continuations`, issue 33) against one transformers
`generate` call per prefix, in one run, on a GPT-2-small-sized model (12 x 768, vocabulary 50,257, random weights):
prefixes of 16 to 48 tokens, 32 new tokens each. Both must give the same tokens; the ratio is the speed-up.

    python benchmarks/generation.py [--prefixes 64] [--batch-size 32] [--out docs/performance.md]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from markdown_section import machine_line, markdown_table, publish
from transformers import GPT2Config, GPT2LMHeadModel

from lmaudit.models.generation import greedy_continuations

NEW_TOKENS = 32


def one_at_a_time(model, prefixes: list[list[int]]) -> list[list[int]]:
    """The plain way: one `generate` per prefix, no padding."""
    with torch.inference_mode():
        return [model.generate(torch.tensor([prefix]), max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0,
                               eos_token_id=None)[0, len(prefix):].tolist() for prefix in prefixes]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefixes", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()
    rng = np.random.default_rng(0)
    prefixes = [rng.integers(1, 50_000, rng.integers(16, 49)).tolist() for _ in range(args.prefixes)]
    one_at_a_time(model, prefixes[:2])  # warm-up: the first call pays for allocations
    started = time.perf_counter()
    plain = one_at_a_time(model, prefixes)
    plain_seconds = time.perf_counter() - started
    started = time.perf_counter()
    batched = greedy_continuations(model, prefixes, NEW_TOKENS, pad_token_id=0, end_token_id=None,
                                   batch_size=args.batch_size)
    batched_seconds = time.perf_counter() - started
    same = sum(a == b for a, b in zip(plain, batched, strict=True))
    rows = [{"way": "one generate per prefix", "seconds": f"{plain_seconds:.1f}",
             "ms per prefix": f"{1000 * plain_seconds / len(prefixes):.0f}", "speed-up": "1.00x", "same tokens": ""},
            {"way": f"batched ({args.batch_size} a batch, length-sorted, left-padded, cached)",
             "seconds": f"{batched_seconds:.1f}", "ms per prefix": f"{1000 * batched_seconds / len(prefixes):.0f}",
             "speed-up": f"{plain_seconds / batched_seconds:.2f}x", "same tokens": f"{same} of {len(prefixes)}"}]
    text = (f"{machine_line()} GPT-2-small-sized model (random weights, fp32), {len(prefixes)} prefixes of 16-48 "
            f"tokens, {NEW_TOKENS} new tokens each, {torch.get_num_threads()} torch threads.\n\n" + markdown_table(rows))
    publish(text, args.out, "generation")


if __name__ == "__main__":
    main()
