"""`lmaudit extract` and `lmaudit reconstruct`: does the model give its training text back? Greedy and sampled extraction
of each text's suffix from its prefix (audit/extraction.py), and the reconstruction of sensitive fields among candidates
(audit/reconstruction.py), members against non-members."""

from __future__ import annotations

from pathlib import Path

import click

from lmaudit.cli.app import overwrite_option
from lmaudit.cli.audit_options import nonmember_files
from lmaudit.cli.help import GroupedCommand
from lmaudit.cli.options import BATCH_TOKENS_TEXT, COLUMN_NAMES, column_names, column_options, setting, stack
from lmaudit.config import COMMAND_LINE, PlacementSettings, validated
from lmaudit.errors import InputError
from lmaudit.models.source import WEIGHT_DTYPES
from lmaudit.signals.settings import DEVICES

# Where the model runs and the dtype its weights load in, as an audit's --device and --dtype.
placement_options = stack(
    setting(PlacementSettings, "device", type=click.Choice(DEVICES), help="Where the model runs; auto = cuda when "
            "available, else cpu."),
    setting(PlacementSettings, "dtype", type=click.Choice(WEIGHT_DTYPES), help="Load the weights in this dtype."),
)


def parse_lengths(value: str) -> tuple[int, ...]:
    """'32,64' as (32, 64); InputError otherwise."""
    try:
        return tuple(int(part) for part in value.split(","))
    except ValueError:
        raise InputError(f"--prefix-tokens {value!r}: write token counts separated by commas (e.g. 32,64)") from None


@click.command(cls=GroupedCommand, groups={
    "Model": "--target", "Data": f"--members --nonmembers {COLUMN_NAMES}",
    "Output": "--out --cache-dir --overwrite --include-text",
    "Generation": "--prefix-tokens --suffix-tokens --scheme --batch-size --device --dtype",
}, epilog="lmaudit extract --target model --out extraction \\\n"
          "    --members members.csv --nonmembers nonmembers.csv")
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
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1),
              help="Texts per generation batch.")
@placement_options
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="The signal store, as sensitive as the data (default: OUT.signals/ beside --out): an interrupted run "
                   "resumes from it.")
@click.option("--include-text", is_flag=True,
              help="Write the prefix, generated and true suffix texts into extraction.parquet (training text!).")
@column_options(from_config=False)
@overwrite_option
def extract(nonmembers: tuple[str, ...], prefix_tokens: str, suffix_tokens: int, scheme: tuple[str, ...], batch_size: int,
            overwrite: bool, **options) -> None:
    """Does the model give the text back? Greedy and probabilistic extraction, members against non-members."""
    from lmaudit.audit.extraction import RESULT_FILE
    from lmaudit.audit.extraction import extract as run_extraction
    from lmaudit.cli.app import progress

    settings = {"prefix_tokens": parse_lengths(prefix_tokens), "suffix_tokens": suffix_tokens, "schemes": scheme,
                "batch_size": batch_size}
    names = column_names(options)
    config = validated({**options, "columns": names, "nonmembers": nonmember_files(nonmembers), "extraction": settings},
                       COMMAND_LINE)
    document = run_extraction(config, progress(), overwrite)
    for prefix, entry in document["prefix_lengths"].items():
        for name, result in entry.get("sets", {}).items():
            exact = result["greedy"]["sample"]["exact"]
            click.echo(f"prefix {prefix}, suffix {suffix_tokens} tokens, against {name}: greedy exact "
                       f"{exact['member']['exposed']} of {exact['member']['units']} members, "
                       f"{exact['nonmember']['exposed']} of {exact['nonmember']['units']} non-members")
        if entry["too_short"]:
            click.echo(f"prefix {prefix}: {entry['too_short']} texts shorter than {int(prefix) + suffix_tokens} tokens left out")
    click.echo(f"result: {Path(config.out) / RESULT_FILE}")


def read_candidate_lists(values: tuple[str, ...]) -> dict[str, list[str]]:
    """'KIND=FILE' (one candidate a line, UTF-8) as {kind: candidates}; InputError naming the file otherwise."""
    lists = {}
    for value in values:
        kind, separator, path = value.partition("=")
        if not separator or not kind:
            raise InputError(f"--candidates {value!r}: write KIND=FILE (one candidate a line)")
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"{path}: cannot read the candidates of '{kind}' ({type(error).__name__}); give a UTF-8 "
                             "text file, one candidate a line") from None
        lists[kind] = [line.strip() for line in lines if line.strip()]
    return lists


@click.command()
@click.option("--target", required=True, type=click.Path(), help="The masked or causal LM's folder.")
@click.option("--members", required=True, type=click.Path(), help="Texts the model trained on.")
@click.option("--nonmembers", required=True, multiple=True, metavar="[NAME=]FILE",
              help="Texts it did not train on; repeat as NAME=FILE for several sets.")
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Folder of reconstruction.json and .parquet.")
@click.option("--field", "patterns", multiple=True, metavar="KIND=REGEX",
              help="A sensitive field found by a regular expression (its first group, else the whole match); repeat.")
@click.option("--field-column", "columns", multiple=True, metavar="KIND=COLUMN",
              help="A sensitive field given by a column of the data files (its value must occur in the text); repeat.")
@click.option("--candidates", "candidate_files", multiple=True, metavar="KIND=FILE",
              help="A kind's candidates, one a line (default: its values in the audited texts).")
@click.option("--max-candidates", default=100, show_default=True, type=click.IntRange(min=2),
              help="Without --candidates: rank among the kind's most frequent values, this many.")
@click.option("--batch-tokens", default=None, type=click.IntRange(min=64),
              help=f"Tokens per batch.  (default: {BATCH_TOKENS_TEXT})")
@placement_options
@click.option("--include-text", is_flag=True,
              help="Write each span's true value and the model's first choice into reconstruction.parquet.")
@column_options(from_config=False)
@overwrite_option
def reconstruct(nonmembers: tuple[str, ...], patterns: tuple[str, ...], columns: tuple[str, ...],
                candidate_files: tuple[str, ...], max_candidates: int, batch_tokens: int, include_text: bool,
                overwrite: bool, **options) -> None:
    """Can the model restore a sensitive field (a name, a diagnosis)? Its rank among candidates, members against
    non-members."""
    from lmaudit.audit.reconstruction import RESULT_FILE, ReconstructionSettings
    from lmaudit.audit.reconstruction import reconstruct as run_reconstruction
    from lmaudit.cli.app import progress
    from lmaudit.data.fields import parse_field_rule

    names = column_names(options)
    config = validated({**options, "columns": names, "nonmembers": nonmember_files(nonmembers)}, COMMAND_LINE)
    rules = tuple(parse_field_rule(value, "--field") for value in patterns) + tuple(
        parse_field_rule(value, "--field-column") for value in columns)
    settings = ReconstructionSettings(rules, max_candidates, read_candidate_lists(candidate_files), batch_tokens,
                                      include_text)
    document = run_reconstruction(config, settings, progress(), overwrite)
    for kind, entry in document["fields"].items():
        if "not_applicable" in entry:
            click.echo(f"{kind}: n/a ({entry['not_applicable']}; {entry['spans_found']} spans found)")
        for name, result in entry.get("sets", {}).items():
            top1 = result["top1"]
            click.echo(f"{kind} among {entry['candidates']} candidates, against {name}: restored first for "
                       f"{top1['member']['exposed']} of {top1['member']['units']} members, "
                       f"{top1['nonmember']['exposed']} of {top1['nonmember']['units']} non-members "
                       f"(chance {result['chance_top1']:.3f})")
    click.echo(f"result: {Path(config.out) / RESULT_FILE}")


COMMANDS = (extract, reconstruct)
