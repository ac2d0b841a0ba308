"""Options built from the settings they set, so that an option's default and its help's words for it cannot drift from
the code: each option names a field of a settings model (a pydantic model or a dataclass), whose default it takes.

Options of `audit` (from_config) default to None, so that a --config file's value stands unless the option is given,
and write the setting's default into their help instead of click's [default: ...].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import click
from pydantic import BaseModel

from lmaudit.cli.help import names
from lmaudit.config import AUDITED_OUTPUTS, PlacementSettings, given, validated
from lmaudit.data.columns import COLUMN_OPTIONS, ColumnNames
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models.source import QUANTIZATIONS, WEIGHT_DTYPES
from lmaudit.signals.registry import DEFAULT_SIGNALS, signal_names
from lmaudit.signals.settings import DEFAULT_BATCH_TOKENS, DEVICES, PRECISIONS, SignalSettings

Decorator = Callable[[Callable], Callable]
KINDS = {"mlm": "masked LM", "clm": "causal LM", "classifier": "classifier"}  # how the help names a model family

BATCH_TOKENS_TEXT = (f"sized for the device: {DEFAULT_BATCH_TOKENS['cpu']:,} on a CPU, "
                     f"{DEFAULT_BATCH_TOKENS['cuda']:,} on a GPU")

def default_of(model: type, field: str):
    """The default of a field of a pydantic model or a dataclass (None for a field without one)."""
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model.model_fields[field].get_default(call_default_factory=True)
    default = {f.name: f for f in dataclasses.fields(model)}[field].default
    return None if default is dataclasses.MISSING else default


def shown(value) -> str:
    """A default as the help writes it."""
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def setting(model: type, field: str, *decls: str, help: str, from_config: bool = False, default_text: str | None = None,
            **attrs) -> Decorator:
    """An option that sets `model.field` (declared as `decls`, default --FIELD). From a configuration: default None,
    and the help says the setting's default; else the setting's default is the option's, shown by click.
    `default_text` describes a default that is not a value (e.g. None = the model's own)."""
    decls = decls or (f"--{field.replace('_', '-')}",)
    default = default_of(model, field)
    if default_text is not None:
        return click.option(*decls, default=None if from_config or default is None else default,
                            help=f"{help}  (default: {default_text})", **attrs)
    if from_config:
        return click.option(*decls, default=None, help=f"{help}  (default: {shown(default)})", **attrs)
    return click.option(*decls, default=default, show_default=True, help=help, **attrs)


def stack(*options: Decorator) -> Decorator:
    """One decorator that adds `options` to a command, in the order given (as in its help)."""
    def decorate(function: Callable) -> Callable:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


def seed_option(from_config: bool) -> Decorator:
    """--seed: of the masks (`score`); from a configuration, of the masks and of the evaluation both."""
    if not from_config:
        return setting(SignalSettings, "seed", help="Mask seed.")
    masks, evaluation = default_of(SignalSettings, "seed"), default_of(EvaluationSettings, "seed")
    default = masks if masks == evaluation else f"{masks} for the masks, {evaluation} for the evaluation"
    return click.option("--seed", default=None, type=int, help="Seed of the random masks and of the evaluation's "
                        f"bootstrap, permutation tests and balanced repeats (signal.seed and evaluation.seed) "
                        f"(default: {default}).")


def signal_options(from_config: bool, signal_help: str | None = None) -> Decorator:
    """How a signal is computed, on `score` and (from_config) `audit` and `canaries audit`; `signal_help` replaces the
    audit's help of --signal."""
    option = partial(setting, SignalSettings, from_config=from_config)
    signal_help = signal_help or ("The signal of every model (see docs/attacks.md); classifier: audit a text classifier "
                                  "with shadow-calibrated attacks (needs --shadow)." if from_config else
                                  "The per-sample signal to compute (lower = more likely under the model).")
    return stack(
        option("signal", type=click.Choice(signal_names(*AUDITED_OUTPUTS) if from_config else signal_names("loss")),
               help=signal_help, default_text="the target's kind: " + ", ".join(
                   f"{signal} for a {KINDS[family]}" for family, signal in DEFAULT_SIGNALS.items()) if from_config else None),
        option("k", type=click.IntRange(min=1), help="Random masks per sample (MLM signals)."),
        option("masks", type=click.Choice(["random", "all"]),
               help="random: --k random masks per sample; all: every mask of --k tokens (MLM signals)."),
        option("normalize", type=click.Choice(["sum", "mean"]),
               help="Per-mask sum (Eq. 2) or mean (released code) of the masked tokens' losses (MLM signals).",
               default_text="the signal's own: sum for mlm_energy, mean for mlm_pll"),
        seed_option(from_config),
        option("max_length", type=click.IntRange(min=3), help="Truncate to this many tokens.",
               default_text="the model's maximum"),
        option("precision", type=click.Choice(PRECISIONS),
               help="Matrix-multiply precision (log-softmax is always fp32); auto = bf16 where the hardware has it."),
        option("batch_tokens", type=click.IntRange(min=64),
               help="Tokens per batch (padded); halved automatically on out-of-memory errors.",
               default_text=BATCH_TOKENS_TEXT),
    )


def placement_options(from_config: bool) -> Decorator:
    """How the models are loaded and where they run: device, weight dtype, device map, quantization."""
    option = partial(setting, PlacementSettings, from_config=from_config)
    return stack(
        option("device", type=click.Choice(DEVICES), help="Where the models run; auto = cuda when available, else cpu."),
        option("dtype", type=click.Choice(WEIGHT_DTYPES), help="Load the weights in this dtype (bf16 halves the memory of fp32)."),
        option("device_map", type=click.Choice(["auto"]), default_text="none: one device",
               help="auto: spread a model too large for one GPU over the GPUs and the CPU (accelerate)."),
        option("quantization", type=click.Choice(QUANTIZATIONS), default_text="none",
               help="Load the weights in 8 or 4 bits: 8bit, 4bit by bitsandbytes (CUDA; pip install 'lmaudit[gpu]'); "
                    "rtn8, rtn4 rounded to nearest in process, on any device (docs/erasure.md)."),
    )


def backend_options(from_config: bool, what: str) -> Decorator:
    """Where the signals are computed: in this process, or on a Ray cluster (`what`: what the backend computes)."""
    option = partial(setting, PlacementSettings, from_config=from_config)
    return stack(
        option("backend", type=click.Choice(["local", "ray"]),
               help=f"Where the {what} computed: in this process, or on the workers of a Ray cluster "
                    "(pip install 'lmaudit[ray]')."),
        option("ray_address", help="Ray cluster to join (auto, ray://HEAD:10001), with --backend ray.",
               default_text="RAY_ADDRESS, else a new local cluster"),
        option("ray_workers", type=click.IntRange(min=1), help="Ray workers, one copy of the models each (with --backend ray).",
               default_text="one per GPU with --device cuda, else one per CPU"),
    )


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


def evaluation_options(from_config: bool) -> Decorator:
    """How the attacks are evaluated, on `attack` and (from_config) `audit`."""
    option = partial(setting, EvaluationSettings, from_config=from_config)
    return stack(
        option("bootstrap", type=click.IntRange(min=10),
               help="Bootstrap resamples of the AUC's 95% interval, whole patients at a time (rates' intervals are "
                    "Clopper-Pearson's, on effective counts where samples come in groups)."),
        option("permutations", type=click.IntRange(min=100),
               help="Random relabellings of whole patients in the verdict's permutation tests; p-values resolve "
                    "1/(permutations+1)."),
        option("length_slices", type=click.IntRange(min=0),
               help="Report every sample-level attack on this many quantile bins of token length too (0 = none)."),
        click.option("--length-bounds", default=None, callback=_length_bounds, metavar="N,N,...",
                     help="Token-length bounds of the length slices instead of quantiles, e.g. 20,60: "
                          "[min, 20), [20, 60), [60, max] (default: none: --length-slices quantile bins)."),
        click.option("--slice-by", multiple=True, metavar="COLUMN",
                     help="A corpus column whose values each make a sample-level slice of the report; repeat for "
                          "several (default: none)."),
    )


def column_options(from_config: bool) -> Decorator:
    """--text-column, --id-column, --group-column, --label-column: the corpus files' own names of lmaudit's columns,
    on every command that reads corpus files (from_config: the configuration's `columns:` section)."""
    return stack(*(setting(ColumnNames, field, option, field, from_config=from_config, metavar="COLUMN",
                           help=ColumnNames.model_fields[field].description) for field, option in COLUMN_OPTIONS.items()))


def column_names(options: dict) -> ColumnNames:
    """The column options, taken out of a command's `options` (an option not given: lmaudit's own name)."""
    return validated(given({field: options.pop(field) for field in COLUMN_OPTIONS}), "the column options", ColumnNames)


def key_values(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str] | None:
    """Repeated KEY=VALUE options as a mapping (None when none is given); BadParameter for a value without '='."""
    if not values:
        return None
    pairs = {}
    for value in values:
        key, equals, text = value.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"'{value}' is not KEY=VALUE", ctx=ctx, param=param)
        pairs[key.strip()] = text
    return pairs


def serving_options(from_config: bool) -> Decorator:
    """Where the models' log-probabilities come from: transformers here, vLLM's engine, or HTTP endpoints."""
    from lmaudit.serving.settings import APIS, ENGINES, ServingSettings

    option = partial(setting, ServingSettings, from_config=from_config)
    return stack(
        option("engine", type=click.Choice(ENGINES),
               help="What computes the log-probabilities in process: transformers, or vLLM's engine (docs/serving.md)."),
        option("vllm_args", "--vllm-arg", "vllm_args", multiple=True, metavar="KEY=VALUE", callback=key_values,
               default_text="none", help="One of vLLM's own engine arguments, passed through (tensor_parallel_size=2, "
                                         "dtype=bfloat16, quantization=awq, ...); repeat."),
        option("vllm_python", type=click.Path(), default_text="this Python",
               help="The Python of an environment with vLLM installed, which runs vLLM's engine in its own process."),
        option("target_url", default_text="none", help="Audit the target as this endpoint serves it (http://HOST:PORT); "
                                                       "--target still gives its tokenizer and the weights it is checked "
                                                       "against."),
        option("reference_url", multiple=True, default_text="none",
               help="An endpoint serving a reference; one per --reference, in the same order."),
        option("api", type=click.Choice(APIS), help="The endpoints' API: vllm (prompt_logprobs), openai (echo with "
                                                   "logprobs, prompt as token ids) or sglang (/generate)."),
        option("served_model", default_text="the one the server lists", help="The model name the endpoint serves."),
        option("api_key_env", help="Environment variable holding the endpoints' API key (never written anywhere)."),
        option("concurrency", type=click.IntRange(min=1), help="Requests in flight at a time, per endpoint."),
        option("request_timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds one request may take."),
        option("retries", type=click.IntRange(min=0), help="More tries of a failed request (connection, 429, 5xx)."),
        option("tolerance", type=click.FloatRange(min=0, min_open=True),
               help="Conformance check: nats per token a served log-probability may differ from transformers' on the "
                    "same weights, and alone from batched."),
    )


# The names of each shared stack of options, for the headings of a command's help (cli/help.py).
COLUMN_NAMES, SIGNAL_NAMES, PLACEMENT_NAMES, BACKEND_NAMES, EVALUATION_NAMES, SERVING_NAMES = (
    names(options) for options in (column_options(True), signal_options(True), placement_options(True),
                                   backend_options(True, ""), evaluation_options(True), serving_options(True)))
