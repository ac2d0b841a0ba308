"""Benchmark MLM energy scoring: the released code's way against lmaudit's scorer, in one run.

For each model (tiny, 4-layer/256, BERT-base-sized; random weights) and sequence length (32, 128
tokens), on the same sequences and the same K=10 masks:
  (a) released: one masked copy per forward pass (batch of 1), the model run twice per mask,
      autograd on, the LM head projecting every position onto the vocabulary;
  (b) lmaudit: score_masked_copies in fp32 and in bf16 (copies batched by length, inference mode,
      head only on masked positions).
It reports sequences per second, the speed-up over (a), the agreement of the energies with (a),
and the achieved FLOP rate as a fraction of the matrix-multiply peak measured in the same run.

    python benchmarks/scoring.py [--out docs/performance.md] [--quick]
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from markdown_section import replace_section
from transformers import BertConfig, BertForMaskedLM

from lmaudit.signals.base import EncodedSample
from lmaudit.signals.masks import random_masks
from lmaudit.signals.mlm import score_masked_copies
from lmaudit.signals.settings import has_fast_bf16

K = 10
MASK_TOKEN = 4
MODELS = {
    # name: (layers, hidden, heads, feed-forward, vocabulary)
    "tiny 2x64": (2, 64, 2, 256, 4000),
    "4x256": (4, 256, 4, 1024, 8000),
    "BERT-base 12x768": (12, 768, 12, 3072, 30522),
}


@dataclass
class Case:
    model: str
    length: int
    sequences: int


def matmul_peak(dtype: torch.dtype, size: int = 2048, seconds: float = 3.0, device: str = "cpu") -> float:
    """Measured FLOP/s of a square matrix multiply on this machine's `device` (the best of repeated runs)."""
    a, b = (torch.randn(size, size, dtype=dtype, device=device) for _ in range(2))
    torch.matmul(a, b)
    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    best, start = 0.0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        synchronize()
        tick = time.perf_counter()
        torch.matmul(a, b)
        synchronize()
        best = max(best, 2 * size**3 / (time.perf_counter() - tick))
    return best


# This machine's speed drifts: two 3-second peak measurements minutes apart gave 86 and 136 GFLOP/s, so a peak caught
# in a slow spell flattered every "fraction of peak" divided by it. A run measures again around its timed parts and
# divides by the largest measurement.
@dataclass
class PeakMeter:
    """The matrix-multiply peak of one benchmark run (FLOP/s), measured before, between and after its timed parts."""

    dtype: torch.dtype
    size: int = 2048
    device: str = "cpu"
    measured: list[float] = field(default_factory=list)

    def measure(self) -> None:
        """One more 3-second measurement (FLOP/s)."""
        self.measured.append(matmul_peak(self.dtype, self.size, device=self.device))

    @property
    def peak(self) -> float:
        """The largest measurement so far (FLOP/s)."""
        return max(self.measured)

    def describe(self) -> str:
        """'207 GFLOP/s (the largest of 5 measurements of 2048x2048, best of 3 s each, taken before, between and after
        the timed runs: 150-207)'."""
        low, high = min(self.measured) / 1e9, self.peak / 1e9
        return (f"{high:.0f} GFLOP/s (the largest of {len(self.measured)} measurements of {self.size}x{self.size}, "
                f"best of 3 s each, taken before, between and after the timed runs: {low:.0f}-{high:.0f})")


def build_model(name: str) -> BertForMaskedLM:
    layers, hidden, heads, feed_forward, vocabulary = MODELS[name]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocabulary, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=feed_forward, max_position_embeddings=512)
    return BertForMaskedLM(config).eval()


def samples_of_length(length: int, count: int, vocabulary: int) -> list[EncodedSample]:
    """Random token sequences [CLS] ... [SEP] of exactly `length` tokens."""
    rng = np.random.default_rng(length)
    samples = []
    for index in range(count):
        ids = np.r_[2, rng.integers(5, vocabulary, length - 2), 3].astype(np.int64)
        samples.append(EncodedSample(f"s{index}", ids, np.arange(1, length - 1), length - 2, False))
    return samples


def patterns_for(samples: list[EncodedSample]) -> list[np.ndarray]:
    return [s.content_positions[random_masks(s.sample_id, len(s.content_positions), K, 0)] for s in samples]


def released_way(model, samples, patterns) -> list[np.ndarray]:
    """One masked copy per pass, batch of 1, twice per mask, autograd on, full vocabulary projection."""
    results = []
    with torch.enable_grad():
        for sample, sample_patterns in zip(samples, patterns, strict=True):
            per_mask = []
            for positions in sample_patterns:
                ids = torch.from_numpy(sample.input_ids).clone()[None]
                ids[0, positions] = MASK_TOKEN
                for _ in range(2):
                    log_probs = torch.log_softmax(model(input_ids=ids).logits[0], dim=-1)
                targets = torch.from_numpy(sample.input_ids[positions])
                per_mask.append(-log_probs[torch.from_numpy(positions), targets].detach().numpy())
            results.append(np.array(per_mask))
    return results


def flops_per_copy(name: str, length: int) -> float:
    """Forward FLOPs of one masked copy as lmaudit runs it (encoder on all tokens, head on masked ones)."""
    layers, hidden, _, feed_forward, vocabulary = MODELS[name]
    masked = int(np.ceil(0.15 * (length - 2)))
    encoder = layers * (2 * length * (4 * hidden * hidden + 2 * hidden * feed_forward) + 4 * length * length * hidden)
    head = 2 * masked * (hidden * hidden + hidden * vocabulary)
    return float(encoder + head)


def timed(function) -> tuple[float, object]:
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def run_case(case: Case, bf16: bool) -> dict:
    model = build_model(case.model)
    vocabulary = MODELS[case.model][4]
    samples = samples_of_length(case.length, case.sequences, vocabulary)
    patterns = patterns_for(samples)
    score_masked_copies(model, MASK_TOKEN, samples[:2], patterns[:2])  # warm-up
    released_seconds, released = timed(lambda: released_way(model, samples, patterns))
    row = {"model": case.model, "tokens": case.length, "sequences": case.sequences,
           "released_seq_per_s": case.sequences / released_seconds}
    for precision in ("fp32", "bf16") if bf16 else ("fp32",):
        seconds, ours = timed(lambda p=precision: score_masked_copies(model, MASK_TOKEN, samples, patterns, precision=p))
        energy_ours = np.array([x.sum(axis=1).mean() for x in ours])
        energy_released = np.array([x.sum(axis=1).mean() for x in released])
        achieved = case.sequences * K * flops_per_copy(case.model, case.length) / seconds
        row[precision] = {
            "seq_per_s": case.sequences / seconds,
            "speedup": released_seconds / seconds,
            "max_abs_energy_diff": float(np.max(np.abs(energy_ours - energy_released))),
            "gflops": achieved / 1e9,
        }
    return row


def machine_description() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {torch.get_num_threads()} threads, native bf16: {has_fast_bf16('cpu')}; "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def markdown(rows: list[dict], meters: dict[str, PeakMeter], machine: str) -> str:
    lines = [
        f"Machine: {machine}.",
        "",
        "Measured matrix-multiply peak: " + "; ".join(f"{name} {meter.describe()}" for name, meter in meters.items()) + ".",
        "",
        "| model | tokens | sequences | released seq/s | lmaudit fp32 seq/s | speed-up | fraction of fp32 peak | "
        "max abs energy diff | lmaudit bf16 seq/s | bf16 / fp32 | fraction of bf16 peak | bf16 max abs diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def fraction(result: dict, precision: str) -> str:
        return f"{result['gflops'] * 1e9 / meters[precision].peak:.0%}"

    for row in rows:
        fp32, bf16 = row["fp32"], row.get("bf16")
        bf16_cells = (f"{bf16['seq_per_s']:.2f} | {bf16['seq_per_s'] / fp32['seq_per_s']:.2f}x | "
                      f"{fraction(bf16, 'bf16')} | {bf16['max_abs_energy_diff']:.3f}") if bf16 else "- | - | - | -"
        lines.append(
            f"| {row['model']} | {row['tokens']} | {row['sequences']} | {row['released_seq_per_s']:.2f} | "
            f"{fp32['seq_per_s']:.2f} | {fp32['speedup']:.1f}x | {fraction(fp32, 'fp32')} | "
            f"{fp32['max_abs_energy_diff']:.1e} | {bf16_cells} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="Write the table into this markdown file.")
    parser.add_argument("--quick", action="store_true", help="Fewer sequences (a smoke run, not for the record).")
    args = parser.parse_args()
    scale = 0.25 if args.quick else 1.0
    cases = [
        Case("tiny 2x64", 32, 64), Case("tiny 2x64", 128, 32),
        Case("4x256", 32, 32), Case("4x256", 128, 16),
        Case("BERT-base 12x768", 32, 8), Case("BERT-base 12x768", 128, 4),
    ]
    bf16 = has_fast_bf16("cpu") or torch.cuda.is_available()
    meters = {"fp32": PeakMeter(torch.float32)}
    if bf16:
        meters["bf16"] = PeakMeter(torch.bfloat16)
    rows = []
    for case in cases:
        case.sequences = max(2, int(case.sequences * scale))
        for meter in meters.values():
            meter.measure()
        rows.append(run_case(case, bf16))
        print(f"done: {case.model}, {case.length} tokens", flush=True)
    for meter in meters.values():
        meter.measure()
    table = markdown(rows, meters, machine_description())
    print(table)
    if args.out:
        replace_section(args.out, "benchmark", table)


if __name__ == "__main__":
    main()
