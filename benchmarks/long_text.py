"""Benchmark `lmaudit score` on one very long text: the peak memory and time of the whole process with 100 short texts,
and with the same texts plus one of 5,000,000 characters, measured in the same run. A long text is cut before it is
tokenized, so the second process should cost about the text's own size more, not the tokenizer's gigabytes.

    python benchmarks/long_text.py [--out docs/performance.md] [--characters 5000000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd
from large_files import build_model, run, write_texts
from markdown_section import markdown_table, replace_section, score_process_header

SENTENCE = "patient stable overnight, bp 120/80. "


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--characters", type=int, default=5_000_000)
    args = parser.parse_args()
    lmaudit = str(Path(sys.executable).with_name("lmaudit"))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        write_texts(work / "short.parquet", 100)
        build_model(work / "model", work / "short.parquet")
        short = pd.read_parquet(work / "short.parquet")
        long_text = (SENTENCE * (args.characters // len(SENTENCE) + 1))[: args.characters]
        pd.concat([short, pd.DataFrame({"sample_id": ["long"], "text": [long_text]})]).to_parquet(work / "long.parquet")
        for name, label in (("short", "100 short texts"), ("long", f"the same and one of {args.characters:,} characters")):
            seconds, peak = run([lmaudit, "score", "--target", str(work / "model"), "--data", str(work / f"{name}.parquet"),
                                 "--signal", "clm_loss", "--out", str(work / f"{name}-scores.parquet"), "--cache-dir",
                                 str(work / f"cache-{name}")])
            rows.append({"input": label, "seconds": f"{seconds:.1f}", "peak memory MiB": f"{peak:.0f}"})
            print(rows[-1], flush=True)
        scores = {name: pd.read_parquet(work / f"{name}-scores.parquet").set_index("sample_id")["clm_loss"]
                  for name in ("short", "long")}
        assert scores["long"].loc[scores["short"].index].equals(scores["short"])  # the long text changes no other value
    text = score_process_header() + markdown_table(rows)
    print(text)
    if args.out:
        replace_section(args.out, "long-text", text)


if __name__ == "__main__":
    main()
