"""The GPU benchmark of issue 51, in one process of a few minutes: lmaudit's scoring and training on a GPU, each against
the plain transformers way, as a fraction of the device's measured matrix-multiply peak.

Every model is random-weight, of a real shape, built here from a transformers config (nothing is downloaded) and
saved as safetensors with a WordPiece tokenizer trained on the synthetic notes and filled up with unused tokens to
the config's vocabulary size: Pythia-1B-sized (GPT-NeoX, 16 x 2048, 8 heads, vocabulary 50,304), Pythia-2.8B-sized
(32 x 2560, 32 heads), Llama-7B-sized (32 x 4096, feed-forward 11,008, 32 heads, vocabulary 32,000), BERT-base-sized
(12 x 768) and BERT-large-sized (24 x 1024) masked LMs, and a GPT-2-small-sized causal LM (12 x 768) to train.
The texts are runs of consecutive one-token words of the notes, of 16-512 tokens drawn log-normally (median 100,
sigma 0.75: mean about 132), the special tokens included.

1. Peak: the best of repeated 8192 x 8192 matrix multiplies in the run's dtype, for 3 s, before and after the timed
   parts; the larger is kept and divides every FLOP rate.
2. Causal scoring, in process (the model loaded once and kept, as lmaudit keeps it between passes; a fresh signal
   store per run, so everything is computed): `model_signal` with clm_loss and clm_tokens at the default batch_tokens
   (the device's, `signals/settings.py:DEFAULT_BATCH_TOKENS`) and at 32,768, and a plain padded batch of 32 texts in
   the given order through the transformers model (`model(**batch).logits`, then each text's mean token loss). Each
   way is timed twice in a row and the second time is reported (the first is its warm-up: kernels, allocator, clocks).
   Forward FLOPs per text of T tokens: 2 x (the base model's matrix-multiply weights) x T + 2 d V T (the LM head at
   every position) + 4 L d T^2 (attention scores and mixing).
3. Masked-LM energy (K = 10 masks of 15% of the content tokens), the same way, at the default batch_tokens and at
   32,768: per text, K forwards of T tokens through the encoder (2 x encoder weights x T + 4 L d T^2) and the MLM head
   (transform and decoder) at the masked positions only.
4. Training tokens per second (the texts' tokens, truncated to 512, over the seconds of one epoch): lmaudit's
   `train_language_model('clm', ...)` from the saved GPT-2-small-sized model (AdamW, linear schedule,
   length-bucketed batches of 32) against a plain transformers loop (AdamW at the same learning rate, batches of 32
   in random order, `DataCollatorForLanguageModeling(mlm=False)`, `model(**batch).loss`), bf16 autocast both when the
   dtype is bf16. lmaudit's epoch is (seconds of a 3-epoch run - seconds of a 1-epoch run) / 2, so that loading and
   saving cancel; the plain loop's is the mean of its epochs after the first. Then the same for DP-SGD
   (DPSettings(noise_multiplier=1.0), Poisson batches of expected size 32): its cost is non-DP tokens/s over DP's.

    python benchmarks/gpu.py [--out docs/performance.md] [--quick] [--device cuda] [--dtype bf16]
    python benchmarks/gpu.py --device cpu --tiny      # tiny shapes, a dozen texts of at most 128 tokens, 2 epochs:
                                                      # the test's run, under a minute on a CPU
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from gpu_shapes import (
    CAUSAL,
    COUNTS,
    MASKED,
    MAX_TOKENS,
    TINY,
    TRAINED,
    Shape,
    build_model,
    causal_flops,
    energy_flops,
    make_texts,
    tokenizer_of_size,
)
from markdown_section import markdown_table, publish
from scoring import PeakMeter

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def second_time(run: Callable[[], object], device: str) -> float:
    """Seconds of `run`'s second call in a row (the first is its warm-up)."""
    for _ in range(2):
        synchronize(device)
        tick = time.perf_counter()
        run()
        synchronize(device)
        seconds = time.perf_counter() - tick
    return seconds


def plain_losses(model, tokenizer, texts: list[str], device: str, batch_size: int = 32) -> list[float]:
    """Each text's mean token loss, padded batches of `batch_size` in the given order, a plain transformers forward."""
    losses: list[float] = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(texts[start:start + batch_size], padding=True, return_tensors="pt").to(device)
            logits = model(**batch).logits[:, :-1]
            targets = batch["input_ids"][:, 1:].masked_fill(batch["attention_mask"][:, 1:] == 0, -100)
            nll = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")
            losses += (nll.sum(1) / (targets != -100).sum(1)).tolist()
    return losses


class Bench:
    """One run: where it runs, its scratch folder, the texts' notes, the peak meter, and the rows of its table."""

    def __init__(self, args: argparse.Namespace, work: Path):
        from lmaudit.data.synth import generate_notes

        self.device, self.dtype, self.work = args.device, args.dtype, work
        self.torch_dtype = TORCH_DTYPES[args.dtype]
        self.counts = COUNTS["tiny" if args.tiny else "quick" if args.quick else "full"]
        self.notes = generate_notes(n_patients=40 if args.tiny else 400, seed=1)["text"].tolist()
        self.meter = PeakMeter(self.torch_dtype, 1024 if args.tiny else 8192, args.device)
        self.longest = 128 if args.tiny else MAX_TOKENS  # a tiny run's texts are shorter: a busy CPU runs it
        self.rows: list[dict] = []
        self.runs = 0
        self.tokenizers: dict[int, object] = {}

    def tokenizer(self, vocabulary: int):
        """The notes' tokenizer of `vocabulary` ids, made once."""
        if vocabulary not in self.tokenizers:
            self.tokenizers[vocabulary] = tokenizer_of_size(self.notes, vocabulary)
        return self.tokenizers[vocabulary]

    def store(self) -> Path:
        """A fresh signal store folder: nothing is read back, everything is computed."""
        self.runs += 1
        return self.work / f"store-{self.runs}"

    def row(self, measurement: str, model: str, way: str, work: str, seconds: float | None = None,
            rate: float | None = None, unit: str = "TFLOP/s", fraction: float | None = None,
            ratio: float | None = None) -> None:
        def cell(value: float | None, form: str) -> str:
            return "-" if value is None else format(value, form)

        self.rows.append({"measurement": measurement, "model": model, "way": way, "work": work,
                          "seconds": cell(seconds, ".3g"), "rate": cell(rate, ".4g"), "unit": unit,
                          "fraction of peak": cell(fraction, ".3f"), "ratio": cell(ratio, ".2f")})
        print(self.rows[-1], flush=True)

    def scored(self, measurement: str, name: str, way: str, texts: list[str], seconds: float, flops: float) -> None:
        rate = flops / seconds
        self.row(measurement, name, way, f"{len(texts)} texts", seconds, rate / 1e12, fraction=rate / self.meter.peak)

    def signal_ways(self, folder: Path, signals: tuple[str, ...]) -> dict[str, Callable[[], object]]:
        """lmaudit's passes of each signal at the default batch_tokens and at 32,768, on the texts given later."""
        from lmaudit.models.source import Placement
        from lmaudit.signals.compute import Scoring, model_signal
        from lmaudit.signals.registry import resolved
        from lmaudit.signals.settings import SignalSettings

        placement = Placement(device=self.device, dtype=self.dtype)
        ways = {}
        for signal in signals:
            for batch_tokens in (None, 32768):
                settings = SignalSettings(signal=signal, precision=self.dtype, batch_tokens=batch_tokens)
                label = (f"default batch_tokens ({resolved(settings, self.device).batch_tokens})" if batch_tokens is None
                         else f"batch_tokens {batch_tokens}")
                ways[f"lmaudit {signal}, {label}"] = (
                    lambda settings=settings: model_signal(folder, self.ids, self.texts, settings,
                                                           Scoring(self.store(), placement)))
        return ways

    def prepared(self, name: str, shape: Shape, which: int):
        """The texts of measurement `which` (0 causal, 1 energy; also its seed) for a model of `shape`, built and saved
        under `name`: (tokenizer, each text's token count, the model's folder, the model)."""
        tokenizer = self.tokenizer(shape.vocabulary)
        self.texts = make_texts(self.notes, tokenizer, self.counts[which], which, self.longest)
        self.ids = [f"t{i}" for i in range(len(self.texts))]
        tokens = np.array([len(ids) for ids in tokenizer(self.texts)["input_ids"]])
        folder = self.work / name
        return tokenizer, tokens, folder, build_model(shape, tokenizer, folder, self.device, self.torch_dtype)

    def causal(self, shapes: dict[str, Shape]) -> None:
        from lmaudit.signals.compute import loaded_models

        for name, shape in shapes.items():
            tokenizer, tokens, folder, model = self.prepared(name, shape, 0)
            flops = causal_flops(model, shape, tokens)
            seconds = second_time(lambda m=model, t=tokenizer: plain_losses(m, t, self.texts, self.device), self.device)
            del model
            self.release()
            for way, run in self.signal_ways(folder, ("clm_loss", "clm_tokens")).items():
                self.scored("causal scoring", name, way, self.texts, second_time(run, self.device), flops)
            self.scored("causal scoring", name, "plain padded batch of 32", self.texts, seconds, flops)
            loaded_models((), "clm", None)  # lets lmaudit's kept model go
            self.release()
            self.remove(folder)

    def energy(self, shapes: dict[str, Shape]) -> None:
        from lmaudit.signals.compute import loaded_models

        for name, shape in shapes.items():
            _, tokens, folder, model = self.prepared(name, shape, 1)
            flops = energy_flops(model, shape, tokens, self.ids)
            del model
            self.release()
            for way, run in self.signal_ways(folder, ("mlm_energy",)).items():
                self.scored("masked-LM energy, K=10", name, way, self.texts, second_time(run, self.device), flops)
            loaded_models((), "mlm", None)
            self.release()
            self.remove(folder)

    def training(self, shapes: dict[str, Shape]) -> None:
        from lmaudit.models.recipe import DPSettings

        epochs = self.counts[3]
        for name, shape in shapes.items():
            tokenizer = self.tokenizer(shape.vocabulary)
            texts = make_texts(self.notes, tokenizer, self.counts[2], 2, self.longest)
            tokens = sum(min(len(ids), MAX_TOKENS) for ids in tokenizer(texts)["input_ids"])
            folder = self.work / name
            build_model(shape, tokenizer, folder, "cpu", torch.float32)  # fp32 master weights, as training keeps
            plain = tokens / self.plain_epoch(folder, texts, epochs)
            ours = tokens / self.lmaudit_epoch(folder, texts, epochs, None)
            private = tokens / self.lmaudit_epoch(folder, texts, epochs, DPSettings(noise_multiplier=1.0))
            work = f"{len(texts)} texts, {tokens} tokens an epoch, batches of 32"
            self.row("training", name, "plain transformers loop", work, tokens / plain, plain, "tokens/s")
            self.row("training", name, "lmaudit train_language_model", work, tokens / ours, ours, "tokens/s",
                     ratio=ours / plain)
            self.row("training, DP-SGD", name, "lmaudit, noise multiplier 1.0 (ratio: cost over non-DP)", work,
                     tokens / private, private, "tokens/s", ratio=ours / private)
            self.remove(folder)

    def lmaudit_epoch(self, folder: Path, texts: list[str], epochs: int, dp) -> float:
        """Seconds of one epoch of lmaudit's training: the difference of an `epochs` run and a 1-epoch run, per epoch."""
        from lmaudit.models.recipe import TrainingRecipe
        from lmaudit.models.train import train_language_model

        seconds = {}
        for count in (1, epochs):
            recipe = TrainingRecipe(init_from=folder, epochs=count, batch_size=32, max_length=MAX_TOKENS, seed=0,
                                    device=self.device, precision=self.dtype, dp=dp)
            synchronize(self.device)
            tick = time.perf_counter()
            train_language_model("clm", texts, self.work / f"trained-{self.store().name}", recipe)
            synchronize(self.device)
            seconds[count] = time.perf_counter() - tick
            self.release()
        difference = (seconds[epochs] - seconds[1]) / (epochs - 1)
        # An epoch shorter than the timing noise (a tiny run on a busy CPU) can make the difference negative: then the
        # longer run's seconds per epoch, loading and saving included.
        return difference if difference > 0 else seconds[epochs] / epochs

    def plain_epoch(self, folder: Path, texts: list[str], epochs: int) -> float:
        """Mean seconds of the epochs after the first of a plain transformers training loop."""
        from transformers import (
            AutoModelForCausalLM,
            AutoTokenizer,
            DataCollatorForLanguageModeling,
            get_linear_schedule_with_warmup,
        )

        torch.manual_seed(0)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(self.device).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)  # lmaudit's fine-tuning rate
        encoded = tokenizer(texts, truncation=True, max_length=MAX_TOKENS)["input_ids"]
        collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
        steps = -(-len(texts) // 32)
        schedule = get_linear_schedule_with_warmup(optimizer, steps, steps * epochs)
        seconds = []
        for _ in range(epochs):
            tick = time.perf_counter()
            for batch_indices in np.array_split(np.random.permutation(len(texts)), steps):
                batch = {key: value.to(self.device) for key, value in
                         collator([{"input_ids": encoded[i]} for i in batch_indices]).items()}
                with torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16, enabled=self.dtype == "bf16"):
                    loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                loss.item()
            synchronize(self.device)
            seconds.append(time.perf_counter() - tick)
        del model, optimizer
        self.release()
        return float(np.mean(seconds[1:]))

    def release(self) -> None:
        import gc

        gc.collect()
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    @staticmethod
    def remove(folder: Path) -> None:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def header(args: argparse.Namespace, peak: PeakMeter) -> str:
    """The device, the versions, the commit and the peak, above the table."""
    import transformers

    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else (platform.processor() or platform.machine())
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip() or "unknown"
    run = "tiny shapes" if args.tiny else "quick (Pythia-1B and BERT-base sizes)" if args.quick else "every shape"
    return (f"Device: {device} ({args.device}), {args.dtype}; torch {torch.__version__}, transformers "
            f"{transformers.__version__}; commit {commit}; {run}. Measured {args.dtype} matrix-multiply peak: "
            f"{peak.describe()}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="the Pythia-1B and BERT-base shapes only, fewer texts")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (2 x 64) and a dozen texts: a CPU test run")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bf16", choices=sorted(TORCH_DTYPES))
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU is visible to torch here (give --device cpu --tiny for a test run)")
    causal, masked, trained = ((TINY["causal"], TINY["masked"], TINY["trained"]) if args.tiny else
                               (dict(list(CAUSAL.items())[:1]), dict(list(MASKED.items())[:1]), TRAINED) if args.quick
                               else (CAUSAL, MASKED, TRAINED))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        bench = Bench(args, Path(work))
        bench.meter.measure()
        bench.causal(causal)
        bench.energy(masked)
        bench.training(trained)
        bench.meter.measure()
    # Rates were divided by the peak before the last measurement: divide again by the larger, if it is.
    for row in bench.rows:
        if row["fraction of peak"] != "-":
            row["fraction of peak"] = format(float(row["rate"]) * 1e12 / bench.meter.peak, ".3f")
    peak_row = {key: "-" for key in bench.rows[0]} | {
        "measurement": "matmul peak", "way": f"best {bench.meter.size}x{bench.meter.size} {args.dtype} matmul",
        "work": f"{len(bench.meter.measured)} measurements of 3 s", "rate": format(bench.meter.peak / 1e12, ".4g"),
        "unit": "TFLOP/s"}
    text = (header(args, bench.meter) + f" Whole run {time.perf_counter() - started:.0f} s.\n\n"
            + markdown_table([peak_row, *bench.rows]))
    name = "gpu" + ("-tiny" if args.tiny else "-quick" if args.quick else "") + f"-{args.device}-{args.dtype}"
    publish(text, args.out, name)


if __name__ == "__main__":
    main()
