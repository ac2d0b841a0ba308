"""The `lmaudit` command line: thin click commands that parse options and call the pipeline.

Every command takes -h/--help; every option says what it does and its default. Options whose value is a setting of the
configuration take their default (and the text of it in the help) from the settings models, so the two cannot drift:
`audit` leaves them None, so that a --config file's value stands unless the option is given. Usage errors and bad
input are one line on stderr, `lmaudit: error: ...`, exit status 2. Logging: see `lmaudit.logs`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click
from pydantic import BaseModel

from lmaudit.attacks.settings import AttackSettings
from lmaudit.canaries.audit import DEFAULT_CANDIDATES
from lmaudit.canaries.make import DEFAULT_FORMAT as DEFAULT_SECRET_FORMAT
from lmaudit.canaries.make import DEFAULT_SECRET_DIGITS
from lmaudit.canaries.make import KINDS as CANARY_KINDS
from lmaudit.config import AUDITED_OUTPUTS, NONMEMBER_SET_NAME, ROLE_FILE_FIELDS, AuditConfig
from lmaudit.data.roles import NONMEMBER, SHADOW_MEMBER, SHADOW_NONMEMBER
from lmaudit.errors import InputError
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models.recipe import SIZES, DPSettings, LoraSettings, TrainingRecipe
from lmaudit.models.source import QUANTIZATIONS, WEIGHT_DTYPES
from lmaudit.signals.registry import signal_names
from lmaudit.signals.settings import DEVICES, PRECISIONS, SignalSettings
from lmaudit.studies.registry import STUDIES

CONTEXT = {"help_option_names": ["-h", "--help"], "show_default": True}
# Sizes of the demos (demos.py DEMO_SIZES and CLASSIFIER_DEMO_SIZES; not imported here, which would import pandas); a
# test checks that these agree.
DEMO_SIZES = ("smoke", "default")
# The dp sweep's noise multipliers (studies/dp_sweep.py DEFAULT_NOISES, as text).
DEFAULT_NOISES = "2,1,0.1,0.01,0.001,0"
# Which `audit` options are settings of a nested section of the configuration; --seed sets signal.seed and
# evaluation.seed both.
AUDIT_SECTIONS = {
    "signal": ("k", "signal", "precision", "batch_tokens", "seed", "max_length", "masks", "normalize"),
    "evaluation": ("bootstrap", "seed", "length_slices", "length_bounds", "slice_by"),
    "attacks": ("min_k_fraction", "rmia_offline_a"),
}


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _usage_line(err: click.UsageError) -> str:
    """`lmaudit: error: MESSAGE (see 'lmaudit COMMAND -h')` for the command whose options were wrong."""
    names, ctx = [], err.ctx
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    command = " ".join(["lmaudit", *reversed(names)])
    return f"lmaudit: error: {_one_line(err.format_message()).rstrip('.')} (see '{command} -h')"


class _Commands(click.Group):
    """Turn InputError and usage errors (unknown option, bad choice or value, missing option) into one line on stderr
    and exit status 2, never a traceback or a usage block."""

    def make_context(self, info_name, args, parent=None, **extra):
        """The group's own options (lmaudit --bogus): a usage error is one line too."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as err:
            click.echo(_usage_line(err), err=True)
            raise click.exceptions.Exit(2) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as err:
            click.echo(f"lmaudit: error: {err}", err=True)
            ctx.exit(2)
        except click.exceptions.NoArgsIsHelpError:  # `lmaudit train`: the group's help
            raise
        except click.UsageError as err:
            click.echo(_usage_line(err), err=True)
            ctx.exit(2)
        except click.ClickException as err:
            click.echo(f"lmaudit: error: {_one_line(err.format_message())}", err=True)
            ctx.exit(err.exit_code)
        except KeyboardInterrupt:
            click.echo("lmaudit: interrupted; finished work is kept and a rerun resumes from it", err=True)
            ctx.exit(130)


def _progress() -> bool:
    """Progress bars: when stderr is a terminal, unless --quiet."""
    ctx = click.get_current_context(silent=True)
    quiet = bool(ctx is not None and ctx.find_root().params.get("quiet"))
    return sys.stderr.isatty() and not quiet


def _shown(value) -> str:
    """A default as the help writes it."""
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _field_default(model: type[BaseModel], field: str):
    return model.model_fields[field].get_default(call_default_factory=True)


def _setting(*decls: str, model: type[BaseModel], field: str, from_config: bool, help: str, default_text: str | None = None,
             **attrs):
    """An option that sets `model.field`. From a configuration (`audit`): default None, so that a --config file's
    value stands unless the option is given, and the help says the setting's default; else the setting's default is
    the option's, shown by click. `default_text` describes a default that is not a value (e.g. None = the model's
    own)."""
    default = _field_default(model, field)
    if default_text is not None:
        return click.option(*decls, default=None if from_config or default is None else default,
                            help=f"{help}  (default: {default_text})", **attrs)
    if from_config:
        return click.option(*decls, default=None, help=f"{help}  (default: {_shown(default)})", **attrs)
    return click.option(*decls, default=default, show_default=True, help=help, **attrs)


def _apply(function, options):
    for option in reversed(options):
        function = option(function)
    return function


@click.group(cls=_Commands, context_settings=CONTEXT)
@click.version_option(package_name="lmaudit")
@click.option("-v", "--verbose", is_flag=True, help="Log debug lines too (every chunk scored, every epoch).")
@click.option("-q", "--quiet", is_flag=True, help="Log warnings only, and show no progress bars.")
@click.pass_context
def main(ctx: click.Context, verbose: bool, quiet: bool) -> None:
    """Measure how much a language model leaks about its training text (membership inference).

    Stages are logged to stderr (timestamped when stderr is not a terminal); progress bars show on a terminal."""
    from lmaudit import logs

    if verbose and quiet:
        raise click.UsageError("--verbose and --quiet: give one of them", ctx)
    logs.configure(verbose, quiet)
    ctx.call_on_close(logs.reset)


@main.command()
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file (.csv, .jsonl or .parquet).")
@click.option("--patients", default=300, type=click.IntRange(min=1), help="Patients to generate (several notes each).")
@click.option("--seed", default=0, help="Random seed; the same seed gives the same notes.")
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


def _model_options(function):
    """What every train command shares: the size from scratch, the tokenizer, the seed, the batch size."""
    return _apply(function, [
        click.option("--size", default="tiny", type=click.Choice(tuple(SIZES)),
                     help="Size of a model trained from scratch: tiny (2 layers, width 64) < mini < small; not with "
                          "--init-from."),
        click.option("--tokenizer", default=None, type=click.Path(file_okay=False),
                     help="Reuse this tokenizer folder (default: train a WordPiece tokenizer on --data)."),
        click.option("--seed", default=0, help="Seed of the initial weights, the batches and the masks."),
        click.option("--batch-size", default=TrainingRecipe.batch_size, type=click.IntRange(min=1),
                     help="Samples per batch (with --dp: the expected size of the Poisson batches)."),
    ])


def _start_options(function):
    """Where training starts: from scratch, or from a checkpoint, fully or with LoRA adapters."""
    return _apply(function, [
        click.option("--init-from", default=None, type=click.Path(),
                     help="Fine-tune this checkpoint (a folder, or a hub id in the local Hugging Face cache) and its "
                          "tokenizer instead of training from scratch (--size and --tokenizer do not apply)."),
        click.option("--lora", is_flag=True, help="Train LoRA adapters (peft) on --init-from instead of every weight; "
                                                  "the adapter is saved, audit it with --target BASE --adapter OUT."),
        click.option("--lora-rank", default=8, type=click.IntRange(min=1), help="LoRA rank (with --lora)."),
        click.option("--learning-rate", default=None, type=click.FloatRange(min=0, min_open=True),
                     help="AdamW peak learning rate (default 2e-3 from scratch, 5e-5 fine-tuning, 2e-4 LoRA)."),
    ])


def _train_options(function):
    return _apply(function, [
        click.option("--data", required=True, type=click.Path(), help="Corpus file with a 'text' column."),
        click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder the model is saved in."),
        click.option("--epochs", default=30, type=click.IntRange(min=1), help="Passes over the data."),
        _canaries_option(),
    ])


def _canaries_option():
    return click.option("--canaries", default=None, type=click.Path(file_okay=False),
                        help="Plant this folder's canaries (`lmaudit canaries make`: its insert.jsonl) in the training "
                             "data, each once, for `lmaudit canaries audit` (default: none).")


def _with_canaries(corpus, canaries: str | None):
    """The training corpus with the planted canaries of `canaries` appended (each its own group), or as it is."""
    if canaries is None:
        return corpus
    from lmaudit.canaries.make import plant

    return plant(corpus, canaries)


def _dp_options(function):
    return _apply(function, [
        click.option("--dp", is_flag=True, help="Train with DP-SGD (Opacus): Poisson batches, per-sample clipping, noise."),
        click.option("--noise-multiplier", default=None, type=click.FloatRange(min=0),
                     help="DP-SGD noise sigma (with --dp; required there)."),
        click.option("--max-grad-norm", default=1.0, type=click.FloatRange(min=0, min_open=True),
                     help="Per-sample clipping norm (with --dp)."),
        click.option("--delta", default=1e-5, type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
                     help="Delta of the epsilon reported (with --dp)."),
        click.option("--max-samples-per-group", default=None, type=click.IntRange(min=1),
                     help="Keep at most this many samples per group_id (patient, user) (with --dp; default: all)."),
    ])


def _dp_settings(dp: bool, noise_multiplier: float | None, max_grad_norm: float, delta: float,
                 max_samples_per_group: int | None) -> DPSettings | None:
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


def _recipe(size: str, tokenizer: str | None, seed: int, batch_size: int, init_from: str | None, lora: bool,
            lora_rank: int, learning_rate: float | None, **options) -> TrainingRecipe:
    """The training recipe of a train command's options (`options`: the DP options and the command's own)."""
    dp = _dp_settings(*(options.pop(name) for name in ("dp", "noise_multiplier", "max_grad_norm", "delta",
                                                       "max_samples_per_group")))
    return TrainingRecipe(size=size, tokenizer_dir=tokenizer, seed=seed, batch_size=batch_size, init_from=init_from,
                          lora=LoraSettings(rank=lora_rank) if lora else None, learning_rate=learning_rate, dp=dp, **options)


def _train(kind: str, data: str, out: str, canaries: str | None, **options) -> None:
    from lmaudit.data.corpus import load_corpus
    from lmaudit.models.train import train_language_model

    recipe = _recipe(**options)
    corpus = _with_canaries(load_corpus(data), canaries)
    if canaries and recipe.dp and recipe.tokenizer_dir is None and recipe.init_from is None:
        logging.getLogger("lmaudit").warning(
            "the tokenizer is trained here on the training data, canaries included, outside DP-SGD: it can give canaries "
            "away and make a canary audit contradict the accountant; pass --tokenizer (fitted on public text) instead")
    summary = train_language_model(kind, corpus["text"].tolist(), out, recipe, corpus["group_id"].tolist(), _progress(),
                                   Path(out).name)
    saved = (f"the adapter saved to {out} (audit with --target {recipe.init_from} --adapter {out})" if recipe.lora
             else f"saved to {out}")
    click.echo(f"trained on {summary.n_samples} samples for {recipe.epochs} epochs, final loss {summary.final_train_loss:.3f}"
               f"{_dp_line(summary.dp)}; {saved}")


@train.command("mlm")
@_train_options
@_model_options
@_start_options
@_dp_options
def train_mlm_command(**options) -> None:
    """Train a BERT-style masked LM (and a WordPiece tokenizer unless --tokenizer), or fine-tune one (--init-from);
    save as safetensors."""
    _train("mlm", **options)


@train.command("clm")
@_train_options
@_model_options
@_start_options
@_dp_options
def train_clm_command(**options) -> None:
    """Train a GPT-2-style causal LM (and a WordPiece tokenizer unless --tokenizer), or fine-tune one (--init-from), e.g.
    with LoRA; save as safetensors."""
    _train("clm", **options)


@train.command("classifier")
@click.option("--data", required=True, type=click.Path(), help="Training file with 'text' and 'label' columns.")
@click.option("--validation", required=True, type=click.Path(), help="Held-out file (text, label) for early stopping.")
@click.option("--test", "test_data", default=None, type=click.Path(), help="Held-out file (text, label) for the test accuracy.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder the classifier is saved in.")
@_canaries_option()
@click.option("--architecture", default="bert", type=click.Choice(["bert", "lstm"]),
              help="A BERT-style encoder or a 2-layer LSTM (from scratch; --init-from brings its own).")
@click.option("--max-epochs", default=30, type=click.IntRange(min=1), help="Epochs at most (see --patience).")
@click.option("--patience", default=5, type=click.IntRange(min=1),
              help="Stop after this many epochs without a better validation accuracy.")
@click.option("--tokenization", default="wordpiece", type=click.Choice(["wordpiece", "word"]),
              help="The tokenizer trained on the training texts (unless --tokenizer or --init-from): WordPiece, or "
                   "word-level (other words become [UNK]).")
@click.option("--vocab-size", default=4000, type=click.IntRange(min=10), help="Tokens in that tokenizer, at most.")
@click.option("--max-length", default=128, type=click.IntRange(min=4),
              help="Tokens per text, at most (longer texts are cut).")
@_model_options
@_start_options
@_dp_options
def train_classifier_command(data: str, validation: str, test_data: str | None, out: str, canaries: str | None,
                             max_epochs: int, **options) -> None:
    """Train a BERT-style or 2-layer LSTM text classifier with early stopping, or fine-tune a checkpoint with a new
    head (--init-from, fully or with LoRA); save as safetensors."""
    from lmaudit.data.corpus import check_labels, load_corpus
    from lmaudit.models.classifier import ClassifierData, train_classifier

    def labelled(path: str):
        corpus = load_corpus(path)
        check_labels(corpus)
        return corpus

    def texts_and_labels(corpus) -> tuple[list[str], list[str]]:
        return corpus["text"].tolist(), corpus["label"].astype(str).str.strip().tolist()

    recipe = _recipe(epochs=max_epochs, **options)
    training = _with_canaries(labelled(data), canaries)
    check_labels(training)
    classifier_data = ClassifierData(*texts_and_labels(training), texts_and_labels(labelled(validation)),
                                     texts_and_labels(labelled(test_data)) if test_data else None,
                                     training["group_id"].tolist())
    summary = train_classifier(classifier_data, out, recipe, _progress(), Path(out).name)
    held_out = summary.test_accuracy if summary.test_accuracy is not None else summary.validation_accuracy
    click.echo(f"trained on {summary.n_samples} samples, {summary.epochs_run} epochs (best {summary.best_epoch}); "
               f"train accuracy {summary.train_accuracy:.1%}, {summary.gap_measured_on} accuracy {held_out:.1%}, "
               f"gap {100 * summary.generalization_gap:.1f} points{_dp_line(summary.dp)}; saved to {out}")


def _signal_options(from_config: bool, signal_help: str | None = None):
    """How a signal is computed, on `score` and (from_config) `audit` and `canaries audit`: one definition of each
    option; `signal_help` replaces the audit's help of --signal."""

    def seed_option():
        if not from_config:
            return _setting("--seed", model=SignalSettings, field="seed", from_config=False, help="Mask seed.")
        masks, evaluation = _field_default(SignalSettings, "seed"), _field_default(EvaluationSettings, "seed")
        shown = masks if masks == evaluation else f"{masks} for the masks, {evaluation} for the evaluation"
        return click.option("--seed", default=None, type=int, help="Seed of the random masks and of the evaluation's "
                            f"bootstrap and balanced repeats (signal.seed and evaluation.seed) (default: {shown}).")

    def setting(*decls, **attrs):
        return _setting(*decls, model=SignalSettings, from_config=from_config, **attrs)

    signal_help = signal_help or ("The signal of every model (see docs/attacks.md); classifier: audit a text classifier "
                                  "with shadow-calibrated attacks (needs --shadow)." if from_config else
                                  "The per-sample signal to compute (lower = more likely under the model).")

    def decorate(function):
        return _apply(function, [
            setting("--signal", field="signal", type=click.Choice(signal_names(*AUDITED_OUTPUTS) if from_config
                                                                   else signal_names("loss")), help=signal_help),
            setting("--k", field="k", type=click.IntRange(min=1), help="Random masks per sample (MLM signals)."),
            setting("--masks", field="masks", type=click.Choice(["random", "all"]),
                    help="random: --k random masks per sample; all: every mask of --k tokens (MLM signals)."),
            setting("--normalize", field="normalize", type=click.Choice(["sum", "mean"]),
                    help="Per-mask sum (Eq. 2) or mean (released code) of the masked tokens' losses (MLM signals).",
                    default_text="the signal's own: sum for mlm_energy, mean for mlm_pll"),
            seed_option(),
            setting("--max-length", field="max_length", type=click.IntRange(min=3), help="Truncate to this many tokens.",
                    default_text="the model's maximum"),
            setting("--precision", field="precision", type=click.Choice(PRECISIONS),
                    help="Matrix-multiply precision (log-softmax is always fp32); auto = bf16 where the hardware has it."),
            setting("--batch-tokens", field="batch_tokens", type=click.IntRange(min=64),
                    help="Tokens per batch (padded); halved automatically on out-of-memory errors."),
        ])

    return decorate


def _placement_options(from_config: bool):
    """How the models are loaded and where they run: device, weight dtype, device map, quantization."""

    def setting(*decls, **attrs):
        return _setting(*decls, model=AuditConfig, from_config=from_config, **attrs)

    def decorate(function):
        return _apply(function, [
            setting("--device", field="device", type=click.Choice(DEVICES),
                    help="Where the models run; auto = cuda when available, else cpu."),
            setting("--dtype", field="dtype", type=click.Choice(WEIGHT_DTYPES),
                    help="Load the weights in this dtype (bf16 halves the memory of fp32)."),
            setting("--device-map", field="device_map", type=click.Choice(["auto"]),
                    help="auto: spread a model too large for one GPU over the GPUs and the CPU (accelerate).",
                    default_text="none: one device"),
            setting("--quantization", field="quantization", type=click.Choice(QUANTIZATIONS),
                    help="Load the weights in 8 or 4 bits (bitsandbytes, CUDA; pip install 'lmaudit[gpu]').",
                    default_text="none"),
        ])

    return decorate


def _backend_options(from_config: bool, what: str):
    """Where the signals are computed: in this process, or on a Ray cluster."""

    def setting(*decls, **attrs):
        return _setting(*decls, model=AuditConfig, from_config=from_config, **attrs)

    def decorate(function):
        return _apply(function, [
            setting("--backend", field="backend", type=click.Choice(["local", "ray"]),
                    help=f"Where the {what} computed: in this process, or on the workers of a Ray cluster "
                         "(pip install 'lmaudit[ray]')."),
            setting("--ray-address", field="ray_address", help="Ray cluster to join (auto, ray://HEAD:10001), with "
                    "--backend ray.", default_text="RAY_ADDRESS, else a new local cluster"),
            setting("--ray-workers", field="ray_workers", type=click.IntRange(min=1),
                    help="Ray workers, one copy of the models each (with --backend ray).",
                    default_text="one per GPU with --device cuda, else one per CPU"),
        ])

    return decorate


def _length_bounds(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    """'20,60' -> (20, 60): increasing positive token counts."""
    if value is None:
        return None
    try:
        bounds = tuple(int(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"'{value}': expected token counts separated by commas, e.g. 20,60") from None
    if any(bound < 1 for bound in bounds) or list(bounds) != sorted(set(bounds)):
        raise click.BadParameter(f"'{value}': expected increasing positive token counts, e.g. 20,60")
    return bounds


def _evaluation_options(from_config: bool):
    """How the attacks are evaluated, on `attack` and (from_config) `audit`: one definition of each option."""

    def setting(*decls, **attrs):
        return _setting(*decls, model=EvaluationSettings, from_config=from_config, **attrs)

    def decorate(function):
        return _apply(function, [
            setting("--bootstrap", field="bootstrap", type=click.IntRange(min=10),
                    help="Bootstrap resamples of the AUC's 95% interval (TPR intervals are exact, Clopper-Pearson)."),
            setting("--length-slices", field="length_slices", type=click.IntRange(min=0),
                    help="Report every sample-level attack on this many quantile bins of token length too (0 = none)."),
            click.option("--length-bounds", default=None, callback=_length_bounds, metavar="N,N,...",
                         help="Token-length bounds of the length slices instead of quantiles, e.g. 20,60: "
                              "[min, 20), [20, 60), [60, max] (default: none: --length-slices quantile bins)."),
            click.option("--slice-by", multiple=True, metavar="COLUMN",
                         help="A corpus column whose values each make a sample-level slice of the report; repeat for "
                              "several (default: none)."),
        ])

    return decorate


@main.command()
@click.option("--model", required=True, type=click.Path(), help="Model folder (save_pretrained or `lmaudit train`).")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter folder to apply to --model.")
@click.option("--data", required=True, type=click.Path(), help="Corpus file with a 'text' column (.csv, .jsonl, .parquet).")
@_signal_options(from_config=False)
@_placement_options(from_config=False)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file (.csv, .jsonl or .parquet).")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Signal store (default: cache/ next to --out).")
@click.option("--shard", default=None, help="Score only part i of N (e.g. 0/4); N processes sharing --cache-dir split the "
                                            "work (default: all).")
@click.option("--chunk-size", default=512, type=click.IntRange(min=1), help="Samples per stored chunk.")
@_backend_options(from_config=False, what="chunks are")
def score(model: str, adapter: str | None, data: str, signal: str, k: int, masks: str, normalize: str | None, seed: int,
          max_length: int | None, precision: str, batch_tokens: int, device: str, dtype: str, device_map: str | None,
          quantization: str | None, out: str, cache_dir: str | None, shard: str | None, chunk_size: int, backend: str,
          ray_address: str | None, ray_workers: int | None) -> None:
    """Compute a per-sample LM signal (nats; lower = more likely under the model), reading --data in chunks."""
    from lmaudit.backends.choose import signal_backend
    from lmaudit.models.load import resolve_device
    from lmaudit.models.source import ModelSource, Placement
    from lmaudit.signals.compute import Scoring, score_file
    from lmaudit.signals.store import default_cache_dir, parse_shard

    settings = SignalSettings(signal=signal, k=k, masks=masks, normalize=normalize, seed=seed, max_length=max_length,
                              precision=precision, batch_tokens=batch_tokens)
    placement = Placement(resolve_device(device), dtype, device_map, quantization)
    scoring = Scoring(Path(cache_dir) if cache_dir else default_cache_dir(Path(out).parent), placement,
                      signal_backend(backend, ray_address, ray_workers, placement.device), _progress(), chunk_size)
    written, truncated = score_file(ModelSource(model, adapter), data, out, settings, scoring,
                                    parse_shard(shard) if shard is not None else None)
    click.echo(f"wrote {signal} of {written} samples to {out} ({truncated} truncated)")


ROLE_FILE_HELP = {
    SHADOW_MEMBER: "The shadow classifier's training data.", SHADOW_NONMEMBER: "Data the shadow classifier did not see.",
    NONMEMBER: "Samples the target did not train on. Repeat as NAME=FILE for several sets (e.g. other hospitals): each "
               "result is also reported per set, and the verdict audits the first.",
}


def _role_file_options(function):
    """One --<role file> option per role (--members, --nonmembers, ...), as the configuration names them; --nonmembers
    may repeat, as NAME=FILE, for several non-member sets."""
    for role, field in reversed(ROLE_FILE_FIELDS.items()):
        several = {"multiple": True, "metavar": "[NAME=]FILE"} if role == NONMEMBER else {"default": None}
        function = click.option(f"--{field.replace('_', '-')}", type=click.Path(), **several,
                                help=ROLE_FILE_HELP.get(role, f"Samples of role {role}."))(function)
    return function


def _named_set(value: str) -> bool:
    name = value.split("=", 1)[0]
    return "=" in value and NONMEMBER_SET_NAME.fullmatch(name) is not None and not Path(value).exists()


def nonmember_files(values: tuple[str, ...]) -> str | dict[str, str] | None:
    """--nonmembers as the configuration takes it: one FILE as given; several, or NAME=FILE, as sets by name (an
    unnamed file is named by its stem)."""
    if not values:
        return None
    if len(values) == 1 and not _named_set(values[0]):
        return values[0]
    sets: dict[str, str] = {}
    for value in values:
        name, path = value.split("=", 1) if _named_set(value) else (Path(value).stem, value)
        if name in sets:
            raise InputError(f"--nonmembers: two sets named '{name}'; name each set with NAME=FILE")
        sets[name] = path
    return sets


def _audit_setting(*decls, field: str, help: str, model: type[BaseModel] = AuditConfig, **attrs):
    return _setting(*decls, model=model, field=field, from_config=True, help=help, **attrs)


@main.command()
@click.option("--config", "config_path", default=None, type=click.Path(),
              help="audit.yaml with the same settings; options given here override its values.")
@click.option("--target", default=None, type=click.Path(), help="The audited model's folder.")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter applied to --target (the base).")
@click.option("--reference", multiple=True, type=click.Path(),
              help="Reference model, never trained on the audited members; repeat for several (RMIA, LiRA).")
@click.option("--reference-adapter", multiple=True, type=click.Path(),
              help="A PEFT adapter applied to a reference; one per --reference, in the same order.")
@click.option("--shadow", default=None, type=click.Path(), help="Shadow classifier (--signal classifier).")
@_role_file_options
@click.option("--data", default=None, type=click.Path(), help="One file with a 'role' column instead of per-role files.")
@click.option("--out", default=None, type=click.Path(file_okay=False), help="Folder of the report.")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False), help="Signal store (default: cache/ in --out).")
@_signal_options(from_config=True)
@_evaluation_options(from_config=True)
@_placement_options(from_config=True)
@_audit_setting("--whitebox", field="whitebox", is_flag=True, default_text="off",
                help="Also run the white-box attacks: logistic regression on the target's attention and gradient features.")
@_audit_setting("--include-text", field="include_text", is_flag=True, default_text="off",
                help="Copy the sample texts into scores.parquet.")
@_audit_setting("--allow-tokenizer-mismatch", field="allow_tokenizer_mismatch", is_flag=True, default_text="off",
                help="Audit even when a reference's tokenizer differs from the target's (masks are then not paired); "
                     "the report's warnings and verdict say so.")
@_audit_setting("--token-signal", field="token_signal", type=click.Choice(signal_names("tokens")), default_text="none",
                help="Also compute this per-token signal of the target for the token-level attacks (e.g. mlm_tokens "
                     "beside --signal mlm_energy); --signal clm_tokens needs none.")
@_audit_setting("--lowercase/--no-lowercase", field="lowercase",
                help="Token signals: score the lowercased texts too, for the lowercase attack (one more pass).")
@_audit_setting("--recall-prefix", field="recall_prefix", type=click.IntRange(min=0),
                help="Token signals: population samples in ReCaLL's non-member prefix (0 = no ReCaLL).")
@_audit_setting("--neighbours", field="neighbours", type=click.IntRange(min=0),
                help="Token signals: neighbour texts per sample for the neighbourhood attack (N more passes; 0 = off).")
@_audit_setting("--neighbour-words", field="neighbour_words", type=click.IntRange(min=1), help="Words replaced per neighbour.")
@_audit_setting("--neighbour-model", field="neighbour_model", type=click.Path(),
                help="Masked LM that proposes the neighbours' words.", default_text="the first reference, if a masked LM")
@_audit_setting("--frequency-data", field="frequency_data", type=click.Path(), default_text="none",
                help="Non-audited text whose token frequencies DC-PDD uses, besides the population's.")
@_audit_setting("--min-k-fraction", model=AttackSettings, field="min_k_fraction",
                type=click.FloatRange(min=0, max=1, min_open=True),
                help="Share of least likely tokens Min-K% and Min-K%++ average.")
@_audit_setting("--rmia-offline-a", model=AttackSettings, field="rmia_offline_a",
                type=click.FloatRange(min=0, max=1, min_open=True),
                help="RMIA's offline scaling a (1: the references' mean; see docs/attacks.md).")
@_backend_options(from_config=True, what="signals are")
def audit(config_path: str | None, **options) -> None:
    """Audit a model: signals of target (and references or shadow), every attack the data allows, the report."""
    from lmaudit.audit.run import run_audit
    from lmaudit.config import load_config, validated
    from lmaudit.report.tables import summary_table

    options["nonmembers"] = nonmember_files(options["nonmembers"])
    options["reference"] = list(options["reference"]) or None
    options["reference_adapter"] = list(options["reference_adapter"]) or None
    options["slice_by"] = tuple(options["slice_by"]) or None
    seed = options.pop("seed")
    sections = {section: {k: (seed if k == "seed" else options.pop(k)) for k in keys} for section, keys in AUDIT_SECTIONS.items()}
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
@click.option("--scores", required=True, type=click.Path(),
              help="sample_id, role, target_loss[, reference_loss or reference_loss_1, _2, ..., group_id, length]")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder of the report.")
@_evaluation_options(from_config=False)
@_setting("--seed", model=EvaluationSettings, field="seed", from_config=False,
          help="Seed of the bootstrap and the balanced repeats.")
def attack(scores: str, out: str, bootstrap: int, length_slices: int, length_bounds: tuple[int, ...] | None,
           slice_by: tuple[str, ...], seed: int) -> None:
    """Audit from precomputed losses (lower = more likely under the model): same attacks and report."""
    from lmaudit.audit.run import run_attack
    from lmaudit.report.tables import summary_table

    settings = EvaluationSettings(bootstrap=bootstrap, seed=seed, length_slices=length_slices,
                                  length_bounds=length_bounds or (), slice_by=tuple(slice_by))
    report = run_attack(scores, out, settings)
    click.echo(summary_table(report))
    click.echo(f"report: {Path(out) / 'report.html'}")


def _demo_size_option(default: str):
    """The size of a demo's data and models, shared by `demo` and `dp-sweep` (demos.py DEMO_SIZES)."""
    return click.option("--size", default=default, type=click.Choice(DEMO_SIZES),
                        help="smoke: a small, quick run that checks the setup; default: the size the README's numbers "
                             "come from.")


@main.command()
@click.option("--out", default=None, type=click.Path(file_okay=False), help="Output folder (default: runs/demo, "
                                                                            "runs/demo-<suite> for the other suites).")
@_demo_size_option("default")
@click.option("--seed", default=0, help="Seed of the generated data, the models and the audit.")
@click.option("--suite", default="mlm", type=click.Choice(["mlm", "causal", "classifier"]),
              help="mlm: BERT models, MLM energy, likelihood ratio; causal: GPT-2 models, next-token loss; "
                   "classifier: topic classifiers of user posts, shadow-calibrated sample- and user-level attacks.")
@click.option("--architecture", default="bert", type=click.Choice(["bert", "lstm"]),
              help="Classifier architecture (--suite classifier).")
def demo(out: str | None, size: str, seed: int, suite: str, architecture: str) -> None:
    """Run the whole audit on generated data (clinical notes, or user posts) with tiny models trained on the spot."""
    from lmaudit.demos import default_out, run_demo
    from lmaudit.report.tables import summary_table

    out = out or default_out(suite)
    report = run_demo(out, size, seed, progress=_progress(), suite=suite, architecture=architecture)
    click.echo(summary_table(report))
    click.echo(f"report: {Path(out) / 'report.html'}")


@main.command(epilog="Studies: " + "; ".join(f"{spec.name}: {spec.summary}" for spec in STUDIES) + ".")
@click.argument("name", required=False, type=click.Choice([spec.name for spec in STUDIES]), metavar="NAME")
@click.option("--config", "config_file", default=None, type=click.Path(dir_okay=False),
              help="A study YAML file (a grid of training and audit settings, with its own size and seed; see "
                   "docs/studies.md) instead of NAME.")
@click.option("--out", default=None, type=click.Path(file_okay=False), help="Output folder (default: runs/study-NAME).")
@_demo_size_option("smoke")
@click.option("--seed", default=0, help="Seed of the generated data, the models and the audits.")
@click.option("--cells", "cell_patterns", multiple=True, metavar="PATTERN",
              help="Run only the cells whose names match this shell pattern (repeatable), e.g. 'classifier-*'; "
                   "study.json and study.html then tabulate those.")
def study(name: str | None, config_file: str | None, out: str | None, size: str, seed: int,
          cell_patterns: tuple[str, ...]) -> None:
    """Run a study: train and audit a grid of settings, then tabulate and plot it (study.json, study.html); NAME is one
    of the studies below. A rerun keeps every finished cell."""
    from lmaudit.report.study import study_lines
    from lmaudit.studies.registry import run_config_study, run_named_study

    if (name is None) == (config_file is None):
        raise InputError("give a study NAME or --config FILE (one of them); see 'lmaudit study -h'")
    if config_file is not None:
        from lmaudit.studies.grid import load_grid_config

        out = out or f"runs/study-{load_grid_config(config_file).study}"
        document = run_config_study(config_file, out, _progress(), cell_patterns)
    else:
        out = out or f"runs/study-{name}"
        document = run_named_study(name, out, size, seed, _progress(), cell_patterns)
    click.echo("\n".join(study_lines(document)))
    click.echo(f"report: {Path(out) / 'study.html'}")


@main.group()
def canaries() -> None:
    """Plant canaries in a training run and audit them: a lower bound on epsilon from one run (Steinke et al. 2023),
    and the exposure of planted secrets (Carlini et al. 2019)."""


@canaries.command("make")
@click.option("--n", "count", required=True, type=click.IntRange(min=2),
              help="Canaries to make (each planted with probability 1/2); hundreds to thousands for a useful bound.")
@click.option("--kind", default="secret", type=click.Choice(CANARY_KINDS),
              help="secret: a random number in the --format sentence (exposure measurable); sample: held-out real "
                   "samples from --source.")
@click.option("--format", "secret_format", default=DEFAULT_SECRET_FORMAT,
              help="The secret canaries' sentence, with {secret} where the random number goes.")
@click.option("--secret-digits", default=DEFAULT_SECRET_DIGITS, type=click.IntRange(min=1),
              help="Digits of each secret (--kind secret).")
@click.option("--source", default=None, type=click.Path(),
              help="Held-out samples (never trained on) to draw canaries from (--kind sample); a 'label' column makes "
                   "classifier canaries.")
@click.option("--exclude", multiple=True, type=click.Path(),
              help="A file whose texts are never drawn as canaries (--kind sample): give your training data (repeatable).")
@click.option("--seed", default=None, type=int,
              help="Seed of the secrets or the draw, and of which canaries are planted; it rebuilds the key, so keep it "
                   "private  (default: drawn from the operating system's entropy, recorded in canaries.json).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="New folder for the canaries and the key.")
def canaries_make(count: int, kind: str, secret_format: str, secret_digits: int, source: str | None,
                  exclude: tuple[str, ...], seed: int | None, out: str) -> None:
    """Make canaries: canaries.jsonl (all), insert.jsonl (those to plant), key.parquet (which were planted; private)."""
    from lmaudit.canaries.make import INSERT_FILE, make_canaries, planted_canaries

    made = make_canaries(out, kind, count, seed, secret_format, secret_digits, source, exclude)
    click.echo(f"made {made.count} {kind} canaries; plant the {len(planted_canaries(out))} in "
               f"{Path(out) / INSERT_FILE} (or train with --canaries {out}); keep {out} private")


@canaries.command("audit")
@click.option("--model", "target", required=True, type=click.Path(), help="The trained model's folder.")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter applied to --model.")
@click.option("--reference", multiple=True, type=click.Path(),
              help="Reference model(s) never trained on the canaries (repeatable; the likelihood ratio needs one).")
@click.option("--canaries", "folder", required=True, type=click.Path(file_okay=False),
              help="The canary folder the model was trained with.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder of the canary report.")
@click.option("--attack", default=None,
              help="The registered attack that scores the canaries (higher = guessed planted; see docs/attacks.md)  "
                   "(default: likelihood_ratio for sample canaries with --reference, else loss).")
@click.option("--delta", default=None, type=click.FloatRange(min=0, max=1, max_open=True),
              help="Delta of the bound (default: the model's recorded DP-SGD delta, else 0).")
@click.option("--candidates", default=DEFAULT_CANDIDATES, type=click.IntRange(min=0),
              help="Random secrets scored to measure each secret canary's exposure (at least 20; 0: no exposure).")
@click.option("--include-text", is_flag=True, help="Write the canaries' text in canary_scores.parquet.")
@_signal_options(from_config=True, signal_help="The signal of the model and the references: an LM's loss signal, or "
                                                "classifier (the classifier's loss on each canary's label).")
@_placement_options(from_config=True)
def canaries_audit(target: str, adapter: str | None, reference: tuple[str, ...], folder: str, out: str,
                   attack: str | None,
                   delta: float | None, candidates: int, include_text: bool, seed: int | None, **options) -> None:
    """Audit planted canaries: score them, guess which were planted, bound epsilon; exposure for secrets."""
    from lmaudit.canaries.audit import audit_canaries, canary_lines
    from lmaudit.config import validated

    signal = {key: options.pop(key) for key in AUDIT_SECTIONS["signal"] if key in options}
    seeds = {"seed": seed} if seed is not None else {}
    config = validated({"target": target, "adapter": adapter, "reference": list(reference) or None, "out": out,
                        "include_text": include_text, **{k: v for k, v in options.items() if v is not None},
                        "evaluation": seeds, "signal": {k: v for k, v in signal.items() if v is not None} | seeds},
                       "command line")
    result = audit_canaries(config, folder, attack, candidates, delta, progress=_progress())
    click.echo("\n".join(canary_lines(result.report)))
    click.echo(f"report: {Path(out) / 'canary_report.html'}")


@main.command("dp-sweep")
@click.option("--out", default="runs/dp-sweep", type=click.Path(file_okay=False), help="Output folder.")
@click.option("--noise", default=DEFAULT_NOISES, help="Noise multipliers, comma-separated; 0 = clipping without noise.")
# smoke by default: at the default size (100 epochs per DP-SGD target) a sweep takes over an hour on 2 CPU cores.
@_demo_size_option("smoke")
@click.option("--epochs", default=None, type=click.IntRange(min=1), help="Training epochs of the targets (default: the size's).")
@click.option("--seed", default=0, help="Seed of the generated data, the models and the audits.")
@click.option("--max-grad-norm", default=1.0, type=click.FloatRange(min=0, min_open=True), help="Per-sample clipping norm.")
@click.option("--delta", default=1e-5, type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
              help="Delta of the epsilons (the accountants' and the empirical lower bounds).")
@click.option("--max-samples-per-group", default=50, type=click.IntRange(min=1), help="Notes kept per patient.")
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
