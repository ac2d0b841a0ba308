"""The `lmaudit` command line: thin click commands that parse options and call the pipeline."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from lmaudit.config import AUDITED_OUTPUTS, ROLE_FILE_FIELDS
from lmaudit.data.roles import SHADOW_MEMBER, SHADOW_NONMEMBER
from lmaudit.errors import InputError
from lmaudit.models.load import QUANTIZATIONS, WEIGHT_DTYPES
from lmaudit.signals.base import DEVICES, PRECISIONS
from lmaudit.signals.registry import signal_names


class _Commands(click.Group):
    """Turn InputError into one line on stderr and exit status 2, never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as err:
            click.echo(f"lmaudit: error: {err}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo("lmaudit: interrupted; finished work is kept and a rerun resumes from it", err=True)
            ctx.exit(130)


def _progress() -> bool:
    return sys.stderr.isatty()


@click.group(cls=_Commands)
@click.version_option(package_name="lmaudit")
def main() -> None:
    """Measure how much a language model leaks about its training text (membership inference)."""


@main.command()
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file (.csv, .jsonl or .parquet).")
@click.option("--patients", default=300, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True)
@click.option("--insert-names", is_flag=True, help="Prepend the patient's name to every sample (the paper's Base-b).")
def synth(out: str, patients: int, seed: int, insert_names: bool) -> None:
    """Generate synthetic clinical notes (one row per sample, with patient and admission ids)."""
    from lmaudit.data.corpus import table_kind, write_table
    from lmaudit.data.synth import generate_notes

    table_kind(out)  # refuse an unknown output type before generating
    notes = generate_notes(patients, seed, insert_names)
    write_table(notes, out)
    click.echo(f"wrote {len(notes)} samples of {notes['group_id'].nunique()} patients to {out}")


@main.group()
def train() -> None:
    """Train small models from scratch, or fine-tune a pretrained checkpoint (fully or with LoRA), on a corpus."""


def _start_options(function):
    """Where training starts: from scratch, or from a checkpoint, fully or with LoRA adapters."""
    options = [
        click.option("--init-from", default=None, type=click.Path(),
                     help="Fine-tune this checkpoint (a folder, or a hub id in the local Hugging Face cache) and its "
                          "tokenizer instead of training from scratch (--size and --tokenizer do not apply)."),
        click.option("--lora", is_flag=True, help="Train LoRA adapters (peft) on --init-from instead of every weight; "
                                                  "the adapter is saved, audit it with --target BASE --adapter OUT."),
        click.option("--lora-rank", default=8, show_default=True, type=click.IntRange(min=1), help="LoRA rank (with --lora)."),
        click.option("--learning-rate", default=None, type=click.FloatRange(min=0, min_open=True),
                     help="AdamW peak learning rate (default 2e-3 from scratch, 5e-5 fine-tuning, 2e-4 LoRA)."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _lora_settings(lora: bool, lora_rank: int):
    from lmaudit.models.pretrained import LoraSettings

    return LoraSettings(rank=lora_rank) if lora else None


def _train_options(function):
    options = [
        click.option("--data", required=True, type=click.Path(), help="Corpus file with a 'text' column."),
        click.option("--out", required=True, type=click.Path(file_okay=False)),
        click.option("--epochs", default=30, show_default=True, type=click.IntRange(min=1)),
        click.option("--size", default="tiny", show_default=True, type=click.Choice(["tiny", "mini", "small"])),
        click.option("--tokenizer", default=None, type=click.Path(file_okay=False), help="Reuse this tokenizer folder."),
        click.option("--seed", default=0, show_default=True),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _dp_options(function):
    options = [
        click.option("--dp", is_flag=True, help="Train with DP-SGD (Opacus): Poisson batches, per-sample clipping, noise."),
        click.option("--noise-multiplier", default=None, type=click.FloatRange(min=0), help="DP-SGD noise sigma (with --dp)."),
        click.option("--max-grad-norm", default=1.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
                     help="Per-sample clipping norm (with --dp)."),
        click.option("--delta", default=1e-5, show_default=True, type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
                     help="Delta of the epsilon reported (with --dp)."),
        click.option("--max-samples-per-group", default=None, type=click.IntRange(min=1),
                     help="Keep at most this many samples per group_id (patient, user) (with --dp)."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _dp_settings(dp: bool, noise_multiplier: float | None, max_grad_norm: float, delta: float,
                 max_samples_per_group: int | None):
    from lmaudit.models.dp import DPSettings

    if not dp:
        if noise_multiplier is not None or max_samples_per_group is not None:
            raise InputError("--noise-multiplier and --max-samples-per-group apply to DP training: add --dp")
        return None
    if noise_multiplier is None:
        raise InputError("--dp needs --noise-multiplier (e.g. 1.0; larger is more private and less accurate)")
    return DPSettings(noise_multiplier, max_grad_norm, delta, max_samples_per_group)


def _dp_line(record: dict | None) -> str:
    if not record:
        return ""
    prv = "not computed" if record["epsilon_prv"] is None else f"{record['epsilon_prv']:.3g}"
    return (f"; DP-SGD sigma {record['noise_multiplier']}, clip {record['max_grad_norm']}, {record['steps']} steps: "
            f"epsilon {prv} (PRV), {record['epsilon_rdp']:.3g} (RDP) at delta {record['delta']:g}")


def _train(kind: str, data: str, out: str, epochs: int, size: str, tokenizer: str | None, seed: int, init_from: str | None,
           lora: bool, lora_rank: int, learning_rate: float | None, **dp_options) -> None:
    from lmaudit.data.corpus import load_corpus
    from lmaudit.models.train import train_language_model

    corpus = load_corpus(data)
    summary = train_language_model(kind, corpus["text"].tolist(), out, tokenizer_dir=tokenizer, size=size, epochs=epochs,
                                   seed=seed, progress=_progress(), dp=_dp_settings(**dp_options),
                                   groups=corpus["group_id"].tolist(), init_from=init_from,
                                   lora=_lora_settings(lora, lora_rank), learning_rate=learning_rate)
    saved = f"the adapter saved to {out} (audit with --target {init_from} --adapter {out})" if lora else f"saved to {out}"
    click.echo(f"trained on {summary.n_samples} samples for {epochs} epochs, final loss {summary.final_train_loss:.3f}"
               f"{_dp_line(summary.dp)}; {saved}")


@train.command("mlm")
@_train_options
@_start_options
@_dp_options
def train_mlm_command(data: str, out: str, epochs: int, size: str, tokenizer: str | None, seed: int, **options) -> None:
    """Train a BERT-style masked LM (and a WordPiece tokenizer unless --tokenizer), or fine-tune one (--init-from);
    save as safetensors."""
    _train("mlm", data, out, epochs, size, tokenizer, seed, **options)


@train.command("clm")
@_train_options
@_start_options
@_dp_options
def train_clm_command(data: str, out: str, epochs: int, size: str, tokenizer: str | None, seed: int, **options) -> None:
    """Train a GPT-2-style causal LM (and a WordPiece tokenizer unless --tokenizer), or fine-tune one (--init-from), e.g.
    with LoRA; save as safetensors."""
    _train("clm", data, out, epochs, size, tokenizer, seed, **options)


@train.command("classifier")
@click.option("--data", required=True, type=click.Path(), help="Training file with 'text' and 'label' columns.")
@click.option("--validation", required=True, type=click.Path(), help="Held-out file (text, label) for early stopping.")
@click.option("--test", "test_data", default=None, type=click.Path(), help="Held-out file (text, label) for the test accuracy.")
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.option("--architecture", default="bert", show_default=True, type=click.Choice(["bert", "lstm"]))
@click.option("--size", default="tiny", show_default=True, type=click.Choice(["tiny", "mini", "small"]))
@click.option("--max-epochs", default=30, show_default=True, type=click.IntRange(min=1))
@click.option("--patience", default=5, show_default=True, type=click.IntRange(min=1),
              help="Stop after this many epochs without a better validation accuracy.")
@click.option("--tokenizer", default=None, type=click.Path(file_okay=False), help="Reuse this tokenizer folder.")
@click.option("--seed", default=0, show_default=True)
@_start_options
@_dp_options
def train_classifier_command(data: str, validation: str, test_data: str | None, out: str, architecture: str, size: str,
                             max_epochs: int, patience: int, tokenizer: str | None, seed: int, init_from: str | None,
                             lora: bool, lora_rank: int, learning_rate: float | None, **dp_options) -> None:
    """Train a BERT-style or 2-layer LSTM text classifier with early stopping, or fine-tune a checkpoint with a new
    head (--init-from, fully or with LoRA); save as safetensors."""
    from lmaudit.data.corpus import check_labels, load_corpus
    from lmaudit.models.classifier import train_classifier

    def labelled(path: str):
        corpus = load_corpus(path)
        check_labels(corpus)
        return corpus

    def texts_and_labels(corpus) -> tuple[list[str], list[str]]:
        return corpus["text"].tolist(), corpus["label"].astype(str).str.strip().tolist()

    training = labelled(data)
    texts, labels = texts_and_labels(training)
    groups = training["group_id"].tolist()
    summary = train_classifier(
        texts, labels, out, texts_and_labels(labelled(validation)), texts_and_labels(labelled(test_data)) if test_data else None,
        architecture=architecture, size=size, max_epochs=max_epochs, patience=patience, learning_rate=learning_rate,
        tokenizer_dir=tokenizer, seed=seed, progress=_progress(), dp=_dp_settings(**dp_options), groups=groups,
        init_from=init_from, lora=_lora_settings(lora, lora_rank),
    )
    held_out = summary.test_accuracy if summary.test_accuracy is not None else summary.validation_accuracy
    click.echo(f"trained on {summary.n_samples} samples, {summary.epochs_run} epochs (best {summary.best_epoch}); "
               f"train accuracy {summary.train_accuracy:.1%}, {summary.gap_measured_on} accuracy {held_out:.1%}, "
               f"gap {100 * summary.generalization_gap:.1f} points{_dp_line(summary.dp)}; saved to {out}")


def _signal_options(function):
    options = [
        click.option("--signal", default="mlm_energy", show_default=True, type=click.Choice(signal_names("loss"))),
        click.option("--k", default=10, show_default=True, type=click.IntRange(min=1), help="Random masks per sample."),
        click.option("--masks", default="random", show_default=True, type=click.Choice(["random", "all"])),
        click.option("--normalize", default=None, type=click.Choice(["sum", "mean"]),
                     help="Per-mask sum (Eq. 2, energy default) or mean (released code; PLL default)."),
        click.option("--seed", default=0, show_default=True, help="Mask seed."),
        click.option("--max-length", default=None, type=click.IntRange(min=3), help="Truncate to this many tokens."),
        click.option("--precision", default="fp32", show_default=True, type=click.Choice(PRECISIONS),
                     help="Matrix-multiply precision (log-softmax is always fp32); auto = bf16 where the hardware has it."),
        click.option("--batch-tokens", default=4096, show_default=True, type=click.IntRange(min=64),
                     help="Tokens per batch (padded); halved automatically on out-of-memory errors."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _placement_options(default_device: str | None):
    """How the models are loaded and where they run: device, weight dtype, device map, quantization."""

    def decorate(function):
        options = [
            click.option("--device", default=default_device, show_default=default_device is not None,
                         type=click.Choice(DEVICES), help="Where the models run; auto = cuda when available."),
            click.option("--dtype", default=None, type=click.Choice(WEIGHT_DTYPES),
                         help="Load the weights in this dtype (default fp32; bf16 halves the memory)."),
            click.option("--device-map", default=None, type=click.Choice(["auto"]),
                         help="auto: spread a model too large for one GPU over the GPUs and the CPU (accelerate)."),
            click.option("--quantization", default=None, type=click.Choice(QUANTIZATIONS),
                         help="Load the weights in 8 or 4 bits (bitsandbytes, CUDA; pip install 'lmaudit[gpu]')."),
        ]
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


@main.command()
@click.option("--model", required=True, type=click.Path())
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter folder to apply to --model.")
@click.option("--data", required=True, type=click.Path())
@_signal_options
@_placement_options("cpu")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help=".csv, .jsonl or .parquet")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False), help="Signal store (default: cache/ next to --out).")
@click.option("--shard", default=None, help="Score only part i of N (e.g. 0/4); N processes sharing --cache-dir split the work.")
@click.option("--chunk-size", default=512, show_default=True, type=click.IntRange(min=1), help="Samples per stored chunk.")
@click.option("--backend", default="local", show_default=True, type=click.Choice(["local", "ray"]),
              help="Where the chunks are scored: in this process, or on the workers of a Ray cluster (pip install 'lmaudit[ray]').")
@click.option("--ray-address", default=None, help="Ray cluster to join (auto, ray://HEAD:10001); default RAY_ADDRESS, else a local one.")
@click.option("--ray-workers", default=None, type=click.IntRange(min=1),
              help="Ray workers, one copy of the model each (default: one per GPU with --device cuda, else one per CPU).")
def score(model: str, adapter: str | None, data: str, signal: str, k: int, masks: str, normalize: str | None, seed: int,
          max_length: int | None, precision: str, batch_tokens: int, device: str, dtype: str | None, device_map: str | None,
          quantization: str | None, out: str, cache_dir: str | None, shard: str | None, chunk_size: int, backend: str,
          ray_address: str | None, ray_workers: int | None) -> None:
    """Compute a per-sample LM signal (nats; lower = more likely under the model), reading --data in chunks."""
    from lmaudit.config import signal_backend
    from lmaudit.models.load import ModelSource, Placement, resolve_device
    from lmaudit.signals.base import SignalSettings
    from lmaudit.signals.compute import score_file
    from lmaudit.signals.store import default_cache_dir, parse_shard

    settings = SignalSettings(signal=signal, k=k, masks=masks, normalize=normalize, seed=seed, max_length=max_length,
                              precision=precision, batch_tokens=batch_tokens)
    placement = Placement(resolve_device(device), dtype or "fp32", device_map, quantization)
    written, truncated = score_file(
        ModelSource(model, adapter), data, out, settings, cache_dir or default_cache_dir(Path(out).parent), placement,
        parse_shard(shard) if shard is not None else None, chunk_size,
        signal_backend(backend, ray_address, ray_workers, placement.device), _progress())
    click.echo(f"wrote {signal} of {written} samples to {out} ({truncated} truncated)")


ROLE_FILE_HELP = {
    SHADOW_MEMBER: "The shadow classifier's training data.", SHADOW_NONMEMBER: "Data the shadow classifier did not see.",
}


def _role_file_options(function):
    """One --<role file> option per role (--members, --nonmembers, ...), as the configuration names them."""
    for role, field in reversed(ROLE_FILE_FIELDS.items()):
        function = click.option(f"--{field.replace('_', '-')}", default=None, type=click.Path(),
                                help=ROLE_FILE_HELP.get(role, f"Samples of role {role}."))(function)
    return function


@main.command()
@click.option("--config", "config_path", default=None, type=click.Path(), help="audit.yaml with the same settings.")
@click.option("--target", default=None, type=click.Path())
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter applied to --target (the base).")
@click.option("--reference", multiple=True, type=click.Path(),
              help="Reference model, never trained on the audited members; repeat for several (RMIA, LiRA).")
@click.option("--reference-adapter", multiple=True, type=click.Path(),
              help="A PEFT adapter applied to a reference; one per --reference, in the same order.")
@click.option("--shadow", default=None, type=click.Path(), help="Shadow classifier (--signal classifier).")
@_role_file_options
@click.option("--data", default=None, type=click.Path(), help="One file with a 'role' column instead of per-role files.")
@click.option("--out", default=None, type=click.Path(file_okay=False))
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False))
@click.option("--k", default=None, type=click.IntRange(min=1))
@click.option("--signal", default=None, type=click.Choice(signal_names(*AUDITED_OUTPUTS)),
              help="classifier: audit a text classifier with shadow-calibrated attacks (needs --shadow).")
@click.option("--precision", default=None, type=click.Choice(PRECISIONS))
@click.option("--batch-tokens", default=None, type=click.IntRange(min=64),
              help="Tokens per batch (default 4096); halved automatically on out-of-memory errors.")
@_placement_options(None)
@click.option("--whitebox", is_flag=True, default=None,
              help="Also run the white-box attacks: logistic regression on the target's attention and gradient features.")
@click.option("--include-text", is_flag=True, default=None, help="Copy the sample texts into scores.parquet.")
@click.option("--token-signal", default=None, type=click.Choice(signal_names("tokens")),
              help="Also compute this per-token signal of the target for the token-level attacks (e.g. mlm_tokens "
                   "beside --signal mlm_energy); --signal clm_tokens needs none.")
@click.option("--lowercase/--no-lowercase", default=None,
              help="Token signals: score the lowercased texts too, for the lowercase attack (default on; one more pass).")
@click.option("--recall-prefix", default=None, type=click.IntRange(min=0),
              help="Token signals: population samples in ReCaLL's non-member prefix (default 4; 0 = no ReCaLL).")
@click.option("--neighbours", default=None, type=click.IntRange(min=0),
              help="Token signals: neighbour texts per sample for the neighbourhood attack (default 0: off; N more passes).")
@click.option("--neighbour-words", default=None, type=click.IntRange(min=1), help="Words replaced per neighbour (default 1).")
@click.option("--neighbour-model", default=None, type=click.Path(),
              help="Masked LM that proposes the neighbours' words (default: the first reference, if a masked LM).")
@click.option("--frequency-data", default=None, type=click.Path(),
              help="Non-audited text whose token frequencies DC-PDD uses, besides the population's.")
@click.option("--min-k-fraction", default=None, type=click.FloatRange(min=0, max=1, min_open=True),
              help="Share of least likely tokens Min-K% and Min-K%++ average (default 0.2).")
@click.option("--rmia-offline-a", default=None, type=click.FloatRange(min=0, max=1, min_open=True),
              help="RMIA's offline scaling a (default 1: the references' mean; see docs/attacks.md).")
@click.option("--backend", default=None, type=click.Choice(["local", "ray"]),
              help="Where the signals are computed: in this process (default), or on a Ray cluster (pip install 'lmaudit[ray]').")
@click.option("--ray-address", default=None, help="Ray cluster to join (auto, ray://HEAD:10001); default RAY_ADDRESS, else a local one.")
@click.option("--ray-workers", default=None, type=click.IntRange(min=1),
              help="Ray workers, one copy of the models each (default: one per GPU with --device cuda, else one per CPU).")
def audit(config_path: str | None, **options) -> None:
    """Audit a model: signals of target (and references or shadow), every attack the data allows, the report."""
    from lmaudit.config import load_config, validated
    from lmaudit.pipeline import run_audit
    from lmaudit.report.tables import summary_table

    options["reference"] = list(options["reference"]) or None
    options["reference_adapter"] = list(options["reference_adapter"]) or None
    nested = {"signal": ("k", "signal", "precision", "batch_tokens"), "attacks": ("min_k_fraction", "rmia_offline_a")}
    sections = {section: {k: options.pop(k) for k in keys} for section, keys in nested.items()}
    sections = {section: {k: v for k, v in given.items() if v is not None} for section, given in sections.items()}
    if config_path:
        config = load_config(config_path, options)
        if any(sections.values()):
            config = validated({**config.model_dump(), **{section: {**getattr(config, section).model_dump(), **given}
                                                          for section, given in sections.items()}}, "command line")
    else:
        missing = [f"--{n}" for n in ("target", "members", "nonmembers", "out") if not options.get(n)]
        if missing and not (options.get("data") and "--members" in missing):
            raise InputError(f"missing {', '.join(missing)}; give them or --config audit.yaml")
        values = {k: v for k, v in options.items() if v is not None}
        config = validated({**values, **sections}, "command line")
    report = run_audit(config, progress=_progress())
    click.echo(summary_table(report))
    click.echo(f"report: {Path(config.out) / 'report.html'}")


@main.command()
@click.option("--scores", required=True, type=click.Path(), help="sample_id, role, target_loss[, reference_loss or reference_loss_1, _2, ..., group_id, length]")
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.option("--bootstrap", default=1000, show_default=True, type=click.IntRange(min=10))
@click.option("--seed", default=0, show_default=True)
def attack(scores: str, out: str, bootstrap: int, seed: int) -> None:
    """Audit from precomputed losses (lower = more likely under the model): same attacks and report."""
    from lmaudit.metrics.settings import EvaluationSettings
    from lmaudit.pipeline import run_attack
    from lmaudit.report.tables import summary_table

    report = run_attack(scores, out, EvaluationSettings(bootstrap=bootstrap, seed=seed))
    click.echo(summary_table(report))
    click.echo(f"report: {Path(out) / 'report.html'}")


@main.command()
@click.option("--out", default=None, type=click.Path(file_okay=False), help="Default: runs/demo (runs/demo-<suite>).")
@click.option("--size", default="default", show_default=True, type=click.Choice(["smoke", "default"]))
@click.option("--seed", default=0, show_default=True)
@click.option("--suite", default="mlm", show_default=True, type=click.Choice(["mlm", "causal", "classifier"]),
              help="mlm: BERT models, MLM energy, likelihood ratio; causal: GPT-2 models, next-token loss; "
                   "classifier: topic classifiers of user posts, shadow-calibrated sample- and user-level attacks.")
@click.option("--architecture", default="bert", show_default=True, type=click.Choice(["bert", "lstm"]),
              help="Classifier architecture (--suite classifier).")
def demo(out: str | None, size: str, seed: int, suite: str, architecture: str) -> None:
    """Run the whole audit on generated data (clinical notes, or user posts) with tiny models trained on the spot."""
    from lmaudit.demos import default_out, run_demo
    from lmaudit.report.tables import summary_table

    out = out or default_out(suite)
    report = run_demo(out, size, seed, progress=_progress(), suite=suite, architecture=architecture)
    click.echo(summary_table(report))
    click.echo(f"report: {Path(out) / 'report.html'}")


@main.command("dp-sweep")
@click.option("--out", default="runs/dp-sweep", show_default=True, type=click.Path(file_okay=False))
@click.option("--noise", default="2,1,0.1,0.01,0.001,0", show_default=True,
              help="Noise multipliers, comma-separated; 0 = clipping without noise.")
@click.option("--size", default="smoke", show_default=True, type=click.Choice(["smoke", "default"]))
@click.option("--epochs", default=None, type=click.IntRange(min=1), help="Training epochs (default: the size's).")
@click.option("--seed", default=0, show_default=True)
@click.option("--max-grad-norm", default=1.0, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option("--delta", default=1e-5, show_default=True, type=click.FloatRange(min=0, max=1, min_open=True, max_open=True))
@click.option("--max-samples-per-group", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--whitebox", is_flag=True, help="Also run the white-box attacks at every noise level.")
def dp_sweep(out: str, noise: str, size: str, epochs: int | None, seed: int, max_grad_norm: float, delta: float,
             max_samples_per_group: int, whitebox: bool) -> None:
    """Train one DP-SGD masked LM per noise level on the demo's patients, audit each, compare epsilon and leakage."""
    from lmaudit.report.sweep import sweep_table
    from lmaudit.studies.dp_sweep import run_dp_sweep

    try:
        noises = tuple(float(part) for part in noise.split(","))
    except ValueError:
        raise InputError(f"--noise {noise}: expected comma-separated numbers, e.g. 2,1,0.1,0") from None
    if any(n < 0 for n in noises):
        raise InputError("--noise: noise multipliers must be >= 0")
    sweep = run_dp_sweep(out, noises, size, seed, max_grad_norm, delta, max_samples_per_group, whitebox, _progress(), epochs)
    click.echo(sweep_table(sweep))
    click.echo(f"report: {Path(out) / 'sweep.html'}")


if __name__ == "__main__":
    main()
