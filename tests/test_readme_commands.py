"""Every `lmaudit ...` command in the README's and the docs' code blocks parses as written: each names a command that
exists, and click accepts its options (no unknown option, no bad choice or value, no missing required option; for `lmaudit audit`,
whose options may come from --config or --plan, the ones it asks for at run time without either).

Commands are read from the fenced code blocks of README.md: each line whose first word is `lmaudit` (or
`.venv/bin/lmaudit`), with backslash continuations joined and trailing `#` comments dropped; a command inside a comment
(the YAML example's `# audit.yaml   lmaudit audit --config audit.yaml`) counts too. A command holding `...` (outside
its comment) is deliberately partial (`lmaudit audit ...`, an elided option list) and is skipped: write a README
command in full, or with `...`, never half. Parsing stops before any command runs: click's `make_context`
converts and checks every option, and lmaudit's path options do not require the path to exist, so no file is read.
"""

from __future__ import annotations

import re
import shlex

import click
import pytest

from lmaudit.cli import main
from tests.readme import README, readme_commands


def parse(command: str) -> None:
    """Resolve the command through the `lmaudit` group (and nested groups such as `train`) and let click parse its
    arguments; raises click.UsageError for what click refuses."""
    args = shlex.split(command, comments=True)[1:]
    group: click.Group = main
    # The group's own options (-v, -q) come before the command's name.
    # With the group's own settings (-h among the help options): click caches each command's help option from the
    # first context that asks, so a context without them would take -h away from later invocations in this process.
    ctx = click.Context(group, info_name="lmaudit", resilient_parsing=False, **group.context_settings)
    while args and args[0].startswith("-") and args[0] not in ("-h", "--help"):
        option = args.pop(0)
        if option not in ("-v", "--verbose", "-q", "--quiet"):
            raise click.UsageError(f"no such option of lmaudit: {option}", ctx)
    command_obj: click.Command = group
    while isinstance(command_obj, click.Group):
        if not args or args[0] in ("-h", "--help"):
            return  # `lmaudit --help`, `lmaudit train -h`: help is always valid
        name, sub, args = command_obj.resolve_command(ctx, args)
        assert sub is not None, f"{command}: no command {name!r}"
        ctx = click.Context(sub, info_name=name, parent=ctx, resilient_parsing=False)
        command_obj = sub
    if "-h" in args or "--help" in args:
        return
    with command_obj.make_context(ctx.info_name, list(args), parent=ctx.parent, resilient_parsing=False) as parsed:
        params = parsed.params
    if command_obj is main.commands["audit"] and not (params.get("config_path") or params.get("plan_path")):  # not `canaries audit`
        # audit's options default to None so that a --config file's value stands; the command itself then asks for
        # these (cli/audit.py), at run time, so the check is repeated here
        needed = ("target", "out") if params.get("data") else ("target", "members", "nonmembers", "out")
        missing = [f"--{name}" for name in needed if not params.get(name)]
        if missing:
            raise click.UsageError(f"missing {', '.join(missing)} (and no --config)")


def test_readme_has_commands():
    """The extraction finds the README's commands (the quick start's split and audit at least), and joins a command
    continued over lines."""
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert any(command.startswith("lmaudit split ") for command in commands)
    assert any(command.startswith("lmaudit audit ") and "--population" in command for command in commands)
    assert readme_commands("```\nlmaudit audit --target M \\\n  --out r   # a comment ...\nlmaudit audit ...\n```\n") == [
        "lmaudit audit --target M --out r"]


def test_parse_refuses_what_click_refuses():
    """The check has teeth: an unknown option, a bad choice, a missing required option and an unknown command fail."""
    for bad in ("lmaudit split --data x.csv --out plan --bogus 1", "lmaudit demo --size huge",
                "lmaudit split --out plan", "lmaudit train mlm --data x.csv --out m --model-size enormous",
                "lmaudit audit --target m --members a.csv --out r"):
        with pytest.raises(click.UsageError):
            parse(bad)
    with pytest.raises((click.UsageError, AssertionError)):
        parse("lmaudit nosuchcommand --out x")
    parse("lmaudit split --data x.csv --out plan")
    parse("lmaudit audit --config audit.yaml")
    parse("lmaudit audit --target m --data roles.csv --out r")


@pytest.mark.parametrize("command", readme_commands(README.read_text(encoding="utf-8")))
def test_readme_command_parses(command: str):
    """click parses the README's command as written."""
    try:
        parse(command)
    except click.UsageError as err:
        pytest.fail(f"{command}\n  -> {err.format_message()}")


DOCS = sorted((README.parent / "docs").glob("*.md"))


def docs_commands() -> list[tuple[str, str]]:
    """Every complete `lmaudit` command of the docs' code blocks, by page; a synopsis with placeholders ([--size
    smoke|full], NAME) or shell variables ($model) is a template, not a command, and is left out."""
    return [(page.name, command) for page in DOCS for command in readme_commands(page.read_text(encoding="utf-8"))
            if not re.search(r"\[|\$| NAME\b", command)]


@pytest.mark.parametrize(("page", "command"), docs_commands())
def test_docs_command_parses(page: str, command: str):
    """click parses each docs page's command as written (docs/gate.md's plan among them)."""
    try:
        parse(command)
    except click.UsageError as err:
        pytest.fail(f"docs/{page}: {command}\n  -> {err.format_message()}")
