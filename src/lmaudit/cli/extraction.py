"""`lmaudit extract`: does the model give its training text back? Greedy and sampled extraction of each text's suffix
from its prefix, members against non-members (audit/extraction.py)."""

from __future__ import annotations

from pathlib import Path

import click

from lmaudit.cli.audit import nonmember_files
from lmaudit.errors import InputError


def parse_scheme(value: str):
    """'T,k,p' (k an integer or 'all') as a SamplingScheme; InputError naming the value otherwise."""
    from lmaudit.signals.sampling import SamplingScheme

    parts = [part.strip() for part in value.split(",")]
    try:
        temperature, top_k, top_p = float(parts[0]), None if parts[1] == "all" else int(parts[1]), float(parts[2])
        if len(parts) != 3:
            raise ValueError
    except (IndexError, ValueError):
        raise InputError(f"--scheme {value!r}: write temperature,top-k,top-p (e.g. 1,40,1 or 0.7,all,0.9)") from None
    try:
        return SamplingScheme(temperature, top_k, top_p)
    except ValueError as error:
        raise InputError(f"--scheme {value!r}: {error}") from None


def parse_lengths(value: str) -> tuple[int, ...]:
    """'32,64' as (32, 64); InputError otherwise."""
    try:
        return tuple(int(part) for part in value.split(","))
    except ValueError:
        raise InputError(f"--prefix-tokens {value!r}: write token counts separated by commas (e.g. 32,64)") from None


@click.command()
@click.option("--target", required=True, type=click.Path(), help="The causal LM's folder.")
@click.option("--members", required=True, type=click.Path(), help="Texts the model trained on.")
@click.option("--nonmembers", required=True, multiple=True, metavar="[NAME=]FILE",
              help="Texts it did not train on; repeat as NAME=FILE for several sets.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder of extraction.json and .parquet.")
@click.option("--prefix-tokens", default="32", show_default=True,
              help="Prefix lengths in tokens, comma-separated: each is a separate extraction.")
@click.option("--suffix-tokens", default=32, show_default=True, type=click.IntRange(min=1),
              help="Suffix length in tokens: the continuation compared with the text.")
@click.option("--scheme", multiple=True, default=("1,40,1",), show_default=True,
              help="A sampling scheme for probabilistic extraction, temperature,top-k,top-p (top-k 'all' for none); "
                   "repeat for several.")
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1), help="Texts per batch.")
@click.option("--include-text", is_flag=True,
              help="Write the prefix, generated and true suffix texts into extraction.parquet (training text!).")
def extract(target: str, members: str, nonmembers: tuple[str, ...], out: str, prefix_tokens: str, suffix_tokens: int,
            scheme: tuple[str, ...], batch_size: int, include_text: bool) -> None:
    """Does the model give the text back? Greedy and probabilistic extraction, members against non-members."""
    from lmaudit.audit.extraction import RESULT_FILE, ExtractionSettings
    from lmaudit.audit.extraction import extract as run_extraction
    from lmaudit.config import validated

    config = validated({"target": target, "members": members, "nonmembers": nonmember_files(nonmembers), "out": out},
                       "command line")
    settings = ExtractionSettings(parse_lengths(prefix_tokens), suffix_tokens, tuple(map(parse_scheme, scheme)),
                                  batch_size, include_text)
    document = run_extraction(config, settings)
    for prefix, entry in document["prefix_lengths"].items():
        for name, result in entry.get("sets", {}).items():
            exact = result["greedy"]["sample"]["exact"]
            click.echo(f"prefix {prefix}, suffix {suffix_tokens} tokens, against {name}: greedy exact "
                       f"{exact['member']['exposed']} of {exact['member']['units']} members, "
                       f"{exact['nonmember']['exposed']} of {exact['nonmember']['units']} non-members")
        if entry["too_short"]:
            click.echo(f"prefix {prefix}: {entry['too_short']} texts shorter than {prefix + suffix_tokens} tokens left out")
    click.echo(f"result: {Path(out) / RESULT_FILE}")


COMMANDS = (extract,)
