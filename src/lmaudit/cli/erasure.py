"""`lmaudit erasure`: was an erased subject forgotten? The models before and after erasure against the erased
subjects' texts and never-trained ones (docs/erasure.md)."""

from __future__ import annotations

from pathlib import Path

import click

from lmaudit.audit.erasure_settings import ErasureSettings
from lmaudit.cli.app import log_warnings, overwrite_option, progress
from lmaudit.cli.help import GroupedCommand
from lmaudit.cli.options import (
    COLUMN_NAMES,
    PLACEMENT_NAMES,
    SIGNAL_NAMES,
    column_options,
    placement_options,
    setting,
    signal_options,
)
from lmaudit.config import given, validated
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.models.source import QUANTIZATIONS


def model_option(name: str, required: bool, what: str):
    """--NAME and --NAME-adapter: a model's folder and the PEFT adapter applied to it."""
    def decorate(function):
        function = click.option(f"--{name}-adapter", default=None, type=click.Path(),
                                help=f"A PEFT (LoRA) adapter applied to --{name}.")(function)
        return click.option(f"--{name}", required=required, type=click.Path(), help=what)(function)
    return decorate


@click.command(cls=GroupedCommand, groups={
    "Models": "--before --before-adapter --after --after-adapter --retrained --retrained-adapter --reference",
    "Data": f"--forget --holdout --retain {COLUMN_NAMES}",
    "Test": "--attack --level --margin --quantized --no-quantized --relearn-epochs --relearn-public "
            "--relearn-learning-rate --extraction-tokens --permutations --bootstrap",
    "Output": "--out --cache-dir --overwrite", "Signal": SIGNAL_NAMES, "Placement": PLACEMENT_NAMES,
}, epilog="lmaudit erasure --before model --after model-erased --out erasure \\\n"
          "    --forget forget.csv --holdout holdout.csv")
@model_option("before", True, "The model before erasure (trained on the erased subjects).")
@model_option("after", True, "The model after erasure: retrained or unlearnt.")
@model_option("retrained", False, "A model retrained without the erased subjects, if there is one (for PrivLeak and "
                                  "the equivalence test).")
@click.option("--reference", multiple=True, type=click.Path(),
              help="Reference model, never trained on any of the texts; repeat for several (the likelihood ratio "
                   "then scores membership).")
@click.option("--forget", required=True, type=click.Path(),
              help="The erased subjects' texts (.csv, .jsonl, .parquet; 'text' and the subject's 'group_id').")
@click.option("--holdout", required=True, type=click.Path(),
              help="Texts of other subjects, drawn like the erased ones and never trained on (`lmaudit split` sets "
                   "them aside).")
@click.option("--retain", default=None, type=click.Path(),
              help="Texts of subjects kept in training, for their exposure before and after; optional.")
@column_options(from_config=True)
@setting(ErasureSettings, "attack", help="The attack that scores membership.",
         default_text="loss; likelihood_ratio with --reference")
@setting(ErasureSettings, "level", type=click.FloatRange(0, 0.5, min_open=True, max_open=True),
         help="The verdict's false-alarm level, family-wise over each verdict's tests.")
@setting(ErasureSettings, "margin", type=click.FloatRange(0, 0.5, min_open=True, max_open=True),
         help="Equivalence margin in AUC: how close to the retrained model (or to 1/2) counts as the same.")
@click.option("--quantized", multiple=True, type=click.Choice(QUANTIZATIONS),
              help="Also test the after model loaded in this quantization; repeat for several  (default: rtn8 and "
                   "rtn4, rounded to nearest on any device; 8bit and 4bit need bitsandbytes and CUDA).")
@click.option("--no-quantized", is_flag=True, help="Test the after model unquantized only.")
@setting(ErasureSettings, "relearn_epochs", type=click.IntRange(min=0),
         help="Relearning probe: fine-tune the after model this many epochs on half of every subject's texts, test "
              "the other half (0: no probe; not with --after-adapter).")
@click.option("--relearn-public", default=None, type=click.Path(),
              help="Related public text, none of the subjects' (.csv, .jsonl, .parquet): the after model is also "
                   "relearnt on it for --relearn-epochs and tested on every text.")
@setting(ErasureSettings, "relearn_learning_rate", type=click.FloatRange(min=0, min_open=True),
         default_text="5e-5, fine-tuning's", help="The relearning probe's AdamW learning rate.")
@setting(ErasureSettings, "extraction_tokens", type=click.IntRange(min=0),
         help="Extraction estimate (causal LMs): does greedy decoding from each text's first N tokens give its next N "
              "back, before and after erasure? (0: not tested).")
@setting(EvaluationSettings, "permutations", type=click.IntRange(min=100), from_config=True,
         help="Random relabellings of whole subjects in the pooled tests; p-values resolve 1/(permutations+1).")
@setting(EvaluationSettings, "bootstrap", type=click.IntRange(min=10), from_config=True,
         help="Bootstrap resamples of every interval, whole subjects at a time.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder of erasure.json.")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Signal store, as sensitive as the data (default: OUT.signals/ beside --out, never in it).")
@signal_options(from_config=True)
@placement_options(from_config=True)
@overwrite_option
def erasure(overwrite: bool, **options) -> None:
    """Was this subject forgotten? Tests a model after erasure against the erased subjects' texts."""
    from lmaudit.audit.erasure import RESULT_FILE, audit_erasure
    from lmaudit.config import load_config

    own = given({field: options.pop(field) for field in ErasureSettings.model_fields if field in options})
    if options.pop("no_quantized"):
        own["quantized"] = ()
    settings = validated(own, "the erasure options", ErasureSettings)
    config = load_config(None, {**options, "target": settings.after, "adapter": settings.after_adapter,
                                "members": settings.forget,
                                "nonmembers": {"holdout": settings.holdout,
                                               **({"retain": settings.retain} if settings.retain else {})}})
    document = audit_erasure(config, settings, progress(), overwrite)
    log_warnings(document["warnings"])
    for line in document["statements"]:
        click.echo(line)
    click.echo(f"result: {Path(options['out']) / RESULT_FILE}")


COMMANDS = (erasure,)
