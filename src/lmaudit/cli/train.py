"""`lmaudit synth`, `lmaudit split` and `lmaudit train mlm|clm|classifier|self-prompt`: generated notes, an audit
planned before training, models trained on a corpus with one training recipe (models/recipe.py), whose defaults the
options take, and SPV-MIA's self-prompt reference."""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from pathlib import Path

import click

from lmaudit.cli.app import log_warnings, progress
from lmaudit.cli.help import GroupedCommand, names
from lmaudit.cli.options import COLUMN_NAMES, column_names, column_options, setting, stack
from lmaudit.cli.train_checks import dp_settings, refuse_unread
from lmaudit.data.roles import DEFAULT_HELD_OUT, UNGROUPED
from lmaudit.errors import InputError
from lmaudit.models.recipe import (
    ARCHITECTURES,
    DEFAULT_GRADIENT_CANARIES,
    SIZES,
    TRAINING_PRECISIONS,
    DPSettings,
    LoraSettings,
    TrainingRecipe,
)
from lmaudit.models.self_prompt import PAPER_EPOCHS, PAPER_LEARNING_RATE, SelfPromptSettings
from lmaudit.models.tokenizer import TOKENIZATIONS
from lmaudit.signals.settings import DEVICES

recipe_option = partial(setting, TrainingRecipe)


@click.command()
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


@click.command()
@click.option("--data", required=True, type=click.Path(), help="The training file (text; group_id to keep each "
                                                                "patient or user whole).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="New folder for the split.")
@click.option("--nonmembers", default=DEFAULT_HELD_OUT, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Fraction of the groups held out as the audit's non-members.")
@click.option("--population", default=DEFAULT_HELD_OUT, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Fraction of the groups held out as the population that calibrates thresholds.")
@click.option("--seed", default=0, show_default=True, help="Seed of the draw.")
@click.option("--ungrouped", default=UNGROUPED[0], show_default=True, type=click.Choice(UNGROUPED),
              help="Rows without a group_id in a file whose other rows have one: refuse the file, or draw each such "
                   "row as a group of its own, with the rows that share its admission or its exact text (recorded in "
                   "split.json, and warned about). A file without any group_id is split by row, with a warning.")
@column_options(from_config=False)
def split(data: str, out: str, nonmembers: float, population: float, seed: int, ungrouped: str, **columns) -> None:
    """Plan an audit before training: split the training file by whole groups, at random, into the members to train
    on and the non-members and population to hold out (all from one distribution: see README, Plan the audit)."""
    from lmaudit.data.plan import MANIFEST, PLAN_FILES, plan_split

    manifest = plan_split(data, out, nonmembers, population, seed, column_names(columns), ungrouped)
    log_warnings(manifest["warnings"])
    counts, files = manifest["counts"], {role: Path(out) / name for role, name in PLAN_FILES.items()}
    click.echo(f"train on {files['member']} only ({counts['member']['samples']} samples of "
               f"{counts['member']['groups']} groups); hold out {files['nonmember']} "
               f"({counts['nonmember']['samples']}) and {files['population']} ({counts['population']['samples']}); "
               f"{Path(out) / MANIFEST} records the draw")
    from lmaudit.audit.plan import split_power

    click.echo("what an audit of this split can show at best (a perfect attack, or a model that learnt nothing):")
    for line in split_power(out):
        click.echo(f"  {line}")
    click.echo(f"after training: lmaudit audit --target MODEL --members {files['member']} --nonmembers "
               f"{files['nonmember']} --population {files['population']} --out REPORT_DIR")


@click.group()
def train() -> None:
    """Train small models from scratch, or fine-tune a pretrained checkpoint (fully or with LoRA), on a corpus."""


overwrite_option = click.option(
    "--overwrite", is_flag=True,
    help="Replace a model trained otherwise, or an audit's report, in --out (without it such a folder is refused).")
canaries_option = click.option(
    "--canaries", default=None, type=click.Path(file_okay=False),
    help="Plant this folder's canaries (`lmaudit canaries make`: its insert.jsonl) in the training data, each once, for "
         "`lmaudit canaries audit` (default: none).")
# What every train command shares: the size from scratch, the tokenizer, the seed, the batch size.
model_options = stack(
    recipe_option("size", "--model-size", "size", type=click.Choice(tuple(SIZES)),
                  help="Size of a model trained from scratch: tiny (2 layers, width 64) < mini < small; not with "
                       "--init-from."),
    click.option("--tokenizer", "tokenizer_dir", default=None, type=click.Path(file_okay=False),
                 help="Reuse this tokenizer folder (default: train a WordPiece tokenizer on --data)."),
    recipe_option("seed", help="Seed of the initial weights, the batches and the masks."),
    recipe_option("batch_size", type=click.IntRange(min=1),
                  help="Samples per batch (with --dp: the expected size of the Poisson batches)."),
)
# Where training starts: from scratch, or from a checkpoint, fully or with LoRA adapters.
start_options = stack(
    click.option("--init-from", default=None, type=click.Path(),
                 help="Fine-tune this checkpoint (a folder, or a hub id in the local Hugging Face cache) and its "
                      "tokenizer instead of training from scratch (--model-size and --tokenizer do not apply)."),
    click.option("--lora", is_flag=True, help="Train LoRA adapters (peft) on --init-from instead of every weight; "
                                              "the adapter is saved, audit it with --target BASE --adapter OUT."),
    setting(LoraSettings, "rank", "--lora-rank", type=click.IntRange(min=1), help="LoRA rank (with --lora)."),
    click.option("--learning-rate", default=None, type=click.FloatRange(min=0, min_open=True),
                 help="AdamW peak learning rate (default 2e-3 from scratch, 5e-5 fine-tuning, 2e-4 LoRA)."),
)
placement_options = stack(
    recipe_option("device", type=click.Choice(DEVICES), help="Where it trains; auto = cuda when available, else cpu."),
    recipe_option("precision", "--dtype", "precision", type=click.Choice(TRAINING_PRECISIONS),
                  help="The forward passes' precision: bf16 autocasts them, the weights and the optimizer stay fp32."),
)
dp_options = stack(
    click.option("--dp", is_flag=True, help="Train with DP-SGD (Opacus): Poisson batches, per-sample clipping, noise."),
    click.option("--noise-multiplier", default=None, type=click.FloatRange(min=0),
                 help="DP-SGD noise sigma (with --dp; this or --target-epsilon)."),
    click.option("--target-epsilon", default=None, type=click.FloatRange(min=0, min_open=True),
                 help="Train with the noise sigma at which the whole run spends this epsilon at --delta (PRV accountant; "
                      "with --dp, instead of --noise-multiplier)."),
    setting(DPSettings, "max_grad_norm", type=click.FloatRange(min=0, min_open=True),
            help="Per-sample clipping norm (with --dp)."),
    setting(DPSettings, "delta", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
            help="Delta of the epsilon reported (with --dp)."),
    click.option("--max-samples-per-group", default=None, type=click.IntRange(min=1),
                 help="Keep at most this many samples per group_id (patient, user), which every row of --data "
                      "must have (with --dp; default: all)."),
    click.option("--audit-dp", is_flag=True,
                 help="Audit DP-SGD itself (with --dp): gradient canaries in every step give a white-box epsilon lower "
                      "bound beside the accountant's, and Poisson sampling, clipping and noise are checked."),
    click.option("--gradient-canaries", default=DEFAULT_GRADIENT_CANARIES, type=click.IntRange(min=2),
                 help="Gradient canaries of --audit-dp (each one trainable coordinate)."),
)


def recipe_of(options: dict) -> TrainingRecipe:
    """The training recipe of a train command's options: the recipe's own fields, LoRA's and DP-SGD's."""
    refuse_unread(options)
    lora, rank = options.pop("lora"), options.pop("lora_rank")
    dp = dp_settings(*(options.pop(name) for name in ("dp", "noise_multiplier", "target_epsilon", "max_grad_norm", "delta",
                                                      "max_samples_per_group", "audit_dp", "gradient_canaries")))
    return TrainingRecipe(lora=LoraSettings(rank=rank) if lora else None, dp=dp, **options)


def dp_line(record: dict | None) -> str:
    """What a DP-SGD run spent, as the train commands print it ('' without DP-SGD)."""
    if not record:
        return ""
    prv = "not computed" if record["epsilon_prv"] is None else f"{record['epsilon_prv']:.3g}"
    sigma = (f"{record['noise_multiplier']:.4g} (for target epsilon {record['target_epsilon']:g})"
             if record.get("target_epsilon") else f"{record['noise_multiplier']}")
    return (f"; DP-SGD sigma {sigma}, clip {record['max_grad_norm']}, {record['steps']} steps: "
            f"epsilon {prv} (PRV), {record['epsilon_rdp']:.3g} (RDP) at delta {record['delta']:g}")


def echo_dp_audit(record: dict | None) -> None:
    """Print the white-box audit of DP-SGD (--audit-dp), if the run made one (from the observations and checks that
    lmaudit_training.json keeps)."""
    if record and record.get("gradient_canary_observations"):
        from lmaudit.metrics.dp_audit import white_box_audit
        from lmaudit.report.privacy_words import white_box_line, with_verdict

        click.echo(white_box_line(with_verdict(white_box_audit(record))))


def capped(corpus, data: str, recipe: TrainingRecipe):
    """The corpus of --data, refused (InputError) where --max-samples-per-group would leave some of its rows uncapped;
    before the canaries are planted, each its own group."""
    if recipe.dp is not None:
        recipe.dp.refuse_ungrouped(corpus["group_id"].isna().tolist(), data)
    return corpus


def with_canaries(corpus, canaries: str | None):
    """The training corpus with the planted canaries of `canaries` appended (each its own group), or as it is."""
    if canaries is None:
        return corpus
    from lmaudit.canaries.make import plant

    return plant(corpus, canaries)


def refuse_other_family(canaries: str | None, language_model: bool) -> None:
    """InputError for canaries of a design made for the other model family (new tokens for language models, wrong
    labels for classifiers)."""
    if not canaries:
        return
    from lmaudit.canaries.make import read_canary_set

    kind = read_canary_set(canaries).kind
    if kind == "new_token" and not language_model:
        raise InputError(f"--canaries {canaries}: new-token canaries are for language models; plant --design "
                         "mislabelled or sample canaries (held-out labelled samples) in a classifier")
    if kind == "mislabelled" and language_model:
        raise InputError(f"--canaries {canaries}: mislabelled canaries are for classifiers (a language model never "
                         "reads the label); plant --design new_token canaries in a language model")


def record_canaries(out: str, canaries: str | None) -> None:
    """Record in the trained model's summary what --canaries planted (for `canaries audit` to check)."""
    if canaries:
        from lmaudit.canaries.make import record_planted

        record_planted(out, canaries)


def train_language_model_command(kind: str, data: str, out: str, canaries: str | None, overwrite: bool,
                                  **options) -> None:
    """`lmaudit train mlm|clm`: train, save, print what was trained."""
    from lmaudit.data.corpus import load_corpus
    from lmaudit.models.train import train_language_model
    from lmaudit.models.trained import refuse_another_model

    names = column_names(options)
    recipe = recipe_of(options)
    refuse_other_family(canaries, language_model=True)
    corpus = with_canaries(capped(load_corpus(data, names=names), data, recipe), canaries)
    if canaries:
        from lmaudit.canaries.make import reserved_tokens

        recipe = replace(recipe, reserved_tokens=reserved_tokens(canaries))
    refuse_another_model(out, kind, recipe, len(corpus), overwrite)
    if canaries and recipe.dp and recipe.tokenizer_dir is None and recipe.init_from is None:
        logging.getLogger("lmaudit").warning(
            "the tokenizer is trained here on the training data, canaries included, outside DP-SGD: it can give canaries "
            "away and make a canary audit contradict the accountant; pass --tokenizer (fitted on public text) instead")
    summary = train_language_model(kind, corpus["text"].tolist(), out, recipe, corpus["group_id"].tolist(), progress(),
                                   Path(out).name)
    record_canaries(out, canaries)
    saved = (f"the adapter saved to {out} (audit with --target {recipe.init_from} --adapter {out})" if recipe.lora
             else f"saved to {out}")
    click.echo(f"trained on {summary.n_samples} samples for {recipe.epochs} epochs, final loss {summary.final_train_loss:.3f}"
               f"{dp_line(summary.dp)}; {saved}")
    echo_dp_audit(summary.dp)


language_model_options = stack(
    click.option("--data", required=True, type=click.Path(), help="Corpus file with a 'text' column."),
    column_options(from_config=False),
    click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder the model is saved in."),
    recipe_option("epochs", type=click.IntRange(min=1), help="Passes over the data."),
    canaries_option, overwrite_option, model_options, start_options, placement_options, dp_options,
)
# The headings of the train commands' help (cli/help.py); a classifier has more of both model and training options.
MODEL_NAMES, TRAINING_NAMES = "--model-size --tokenizer --init-from --lora --lora-rank", "--seed --batch-size --learning-rate"
DP_NAMES, PLACEMENT_NAMES = names(dp_options), names(placement_options)
MODEL_SIZE_RENAMED = {"--size": "--model-size"}  # --size is a run's size in demo and study
language_model_help = {
    "Data": f"--data {COLUMN_NAMES} --canaries", "Output": "--out --overwrite", "Model": MODEL_NAMES,
    "Training": f"--epochs {TRAINING_NAMES}", "Device": PLACEMENT_NAMES, "DP-SGD": DP_NAMES,
}


@train.command("mlm", cls=GroupedCommand, groups=language_model_help, renamed=MODEL_SIZE_RENAMED,
               epilog="lmaudit train mlm --data train.csv --out model --model-size mini --epochs 20")
@language_model_options
def train_mlm(**options) -> None:
    """Train a BERT-style masked LM (and a WordPiece tokenizer unless --tokenizer), or fine-tune one (--init-from);
    save as safetensors."""
    train_language_model_command("mlm", **options)


@train.command("clm", cls=GroupedCommand, groups=language_model_help, renamed=MODEL_SIZE_RENAMED,
               epilog="lmaudit train clm --init-from base-gpt --lora --data train.csv --out adapter")
@language_model_options
def train_clm(**options) -> None:
    """Train a GPT-2-style causal LM (and a WordPiece tokenizer unless --tokenizer), or fine-tune one (--init-from), e.g.
    with LoRA; save as safetensors."""
    train_language_model_command("clm", **options)


@train.command("classifier", cls=GroupedCommand, groups={
    "Data": f"--data --validation --test {COLUMN_NAMES} --canaries", "Output": "--out --overwrite",
    "Model": f"--architecture --tokenization --vocab-size --max-length {MODEL_NAMES}",
    "Training": f"--max-epochs --patience {TRAINING_NAMES}", "Device": PLACEMENT_NAMES, "DP-SGD": DP_NAMES,
}, renamed=MODEL_SIZE_RENAMED, epilog="lmaudit train classifier --data train.csv --out classifier \\\n"
          "    --validation validation.csv")
@click.option("--data", required=True, type=click.Path(), help="Training file with 'text' and 'label' columns.")
@click.option("--validation", required=True, type=click.Path(), help="Held-out file (text, label) for early stopping.")
@click.option("--test", "test_data", default=None, type=click.Path(), help="Held-out file (text, label) for the test accuracy.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder the classifier is saved in.")
@column_options(from_config=False)
@canaries_option
@overwrite_option
@recipe_option("architecture", type=click.Choice(ARCHITECTURES),
               help="A BERT-style encoder or a 2-layer LSTM (from scratch; --init-from brings its own).")
@recipe_option("epochs", "--max-epochs", "epochs", type=click.IntRange(min=1), help="Epochs at most (see --patience).")
@recipe_option("patience", type=click.IntRange(min=1), help="Stop after this many epochs without a better validation accuracy.")
@recipe_option("tokenization", type=click.Choice(TOKENIZATIONS),
               help="The tokenizer trained on the training texts (unless --tokenizer or --init-from): WordPiece, or "
                    "word-level (other words become [UNK]).")
@recipe_option("vocab_size", type=click.IntRange(min=10), help="Tokens in that tokenizer, at most.")
@recipe_option("max_length", type=click.IntRange(min=4), help="Tokens per text, at most (longer texts are cut).")
@model_options
@start_options
@placement_options
@dp_options
def train_classifier_command(data: str, validation: str, test_data: str | None, out: str, canaries: str | None,
                             overwrite: bool, **options) -> None:
    """Train a BERT-style or 2-layer LSTM text classifier with early stopping, or fine-tune a checkpoint with a new
    head (--init-from, fully or with LoRA); save as safetensors."""
    from lmaudit.data.corpus import check_labels, load_corpus
    from lmaudit.models.classifier import ClassifierData, train_classifier
    from lmaudit.models.trained import refuse_another_model

    def labelled(path: str):
        corpus = load_corpus(path, names=names)
        check_labels(corpus)
        return corpus

    def texts_and_labels(corpus) -> tuple[list[str], list[str]]:
        return corpus["text"].tolist(), corpus["label"].astype(str).str.strip().tolist()

    names = column_names(options)
    recipe = recipe_of(options)
    refuse_other_family(canaries, language_model=False)
    training = with_canaries(capped(labelled(data), data, recipe), canaries)
    check_labels(training)
    classifier_data = ClassifierData(*texts_and_labels(training), texts_and_labels(labelled(validation)),
                                     texts_and_labels(labelled(test_data)) if test_data else None,
                                     training["group_id"].tolist())
    refuse_another_model(out, "classifier", recipe, len(classifier_data.texts), overwrite)
    summary = train_classifier(classifier_data, out, recipe, progress(), Path(out).name)
    record_canaries(out, canaries)
    held_out = summary.test_accuracy if summary.test_accuracy is not None else summary.validation_accuracy
    click.echo(f"trained on {summary.n_samples} samples, {summary.epochs_run} epochs (best {summary.best_epoch}); "
               f"train accuracy {summary.train_accuracy:.1%}, {summary.gap_measured_on} accuracy {held_out:.1%}, "
               f"gap {100 * summary.generalization_gap:.1f} points{dp_line(summary.dp)}; saved to {out}")
    echo_dp_audit(summary.dp)


COMMANDS = (synth, split, train)


@train.command("self-prompt")
@click.option("--target", required=True, type=click.Path(), help="The audited causal LM (with --adapter, its base).")
@click.option("--adapter", default=None, type=click.Path(), help="The target's LoRA adapter folder, if it is one.")
@click.option("--base", required=True, type=click.Path(), help="The public base the reference is fine-tuned from.")
@click.option("--prompts", required=True, type=click.Path(),
              help="Public text (a corpus file, never audited samples): each text's first tokens prompt the target.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder the reference is saved in.")
@setting(SelfPromptSettings, "prompt_tokens", type=click.IntRange(min=1), help="Tokens of each prompt (the paper: 16).")
@click.option("--epochs", default=PAPER_EPOCHS, show_default=True, type=click.IntRange(min=1),
              help="Fine-tuning epochs (the paper's).")
@click.option("--learning-rate", default=PAPER_LEARNING_RATE, show_default=True,
              type=click.FloatRange(min=0, min_open=True), help="AdamW peak learning rate (the paper's).")
@click.option("--seed", default=0, show_default=True, help="Seed of the sampling and the fine-tuning.")
@overwrite_option
@placement_options
def train_self_prompt(target: str, adapter: str | None, base: str, prompts: str, out: str, prompt_tokens: int,
                      seed: int, overwrite: bool, **training) -> None:
    """SPV-MIA's self-prompt reference: the target continues the first tokens of public texts, and --base is fine-tuned
    on what it wrote; audit with --self-prompt-reference OUT and --neighbours N."""
    from lmaudit.data.corpus import load_corpus
    from lmaudit.models.load import resolve_device
    from lmaudit.models.self_prompt import self_prompt_recipe, self_prompt_texts
    from lmaudit.models.source import ModelSource, Placement
    from lmaudit.models.train import train_language_model
    from lmaudit.models.trained import refuse_another_model

    training["device"] = resolve_device(training["device"])  # the target generates where the reference trains
    texts = self_prompt_texts(ModelSource(target, adapter), load_corpus(prompts)["text"].tolist(),
                              SelfPromptSettings(prompt_tokens, seed), Placement(device=training["device"]))
    recipe = replace(self_prompt_recipe(None, base, seed), **training)  # epochs, learning rate, device, precision
    refuse_another_model(out, "clm", recipe, len(texts), overwrite)
    summary = train_language_model("clm", texts, out, recipe, None, progress(), "self-prompt reference")
    click.echo(f"the target wrote {len(texts)} texts from {prompt_tokens}-token prompts; {base} fine-tuned on them for "
               f"{recipe.epochs} epochs, final loss {summary.final_train_loss:.3f}; saved to {out} (audit with "
               f"--self-prompt-reference {out} --neighbours 10)")

