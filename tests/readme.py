"""The README's command lines, read from its fenced code blocks (tests/test_readme_commands.py parses every one;
tests/e2e/test_readme_*.py run them), and the helpers that run them as written in a folder."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from lmaudit.cli import main
from lmaudit.data.corpus import read_table, write_table

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
PROGRAM = re.compile(r"(?:^|#\s*|\s)((?:\.venv/bin/)?lmaudit(?:\s.*)?)$")


def block_commands(block: str) -> list[str]:
    """The `lmaudit` command lines of one fenced code block's text, continuations joined, partial ones left out."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):  # a command quoted in a comment: the text after the comment sign
            found = PROGRAM.search(stripped)
            stripped = found.group(1) if found else ""
        command = re.sub(r"\s#.*$", "", stripped)  # a trailing comment (which may itself hold '...')
        if re.match(r"(\.venv/bin/)?lmaudit(\s|$)", command) and "..." not in command:
            commands.append(" ".join(command.split()))
    return commands


def readme_commands(text: str) -> list[str]:
    """The `lmaudit` command lines of the markdown's fenced code blocks, continuations joined, partial ones left out."""
    return [command for block in FENCE.findall(text) for command in block_commands(block)]


def readme_section(text: str, heading: str) -> str:
    """The markdown from the heading whose title starts with `heading` to the next heading of its level or above (a
    `# comment` in a code block is no heading)."""
    masked = FENCE.sub(lambda block: re.sub(r"[^\n]", " ", block.group(0)), text)  # the same offsets, no code
    found = re.search(rf"^(#+) {re.escape(heading)}.*$", masked, re.M)
    assert found, f"README has no heading '{heading}'"
    end = re.compile(rf"^#{{1,{len(found.group(1))}}} ", re.M).search(masked, found.end())
    return text[found.end():end.start() if end else len(text)]


def section_blocks(heading: str) -> list[list[str]]:
    """The commands of each fenced code block of the README's section `heading`, in order."""
    return [block_commands(block) for block in FENCE.findall(readme_section(README.read_text(encoding="utf-8"), heading))]


def run(command: str) -> str:
    """Run one README command line in the current folder; its output, which must come with exit status 0."""
    result = CliRunner().invoke(main, shlex.split(command)[1:])
    assert result.exit_code == 0, f"{command}\n{result.output}\n{result.exception!r}"
    return result.output


def options_of(command: str) -> dict[str, str | bool]:
    """A command line's options: each --option's value, or True for a flag (an option followed by another or by none)."""
    words = shlex.split(command)
    return {word: True if i + 1 == len(words) or words[i + 1].startswith("--") else words[i + 1]
            for i, word in enumerate(words) if word.startswith("--")}


def starting(commands: list[str], prefix: str) -> list[str]:
    """The commands that start with `prefix`, of which there must be at least one (the README may not lose them)."""
    found = [command for command in commands if command.startswith(prefix)]
    assert found, f"no README command starts with '{prefix}': {commands}"
    return found


def few_patients(path: str | Path, patients: int) -> None:
    """Cut a corpus file, in place, to the rows of its first `patients` groups (in the order they appear)."""
    table = read_table(path)
    write_table(table[table["group_id"].isin(table["group_id"].unique()[:patients])], path)


def attacks_of(report: Path) -> set[str]:
    """The attacks an output folder's report.json has results of."""
    return {result["attack"] for result in json.loads((report / "report.json").read_text())["results"]}


def scores_rows(report: Path) -> int:
    """The rows of an output folder's scores.parquet, once report.json (with a risk), report.html and it are there."""
    assert {"report.json", "report.html", "scores.parquet"} <= {path.name for path in report.iterdir()}
    assert json.loads((report / "report.json").read_text())["summary"]["risk"]
    return len(pd.read_parquet(report / "scores.parquet"))
