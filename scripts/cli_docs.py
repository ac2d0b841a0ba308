"""Write docs/cli.md from the command line's own help (`lmaudit COMMAND -h`), so that the page cannot drift from the
code: `.venv/bin/python scripts/cli_docs.py`. tests/cli/test_cli_options.py fails when docs/cli.md is not what this writes."""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cli.md"
WIDTH = 100  # help text is wrapped at this width, whatever the terminal

HEADER = """# The `lmaudit` command line

Every command and its options, as `lmaudit COMMAND -h` prints them. This page is generated from the code by
`scripts/cli_docs.py`; do not edit it by hand (a test fails when it is out of date).

Conventions of every command:

- `-h` and `--help` print a command's help; every option says its default (`[default: ...]`, or, for `audit` options
  whose default is the configuration's, `(default: ...)`: a `--config` file's value stands unless the option is given).
- A usage error (unknown option, bad choice or value, missing option) or bad input is one line on stderr,
  `lmaudit: error: ... (see 'lmaudit COMMAND -h')`, and exit status 2.
- `lmaudit -v COMMAND` logs debug lines too; `lmaudit -q COMMAND` logs warnings only and shows no progress bars. Logs go
  to stderr, timestamped when stderr is not a terminal (`2026-11-23 01:02:03 lmaudit: scoring target: ...`); they name
  models, counts and times, never a sample's text.
- An option renamed (so that one thing has one name) is still read under its old name until the next release, with a
  warning line giving the new one; the table below lists them.
"""


def commands(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The path of every command and group under `command`, itself first, in help order."""
    found = [path]
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            found += commands(command.commands[name], (*path, name))
    return found


def help_text(path: tuple[str, ...]) -> str:
    """What `lmaudit PATH -h` prints, wrapped at WIDTH."""
    from lmaudit.cli import main

    ctx = main.make_context("lmaudit", [], resilient_parsing=True, terminal_width=WIDTH, max_content_width=WIDTH)
    command: click.Command = main
    for name in path:
        command = command.get_command(ctx, name)
        ctx = command.make_context(name, [], parent=ctx, resilient_parsing=True)
    return command.get_help(ctx)


def renamed_table(main: click.Group) -> str:
    """The renamed options, a row per command: the old name and the new one (cli/renamed.py)."""
    rows = []
    for path in commands(main):
        command = main
        for name in path:
            command = command.commands[name]
        rows += [f"| `lmaudit {' '.join(path)}` | `{old}` | `{new}` |" for old, new in getattr(command, "renamed", {}).items()]
    return "| command | old name (read until the next release) | name |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def render() -> str:
    """docs/cli.md."""
    from lmaudit.cli import main

    sections = [HEADER, renamed_table(main)]
    for path in commands(main):
        sections.append(f"## `{' '.join(('lmaudit', *path))}`\n\n```text\n{help_text(path)}\n```\n")
    return "\n".join(sections)


if __name__ == "__main__":
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
