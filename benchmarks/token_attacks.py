"""Benchmark the token-level attacks' cost: the clm_tokens pass (every token's log-probability, and the mean and
deviation of the predictive distribution at its position) against the clm_loss pass alone, and the extra passes of
ReCaLL (a non-member prefix before every text), the neighbourhood attack (one pass per neighbour) and token-level
InfoRMIA (the reference KL: target and reference together, KL over the vocabulary at every token; against the
reference's own clm_tokens pass on the same texts), in one run.

The model is GPT-2-small-sized (12 layers, hidden 768, vocabulary 50257) with random weights; texts are random token
sequences of a fixed length. The attacks themselves (min_k, min_k_plus_plus, zlib, dc_pdd, ...) read stored values and
are timed too: they are numpy over the stored arrays.

    python benchmarks/token_attacks.py [--out docs/performance.md] [--quick]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
import torch
from markdown_section import replace_section
from transformers import GPT2Config, GPT2LMHeadModel

from lmaudit.attacks.dc_pdd import dc_pdd_score
from lmaudit.attacks.informia import mean_per_token
from lmaudit.attacks.min_k import min_k_score
from lmaudit.attacks.min_k_plus_plus import min_k_plus_plus_score
from lmaudit.attacks.wbc import wbc_score
from lmaudit.signals.base import EncodedSample, pack_token_values, unpack_token_values
from lmaudit.signals.causal import causal_passes
from lmaudit.signals.reference_kl import reference_kl_passes
from lmaudit.signals.settings import SignalSettings

VOCABULARY = 50257


class _Tokenizer:
    pad_token_id = 0


def samples(count: int, length: int, seed: int = 0) -> list[EncodedSample]:
    rng = np.random.default_rng(seed)
    return [EncodedSample(f"s{i}", rng.integers(5, VOCABULARY, length), np.arange(length), length, False)
            for i in range(count)]


def timed(function, repeats: int) -> float:
    """Best wall time of `repeats` runs (s)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    config = GPT2Config(vocab_size=VOCABULARY, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    torch.manual_seed(1)
    reference_model = GPT2LMHeadModel(config).eval()  # a second random model of the same size, as the reference
    count, length, prefix_length, repeats = (8, 64, 64, 1) if args.quick else (32, 128, 128, 3)
    texts = samples(count, length)
    settings = SignalSettings(signal="clm_tokens", batch_tokens=4096)
    tokenizer = _Tokenizer()
    prefix = np.random.default_rng(1).integers(5, VOCABULARY, prefix_length).tolist()
    loss = timed(lambda: causal_passes(model, tokenizer, texts, settings), repeats)
    tokens = timed(lambda: causal_passes(model, tokenizer, texts, settings, statistics=True), repeats)
    prefixed = timed(lambda: causal_passes(model, tokenizer, texts, settings, statistics=True, prefix_ids=prefix), repeats)
    # the reference's per-token pass (what every reference-reading attack shares) against the KL pass, on the same texts
    reference_tokens = timed(lambda: causal_passes(reference_model, tokenizer, texts, settings, statistics=True), repeats)
    kl = timed(lambda: reference_kl_passes(model, reference_model, tokenizer, texts, settings, VOCABULARY), repeats)
    values = causal_passes(model, tokenizer, texts, settings, statistics=True)
    table = unpack_token_values([pack_token_values(v, s.input_ids[1:]) for v, s in zip(values, texts, strict=True)])
    frequencies = np.full(table["token_id"].shape, 1e-4)

    def attacks() -> None:
        min_k_score(table["log_prob"], 0.2)
        min_k_plus_plus_score(table["log_prob"], table["mean"], table["std"], 0.2)
        dc_pdd_score(table["log_prob"], table["token_id"], frequencies, 0.01)

    attack_time = timed(attacks, repeats)
    # A reference's stored log-probabilities of the same tokens (its one clm_tokens pass, shared with the likelihood
    # ratio, RMIA, EZ-MIA and PETAL): here the target's, perturbed.
    reference = table["log_prob"] + np.random.default_rng(2).normal(0, 0.5, table["log_prob"].shape)

    def reference_attacks() -> None:
        wbc_score(table["log_prob"], reference)
        mean_per_token(table["log_prob"] - reference)

    reference_time = timed(reference_attacks, repeats)
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"torch {torch.__version__}; GPT-2-small-sized random model (12 x 768, vocabulary {VOCABULARY}), fp32, CPU; "
        f"{count} texts of {length} tokens, best of {repeats}.",
        "",
        "| pass | seconds | x clm_loss pass |",
        "|---|---:|---:|",
        f"| clm_loss (mean NLL only) | {loss:.2f} | 1.00 |",
        f"| clm_tokens (log p, mean and sd of the predictive distribution, every token) | {tokens:.2f} | {tokens / loss:.2f} |",
        f"| min_k + min_k_plus_plus + dc_pdd on the stored values | {attack_time:.4f} | {attack_time / loss:.4f} |",
        f"| wbc + informia on the stored values (target's and a reference's log-probabilities; {reference_time / count * 1000:.3f} s per 1,000 texts) | {reference_time:.4f} | {reference_time / loss:.4f} |",
        f"| ReCaLL: clm_tokens after a {prefix_length}-token prefix | {prefixed:.2f} | {prefixed / loss:.2f} |",
        f"| a reference's clm_tokens pass on the same texts ({reference_tokens / count * 1000:.0f} s per 1,000 texts) | {reference_tokens:.2f} | {reference_tokens / loss:.2f} |",
        f"| informia_tokens: the reference KL pass, target and reference together ({kl / count * 1000:.0f} s per 1,000 texts) | {kl:.2f} | {kl / loss:.2f} |",
        f"| neighbourhood: one clm_loss pass per neighbour (n = 10 by default in the demo) | {loss:.2f} each | 1.00 each |",
        "",
        f"All token-level attacks (min_k, min_k_plus_plus, zlib, dc_pdd, loss) together cost {tokens / loss:.2f}x the "
        "clm_loss pass: they read the one clm_tokens pass. lowercase costs one more clm_loss pass (on the lowercased "
        f"texts), ReCaLL one pass over prefix + text ({prefixed / loss:.2f}x here), the neighbourhood attack n passes "
        "plus the masked LM's proposals. WBC and the sequence-level InfoRMIA need no pass of their own: they read the "
        "target's and the reference's stored per-token values, which the likelihood ratio's reference pass already "
        "computes. Token-level InfoRMIA (informia_tokens, --reference-kl) adds one joint pass of both models, "
        f"{kl / reference_tokens:.2f}x the reference's own per-token pass on the same texts "
        f"({kl / count * 1000:.0f} s against {reference_tokens / count * 1000:.0f} s per 1,000 texts of {length} tokens).",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        replace_section(args.out, "token-attacks", "## Token-level attacks\n\n" + text)


if __name__ == "__main__":
    main()
