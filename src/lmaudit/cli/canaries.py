"""`lmaudit canaries make` and `lmaudit canaries audit`: canaries planted in a training run, and what their scores prove
(a one-run epsilon lower bound; the exposure of secrets)."""

from __future__ import annotations

from pathlib import Path

import click

from lmaudit.canaries.settings import (
    DEFAULT_CANDIDATES,
    DEFAULT_FORMAT,
    DEFAULT_NEW_TOKENS,
    DEFAULT_SECRET_DIGITS,
    DEFAULT_SECRET_WORDS,
    KINDS,
)
from lmaudit.cli.app import overwrite_option, progress
from lmaudit.cli.help import GroupedCommand
from lmaudit.cli.options import (
    PLACEMENT_NAMES,
    SERVING_NAMES,
    SIGNAL_NAMES,
    placement_options,
    serving_options,
    signal_options,
)
from lmaudit.errors import InputError


@click.group()
def canaries() -> None:
    """Plant canaries in a training run and audit them: a lower bound on epsilon from one run (Steinke et al. 2023),
    and the exposure of planted secrets (Carlini et al. 2019)."""


def repetition_counts(value: str) -> tuple[int, ...]:
    """--repeat's counts ('1,4,16'), or a one-line error."""
    try:
        return tuple(int(part) for part in value.split(","))
    except ValueError:
        raise InputError(f"--repeat {value!r}: write repetition counts separated by commas (e.g. 1,4,16)") from None


@canaries.command("make")
@click.option("--n", "count", required=True, type=click.IntRange(min=2),
              help="Canaries to make (each planted with probability 1/2); hundreds to thousands for a useful bound.")
@click.option("--design", "--kind", "kind", default=KINDS[0], type=click.Choice(KINDS),
              help="new_token: a new word in the --format sentence, added to the model's vocabulary (found best; for "
                   "language models); words: random words of the model's vocabulary there (--vocabulary; learned by "
                   "any recipe as it is); secret: a random number there (exposure measurable); sample: held-out real "
                   "samples from --source (see docs/canaries.md).")
@click.option("--format", "secret_format", default=DEFAULT_FORMAT,
              help="The secret canaries' sentence, with {secret} where the random number goes.")
@click.option("--secret-digits", default=DEFAULT_SECRET_DIGITS, type=click.IntRange(min=1),
              help="Digits of each secret (--design secret).")
@click.option("--secret-tokens", default=DEFAULT_NEW_TOKENS, type=click.IntRange(min=1),
              help="New tokens in each secret (--design new_token).")
@click.option("--secret-words", default=DEFAULT_SECRET_WORDS, type=click.IntRange(min=1),
              help="Words in each secret (--design words).")
@click.option("--vocabulary", default=None, type=click.Path(),
              help="The model (or tokenizer) folder whose whole words the secrets are drawn from (--design words).")
@click.option("--source", default=None, type=click.Path(),
              help="Held-out samples (never trained on) to draw canaries from (--design sample); a 'label' column makes "
                   "classifier canaries.")
@click.option("--exclude", multiple=True, type=click.Path(),
              help="A file whose texts are never drawn as canaries (--design sample): give your training data (repeatable).")
@click.option("--repeat", "repeats", default="1", show_default=True,
              help="Plant each planted canary this many times: the bounds are then a group's of that many records "
                   "(easier to prove; compared with the accountant's group epsilon). Several counts (1,4,16): the "
                   "canaries are dealt to one tier per count, and the audit draws a memorisation curve by repetition "
                   "(needs --n 250 or more).")
@click.option("--seed", default=None, type=int,
              help="Seed of the secrets or the draw, and of which canaries are planted; it rebuilds the key, so keep it "
                   "private  (default: drawn from the operating system's entropy, recorded in canaries.json).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="New folder for the canaries and the key.")
def canaries_make(count: int, kind: str, source: str | None, exclude: tuple[str, ...], seed: int | None, out: str,
                  repeats: str, **shape) -> None:
    """Make canaries: canaries.jsonl (all), insert.jsonl (those to plant), key.parquet (which were planted; private)."""
    from lmaudit.canaries.make import INSERT_FILE, make_canaries, planted_canaries
    from lmaudit.canaries.settings import SecretShape

    secret = SecretShape(format=shape["secret_format"], digits=shape["secret_digits"], tokens=shape["secret_tokens"],
                         words=shape["secret_words"], vocabulary=shape["vocabulary"])
    made = make_canaries(out, kind, count, seed, secret, source, exclude, repetition_counts(repeats))
    click.echo(f"made {made.count} {kind} canaries; plant the {len(planted_canaries(out))} rows in "
               f"{Path(out) / INSERT_FILE} (or train with --canaries {out}); keep {out} private")


@canaries.command("audit", cls=GroupedCommand, groups={
    "Models": "--target --adapter --reference", "Data": "--canaries", "Output": "--out --overwrite --include-text",
    "Attack and bounds": "--attack --delta --candidates", "Signal": SIGNAL_NAMES, "Placement": PLACEMENT_NAMES,
    "Served model (docs/serving.md)": SERVING_NAMES,
}, renamed={"--model": "--target"}, epilog="lmaudit canaries audit --target model --canaries canaries --out canary-audit")
@click.option("--target", required=True, type=click.Path(), help="The trained model's folder.")
@click.option("--adapter", default=None, type=click.Path(), help="A PEFT (LoRA) adapter applied to --target.")
@click.option("--reference", multiple=True, type=click.Path(),
              help="Reference model(s) never trained on the canaries (repeatable; the likelihood ratio needs one).")
@click.option("--canaries", "folder", required=True, type=click.Path(file_okay=False),
              help="The canary folder the model was trained with.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder of the canary report.")
@click.option("--attack", default=None,
              help="What scores the canaries (higher = guessed planted): secret (the secret alone, for the secret "
                   "designs) or a registered attack (docs/attacks.md)  (default: secret for the secret designs; "
                   "likelihood_ratio for sample canaries with --reference, else loss).")
@click.option("--delta", default=None, type=click.FloatRange(min=0, max=1, max_open=True),
              help="Delta of both bounds (default: the model's recorded DP-SGD delta, else 1e-5).")
@click.option("--candidates", default=DEFAULT_CANDIDATES, type=click.IntRange(min=0),
              help="Random secrets scored to measure each secret canary's exposure (at least 20; 0: no exposure).")
@click.option("--include-text", is_flag=True, help="Write the canaries' text in canary_scores.parquet.")
@signal_options(from_config=True, signal_help="The signal of the model and the references: an LM's loss signal, or "
                                               "classifier (the classifier's loss on each canary's label).")
@placement_options(from_config=True)
@serving_options(from_config=True)
@overwrite_option
def canaries_audit(folder: str, attack: str | None, delta: float | None, candidates: int, overwrite: bool,
                   **options) -> None:
    """Audit planted canaries: score them, guess which were planted, bound epsilon; exposure for secrets."""
    from lmaudit.canaries.audit import audit_canaries
    from lmaudit.canaries.report import REPORT_FILE, canary_lines
    from lmaudit.config import load_config
    from lmaudit.report.document import typed_document

    config = load_config(None, options)
    result = audit_canaries(config, folder, attack, candidates, delta, progress=progress(), overwrite=overwrite)
    click.echo("\n".join(canary_lines(typed_document(REPORT_FILE, result.report))))
    click.echo(f"report: {Path(config.out) / 'canary_report.html'}")


COMMANDS = (canaries,)
