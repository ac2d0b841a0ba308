"""Benchmark `lmaudit score` on files of 10k to 1M short samples with a tiny causal LM: seconds per sample and the peak
memory of the whole process, to show that the time grows linearly and the memory stays bounded (the file is read,
scored, stored and written in chunks).

Each size runs as a fresh process on a fresh store, and the peak resident memory is that process's own (getrusage of
its finished child). Texts are 8-16 random words from a 2,000-word vocabulary.

    python benchmarks/large_files.py [--out docs/performance.md] [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from markdown_section import markdown_table, replace_section, score_process_header


def write_texts(path: Path, count: int, seed: int = 0) -> None:
    """`count` texts of 8-16 words drawn from a fixed vocabulary, with ids, as Parquet."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(2000)])
    lengths = rng.integers(8, 17, count)
    drawn = words[rng.integers(0, len(words), lengths.sum())]
    texts = [" ".join(chunk) for chunk in np.split(drawn, np.cumsum(lengths)[:-1])]
    pd.DataFrame({"sample_id": [f"s{i}" for i in range(count)], "text": texts}).to_parquet(path, index=False)


def build_model(folder: Path, texts_path: Path) -> None:
    """A tiny GPT-2 (2 layers, hidden 64) and a WordPiece tokenizer trained on the first 10,000 texts."""
    from transformers import GPT2LMHeadModel

    from lmaudit.models.architectures import clm_config
    from lmaudit.models.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(pd.read_parquet(texts_path)["text"].head(10_000).tolist(), vocab_size=4000, max_length=64)
    torch.manual_seed(0)
    GPT2LMHeadModel(clm_config("tiny", len(tokenizer), 64, tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


# Runs a command and prints its peak resident memory (KiB): a fresh process whose only child is the command.
PEAK_OF_CHILD = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
                 "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def run(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MiB) of a command run as a process of its own."""
    start = time.perf_counter()
    peak = subprocess.run([sys.executable, "-c", PEAK_OF_CHILD, *command], check=True, capture_output=True, text=True)
    return time.perf_counter() - start, int(peak.stdout.strip()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    lmaudit = str(Path(sys.executable).with_name("lmaudit"))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        write_texts(work / f"texts-{max(sizes)}.parquet", max(sizes))
        build_model(work / "model", work / f"texts-{max(sizes)}.parquet")
        everything = pd.read_parquet(work / f"texts-{max(sizes)}.parquet")
        for size in sorted(sizes):
            data = work / f"texts-{size}.parquet"
            everything.head(size).to_parquet(data, index=False)
            seconds, peak = run([lmaudit, "score", "--target", str(work / "model"), "--data", str(data), "--signal",
                                 "clm_loss", "--out", str(work / f"scores-{size}.parquet"), "--cache-dir",
                                 str(work / f"cache-{size}")])
            assert len(pd.read_parquet(work / f"scores-{size}.parquet")) == size
            rows.append({"samples": f"{size:,}", "seconds": f"{seconds:.1f}", "ms per sample": f"{1000 * seconds / size:.3f}",
                         "peak memory MiB": f"{peak:.0f}", "input MiB": f"{data.stat().st_size / 2**20:.1f}"})
            print(rows[-1], flush=True)
    text = score_process_header() + markdown_table(rows)
    print(text)
    if args.out:
        replace_section(args.out, "large-files", text)


if __name__ == "__main__":
    main()
