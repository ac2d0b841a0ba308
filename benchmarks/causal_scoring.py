"""Benchmark `lmaudit score --signal clm_loss` against the way the public LLM membership-inference toolkits score a
causal LM (a plain transformers forward per text, `model(input_ids, labels=input_ids).loss`), in one run, on the same
texts and the same random-weight models: a GPT-2-small-sized model (12 x 768, vocabulary 50,257) and a
Pythia-410M-sized one (GPT-NeoX, 24 x 1024, vocabulary 50,304).

Both ways run as whole processes (import, load, score, write), on 160 and on 480 texts, so that the line through the
two times gives each way's fixed cost (its intercept) and its cost per text (its slope). Three corpora, each timed on
both ways: the synthetic notes of 20-60 words (23-63 tokens, mean 42), texts of exactly 42 tokens, and long-tailed
texts (5-300 words, log-normal: most short, a few long). The fraction of peak divides
the forward FLOPs of a text (weights and attention, LM head at every position) by the seconds per text and by the fp32
matrix-multiply peak of the same run (the largest of measurements taken before, between and after the timed runs: the
machine's speed drifts, and a peak caught in a slow spell flatters every fraction). The losses of the two ways are
compared text by text.

With --head it measures an LM head alone, in process: GPT-2's 50,257 x 768 output embedding on 667 and 2,048
positions, and a BERT-base decoder (30,522 x 768, with its bias) on 640, run as one product (a fresh logits tensor each
time) against `logits_in_tiles` (vocabulary tiles, reused buffers), then each with its log-softmax; best and median of
repeated runs, as a fraction of the peak measured after every round. Then, on one batch of 97 texts of 42 tokens, the
GPT-2-small-sized encoder alone and lmaudit's whole clm_loss and clm_tokens passes, in process (no start-up, no
tokenizer): the ceiling that the whole process's fraction of peak is read against.

With --fixed it measures the fixed cost itself instead: whole processes that score one text, each way, repeated
(median), lmaudit with the model's fingerprint already remembered (as on every run after the first) and on first sight.

    python benchmarks/causal_scoring.py [--out docs/performance.md] [--quick] [--fixed] [--head] [--device cuda --dtype bf16]
                                        [--sizes NAME ...] [--corpora NAME ...] [--counts A B]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch
from markdown_section import machine_line, markdown_table, publish
from scoring import PeakMeter

PLAIN_SCRIPT = """
import sys, time
import pandas as pd, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, data, out, device, dtype = sys.argv[1:6]
tokenizer = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype)).to(device).eval()
texts = pd.read_csv(data)["text"].tolist()
losses = []
with torch.no_grad():
    for text in texts:
        ids = tokenizer(text, return_tensors="pt")["input_ids"].to(device)
        losses.append(model(input_ids=ids, labels=ids).loss.item())
pd.DataFrame({"loss": losses}).to_csv(out, index=False)
"""
SIZES = {
    # name: (family, layers, hidden, heads, vocabulary)
    "GPT-2-small-sized": ("gpt2", 12, 768, 12, 50257),
    "Pythia-410M-sized": ("gpt_neox", 24, 1024, 16, 50304),
}
GPU_SIZES = {"Pythia-1B-sized": ("gpt_neox", 16, 2048, 8, 50304)}  # also timed on a GPU
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


def build_model(folder: Path, family: str, layers: int, hidden: int, heads: int, vocabulary: int, tokenizer) -> None:
    """Save a random-weight causal LM of the given shape with `tokenizer` (whose ids are a subset of the vocabulary)."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    if family == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=vocabulary, n_positions=1024, n_embd=hidden, n_layer=layers,
                                           n_head=heads, pad_token_id=tokenizer.pad_token_id))
    else:
        model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=vocabulary, hidden_size=hidden, num_hidden_layers=layers,
                                                 num_attention_heads=heads, intermediate_size=4 * hidden,
                                                 max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def exact_length_texts(texts: list[str], tokenizer, tokens: int, count: int) -> list[str]:
    """`count` texts of exactly `tokens` tokens (special tokens included), made of consecutive words of `texts`."""
    words = " ".join(texts).split()
    per_word = [len(ids) for ids in tokenizer(words, add_special_tokens=False)["input_ids"]]
    room = tokens - (len(tokenizer("a")["input_ids"]) - len(tokenizer("a", add_special_tokens=False)["input_ids"]))
    made, start = [], 0
    while len(made) < count and start < len(words):
        stop, total = start, 0
        while stop < len(words) and total + per_word[stop] <= room:
            total, stop = total + per_word[stop], stop + 1
        text = " ".join(words[start:stop])
        if total == room and len(tokenizer(text)["input_ids"]) == tokens:
            made.append(text)
        start = stop + 1  # the word that did not fit starts no text: the next one does
    if len(made) < count:
        raise SystemExit(f"only {len(made)} texts of {tokens} tokens could be made; generate more notes")
    return made


def long_tailed_texts(texts: list[str], count: int, seed: int = 0) -> list[str]:
    """`count` texts of consecutive words of `texts`, with word counts drawn log-normally (median 40, sigma 0.8,
    5 to 300 words): mostly short texts and a few long ones, as real notes and messages are."""
    words = " ".join(texts).split()
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(np.log(40), 0.8, count)), 5, 300).astype(int)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) % max(1, len(words) - 300)
    return [" ".join(words[start:start + length]) for start, length in zip(starts, lengths, strict=True)]


def corpora(notes: pd.DataFrame, tokenizer, count: int) -> dict[str, pd.DataFrame]:
    """The benchmark's corpora of `count` texts: the synthetic notes of 20-60 words (23-63 tokens), texts of exactly
    42 tokens (their mean), and long-tailed texts (5-300 words)."""
    words = notes["text"].str.split().str.len()
    variable = notes[(words >= 20) & (words <= 60)].sample(frac=1.0, random_state=0)["text"].head(count).tolist()
    everything = notes["text"].tolist()
    made = {"notes of 20-60 words": variable, "exactly 42 tokens": exact_length_texts(everything, tokenizer, 42, count),
            "long-tailed, 5-300 words": long_tailed_texts(everything, count)}
    return {name: pd.DataFrame({"text": texts}) for name, texts in made.items()}


def forward_flops(token_counts: np.ndarray, layers: int, hidden: int, vocabulary: int) -> np.ndarray:
    """Multiply-add FLOPs of one forward pass per text: 24 d^2 per token and layer (attention projections and a 4d MLP),
    4 T d per token and layer for the attention scores and mixing, and 2 d V per token for the LM head."""
    # The head counts at every position, as the plain way runs it; lmaudit runs it at T - 1 positions, so lmaudit's
    # rate is overstated by 1/T of the head's share (about 0.7% at 42 tokens).
    per_token = layers * (24 * hidden * hidden) + 2 * hidden * vocabulary
    return token_counts * per_token + layers * 4 * token_counts**2 * hidden


def timed_process(command: list[str], env: dict | None = None) -> float:
    """Wall seconds of a whole process (it must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    return time.perf_counter() - start


def line(counts: tuple[int, int], seconds: tuple[float, float]) -> tuple[float, float]:
    """(fixed seconds, seconds per text) of the line through two (texts, seconds) points."""
    per_text = (seconds[1] - seconds[0]) / (counts[1] - counts[0])
    return seconds[0] - per_text * counts[0], per_text


def run_size(name: str, shape: tuple, tokenizer, texts: pd.DataFrame, counts: tuple[int, int], work: Path,
             device: str, dtype: str) -> dict:
    """Both ways, whole processes, on the first `counts` texts of `texts` with the model already in `work`/family."""
    family, layers, hidden, heads, vocabulary = shape
    folder = work / family
    lmaudit = str(Path(sys.executable).with_name("lmaudit"))
    times: dict[str, list[float]] = {"lmaudit": [], "plain": []}
    for count in counts:
        data = work / f"texts-{count}.csv"  # each corpus in turn: the files of the one before are replaced
        texts.head(count).to_csv(data, index=False)
        times["lmaudit"].append(timed_process([
            lmaudit, "score", "--target", str(folder), "--data", str(data), "--signal", "clm_loss", "--device", device,
            "--dtype", dtype, "--out", str(work / f"lmaudit-{count}.csv"), "--cache-dir", str(work / f"cache-{family}-{count}")]))
        times["plain"].append(timed_process([sys.executable, "-c", PLAIN_SCRIPT, str(folder), str(data),
                                             str(work / f"plain-{count}.csv"), device, TORCH_DTYPES[dtype]]))
    ours = pd.read_csv(work / f"lmaudit-{counts[1]}.csv")["clm_loss"].to_numpy()
    plain = pd.read_csv(work / f"plain-{counts[1]}.csv")["loss"].to_numpy()
    tokens = np.array([len(ids) for ids in tokenizer(texts["text"].head(counts[1]).tolist())["input_ids"]])
    flops_per_text = forward_flops(tokens, layers, hidden, vocabulary).mean()
    fixed, per_text = zip(*(line(counts, times[way]) for way in ("lmaudit", "plain")), strict=True)
    return {
        "model": name, "texts": f"{counts[0]} / {counts[1]}",
        "tokens per text": f"{tokens.mean():.0f} ({tokens.min()}-{tokens.max()})",
        "lmaudit s": " / ".join(f"{t:.1f}" for t in times["lmaudit"]),
        "plain s": " / ".join(f"{t:.1f}" for t in times["plain"]),
        "lmaudit fixed s": f"{fixed[0]:.1f}", "plain fixed s": f"{fixed[1]:.1f}",
        "lmaudit ms/text": f"{1000 * per_text[0]:.0f}", "plain ms/text": f"{1000 * per_text[1]:.0f}",
        "speed-up per text": f"{per_text[1] / per_text[0]:.2f}x",
        "lmaudit GFLOP/s": flops_per_text / per_text[0] / 1e9, "plain GFLOP/s": flops_per_text / per_text[1] / 1e9,
        "max abs loss diff": f"{np.abs(ours - plain).max():.1e}",
    }


def fixed_cost(name: str, shape: tuple, tokenizer, texts: pd.DataFrame, work: Path, device: str, dtype: str,
               repeats: int = 7) -> dict:
    """Median wall seconds of whole processes that each score one text (start-up, imports, fingerprint, load, one
    forward, write): plain, lmaudit with the fingerprint remembered, and lmaudit seeing the model for the first time.
    The three ways take turns, so that a slow spell of the machine falls on each."""
    family, layers, hidden, heads, vocabulary = shape
    folder = work / family
    build_model(folder, family, layers, hidden, heads, vocabulary, tokenizer)
    os.sync()
    data = work / "one-text.csv"
    texts.head(1).to_csv(data, index=False)
    lmaudit = str(Path(sys.executable).with_name("lmaudit"))
    # As on a user's machine, Python keeps the compiled modules of both ways (a run before the timed ones writes them).
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    plain = [sys.executable, "-c", PLAIN_SCRIPT, str(folder), str(data), str(work / "plain-one.csv"), device, TORCH_DTYPES[dtype]]

    def score(cache: str) -> list[str]:
        return [lmaudit, "score", "--target", str(folder), "--data", str(data), "--signal", "clm_loss", "--device", device,
                "--dtype", dtype, "--out", str(work / "lmaudit-one.csv"), "--cache-dir", str(work / cache)]

    timed_process(plain, env)
    timed_process(score("cache-warm-up"), {**env, "LMAUDIT_CACHE_HOME": str(work / "home")})
    times: dict[str, list[float]] = {"plain": [], "lmaudit": [], "lmaudit, model first seen": []}
    for repeat in range(repeats):
        times["plain"].append(timed_process(plain, env))
        for way, home in (("lmaudit", work / "home"), ("lmaudit, model first seen", work / f"home-{repeat}")):
            times[way].append(timed_process(score(f"cache-{way}-{repeat}"), {**env, "LMAUDIT_CACHE_HOME": str(home)}))
    median = {way: float(np.median(seconds)) for way, seconds in times.items()}
    return {"model": name, "repeats": repeats, **{f"{way} s": f"{seconds:.2f}" for way, seconds in median.items()},
            "lmaudit - plain s": f"{median['lmaudit'] - median['plain']:.2f}",
            "first seen - plain s": f"{median['lmaudit, model first seen'] - median['plain']:.2f}"}


# The heads timed alone: (model, hidden, vocabulary, bias, positions). GPT-2's output embedding on a 667-position chunk
# (the scorer's) and on 2,048; a BERT-base decoder on the 640 masked positions of a 4,096-token batch of 32-token copies.
HEADS = [("GPT-2", 768, 50257, False, 667), ("GPT-2", 768, 50257, False, 2048), ("BERT-base decoder", 768, 30522, True, 640)]


def timed_in_turns(ways: dict[str, Callable[[], object]], rounds: int, meter: PeakMeter) -> dict[str, list[float]]:
    """Seconds of each way in each of `rounds` rounds, in inference mode, the peak measured again after every round."""
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    with torch.inference_mode():
        for _ in range(rounds):  # the ways take turns, so that a slow spell of the machine falls on each
            for way, run in ways.items():
                tick = time.perf_counter()
                run()
                seconds[way].append(time.perf_counter() - tick)
            meter.measure()
    return seconds


def head_rows(meter: PeakMeter, rounds: int = 5) -> list[dict]:
    """Each of HEADS alone (ms, GFLOP/s): one product against vocabulary tiles, each with and without the log-softmax."""
    from lmaudit.models.heads import VOCABULARY_TILE, logits_in_tiles

    rows = []
    for model, width, vocabulary, bias, positions in HEADS:
        torch.manual_seed(0)
        layer = torch.nn.Linear(width, vocabulary, bias=bias)
        hidden = torch.randn(positions, width)
        logits, log_probs = torch.empty(positions, vocabulary), torch.empty(positions, vocabulary)
        tile = torch.empty(positions, VOCABULARY_TILE)
        ways = {
            "one product": lambda: layer(hidden),
            "vocabulary tiles": lambda: logits_in_tiles(layer, hidden, logits, tile),
            "one product, log-softmax": lambda: torch.log_softmax(layer(hidden), -1),
            "vocabulary tiles, log-softmax": lambda: torch.log_softmax(logits_in_tiles(layer, hidden, logits, tile), -1, out=log_probs),
        }
        seconds = timed_in_turns(ways, rounds, meter)
        flops = 2 * positions * width * vocabulary
        rows += [{"head": model, "positions": positions, "way": way, "best ms": f"{1000 * min(times):.0f}",
                  "best GFLOP/s": flops / min(times) / 1e9, "median GFLOP/s": flops / float(np.median(times)) / 1e9}
                 for way, times in seconds.items()]
    return rows


def pass_rows(meter: PeakMeter, texts: int = 97, tokens: int = 42, rounds: int = 5) -> list[dict]:
    """In process (ms per text, GFLOP/s), one batch of `texts` random texts of `tokens` tokens: the GPT-2-small-sized
    encoder alone, and lmaudit's whole clm_loss and clm_tokens passes."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from lmaudit.models.load import fuse_activations
    from lmaudit.signals.base import EncodedSample
    from lmaudit.signals.causal import causal_passes
    from lmaudit.signals.settings import SignalSettings

    _, layers, hidden, heads, vocabulary = SIZES["GPT-2-small-sized"]
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=vocabulary, n_embd=hidden, n_layer=layers, n_head=heads)).eval()
    fuse_activations(model)  # as lmaudit loads it
    ids = torch.randint(0, vocabulary, (texts, tokens))
    samples = [EncodedSample(f"t{i}", row.numpy(), np.arange(1, tokens), tokens, False) for i, row in enumerate(ids)]
    padding = SimpleNamespace(pad_token_id=0)  # the tokenizer's one field read; every text has the same length
    ways = {"encoder alone": (lambda: model.transformer(input_ids=ids, attention_mask=torch.ones_like(ids)), 0),
            "whole clm_loss pass": (lambda: causal_passes(model, padding, samples, SignalSettings(signal="clm_loss")),
                                    vocabulary),
            "whole clm_tokens pass": (lambda: causal_passes(model, padding, samples, SignalSettings(signal="clm_tokens"),
                                                            statistics=True), vocabulary)}
    seconds = timed_in_turns({way: run for way, (run, _) in ways.items()}, rounds, meter)
    rows = []
    for way, (_, head_vocabulary) in ways.items():
        flops = forward_flops(np.full(texts, tokens), layers, hidden, head_vocabulary).sum()
        best, median = min(seconds[way]), float(np.median(seconds[way]))
        rows.append({"part": way, "texts x tokens": f"{texts} x {tokens}", "best ms per text": f"{1000 * best / texts:.0f}",
                     "best GFLOP/s": flops / best / 1e9, "median GFLOP/s": flops / median / 1e9})
    return rows


def with_fractions(rows: list[dict], peak: float) -> list[dict]:
    """Each row with every 'X GFLOP/s' column printed to whole GFLOP/s and followed by 'X fraction of peak'."""
    def cells(key: str, value) -> dict:
        if not key.endswith(" GFLOP/s"):
            return {key: value}
        return {key: f"{value:.0f}", key.replace("GFLOP/s", "fraction of peak"): f"{value * 1e9 / peak:.0%}"}

    return [{name: cell for key, value in row.items() for name, cell in cells(key, value).items()} for row in rows]


def process_rows(args: argparse.Namespace, counts: tuple[int, int], meter: PeakMeter | None) -> list[dict]:
    """Whole processes, each way (or, with --fixed, their fixed cost), per model size and corpus."""
    from lmaudit.data.synth import generate_notes
    from lmaudit.models.tokenizer import train_tokenizer

    notes = generate_notes(n_patients=max(120, counts[1] // 3), seed=1)  # about 4 notes of 20-60 words per patient
    tokenizer = train_tokenizer(notes["text"].tolist(), vocab_size=4000, max_length=1024)
    every_corpus = corpora(notes, tokenizer, counts[1])
    texts = {name: frame for name, frame in every_corpus.items() if args.corpora is None or name in args.corpora}
    sizes = dict(list(SIZES.items())[:1]) if args.quick else SIZES | (GPU_SIZES if args.device != "cpu" else {})
    sizes = {name: shape for name, shape in sizes.items() if args.sizes is None or name in args.sizes}
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, shape in sizes.items():
            if args.fixed:
                rows.append(fixed_cost(name, shape, tokenizer, every_corpus["notes of 20-60 words"], Path(work), args.device,
                                       args.dtype))
                print(rows[-1], flush=True)
                continue
            family, layers, hidden, heads, vocabulary = shape
            build_model(Path(work) / family, family, layers, hidden, heads, vocabulary, tokenizer)
            # Flush the weights just written before timing, so that the first timed run does not share the disk with
            # the kernel's write-back of them (1.6 GB for the Pythia-sized model).
            os.sync()
            for corpus, frame in texts.items():
                meter.measure()
                row = run_size(name, shape, tokenizer, frame, counts, Path(work), args.device, args.dtype)
                rows.append({"corpus": corpus, **row})
                print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="GPT-2-small-sized only, 16 and 48 texts")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32", choices=sorted(TORCH_DTYPES))
    parser.add_argument("--fixed", action="store_true", help="the fixed cost of a process: one text, repeated")
    parser.add_argument("--head", action="store_true",
                        help="the LM head alone, one product against tiles; the encoder alone and the whole pass; in process")
    parser.add_argument("--counts", type=int, nargs=2, default=None,
                        help="the two numbers of texts (default 160 480; a GPU needs thousands to resolve a text's cost)")
    parser.add_argument("--sizes", nargs="+", default=None, help="only these model sizes (names as in the table)")
    parser.add_argument("--corpora", nargs="+", default=None, help="only these corpora (names as in the table)")
    args = parser.parse_args()
    counts = tuple(args.counts) if args.counts else (16, 48) if args.quick else (160, 480)
    if args.head and (args.device, args.dtype) != ("cpu", "fp32"):
        parser.error("--head measures the CPU's fp32 head and passes: leave out --device and --dtype")
    if args.fixed:  # whole processes of one text: no FLOP rate, so no peak
        publish(f"{run_line(args)}\n\n" + markdown_table(process_rows(args, counts, None)), args.out,
                section_name(args, counts, "causal-fixed-cost"))
        return
    meter = PeakMeter(torch.float32 if args.dtype == "fp32" else torch.bfloat16, 2048 if args.device == "cpu" else 8192,
                      args.device)
    meter.measure()
    tables = [head_rows(meter), pass_rows(meter)] if args.head else [process_rows(args, counts, meter)]
    meter.measure()
    text = (f"{run_line(args)} Measured {args.dtype} matrix-multiply peak: {meter.describe()}.\n\n"
            + "\n\n".join(markdown_table(with_fractions(rows, meter.peak)) for rows in tables))
    publish(text, args.out, section_name(args, counts, "causal-head" if args.head else "causal-scoring"))


def run_line(args: argparse.Namespace) -> str:
    """What the run's numbers were measured on: machine_line, then the device, the dtype and Python."""
    return f"{machine_line()} Device {args.device}, {args.dtype}; Python {platform.python_version()}."


def section_name(args: argparse.Namespace, counts: tuple[int, int], kind: str) -> str:
    """The docs section of a run: its kind, the device, the dtype and, with --counts, the larger count."""
    return f"{kind}-{args.device}-{args.dtype}" + (f"-{counts[1]}" if args.counts else "")


if __name__ == "__main__":
    main()
