"""The help of the busiest commands: options under headings, each listed once, an example that parses, and the options
required in practice marked as such."""

from __future__ import annotations

import re
import shlex

import click
import pytest
from click.testing import CliRunner

from lmaudit.cli import main
from lmaudit.cli.help import OTHER, GroupedCommand

GROUPED = (("audit",), ("score",), ("attack",), ("dataset-inference",), ("extract",), ("train", "mlm"), ("train", "clm"),
           ("train", "classifier"), ("canaries", "audit"), ("plan",), ("erasure",))
HEADING = re.compile(r"^(\S[^:]*):$")


def command_at(path: tuple[str, ...]) -> click.Command:
    command = main
    for name in path:
        command = command.commands[name]
    return command


def help_of(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(main, [*path, "-h"])
    assert result.exit_code == 0, result.output
    return result.output


def sections(help_text: str) -> dict[str, list[str]]:
    """The options' names under each heading of a help (the Examples: its lines)."""
    found: dict[str, list[str]] = {}
    heading = None
    for line in help_text.splitlines():
        if match := HEADING.match(line):
            heading = match.group(1)
            found[heading] = []
        elif heading == "Examples" and line.strip():
            found[heading].append(line.strip())
        elif heading and line.startswith("  -"):
            found[heading] += re.findall(r"(?<!\S)--?[\w-]+", line[2:].split("  ")[0])
    return found


def example_commands(command: click.Command) -> list[list[str]]:
    """The example command lines of a command's epilog, as arguments (lines ending in a backslash continue)."""
    return [shlex.split(line) for line in command.epilog.replace("\\\n", " ").splitlines()]


def all_commands(command: click.Command = main, path: tuple[str, ...] = ()):
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from all_commands(sub, (*path, name))


def test_the_busiest_commands_have_grouped_help():
    grouped = {path for path, command in all_commands() if isinstance(command, GroupedCommand)}
    assert grouped == set(GROUPED)


def test_audit_help_lists_its_options_under_headings_in_order():
    headings = list(sections(help_of(("audit",))))
    assert headings == ["Configuration", "Models", "Data", "Output", "Signal", "Evaluation", "Attacks' settings",
                        "Placement", "Backend", "Served model (docs/serving.md)", OTHER, "Examples"]


@pytest.mark.parametrize("path", GROUPED, ids=" ".join)
def test_every_option_is_listed_once_and_only_help_is_left_ungrouped(path):
    """The grouped help names each option of the command exactly once; every other option has a heading."""
    found = sections(help_of(path))
    listed = [name for heading, names in found.items() if heading != "Examples" for name in names]
    command = command_at(path)
    params = command.get_params(command.make_context(path[-1], [], resilient_parsing=True))
    expected = [name for param in params if isinstance(param, click.Option) for name in (*param.opts, *param.secondary_opts)]
    assert sorted(listed) == sorted(expected)
    assert found[OTHER] == ["-h", "--help"]


@pytest.mark.parametrize("path", GROUPED, ids=" ".join)
def test_the_examples_parse_and_fit_a_terminal(path):
    command = command_at(path)
    assert all(len(line) <= 76 for line in command.epilog.splitlines())  # indented by 2 in an 80-column terminal
    for args in example_commands(command):
        assert tuple(args[1:1 + len(path)]) == path and args[0] == "lmaudit", args
        # with the group's help names: click caches a command's help option from the first context that asks, so a
        # context without them would take -h away from every later test in this process
        command.make_context(path[-1], args[1 + len(path):], **main.context_settings)  # a UsageError fails the test
    assert sections(help_of(path))["Examples"]


def test_audit_marks_the_options_required_unless_a_config_gives_them():
    """Not click's required=True (a --config file may give them), so their help says it; a required option says so."""
    command, shown = command_at(("audit",)), " ".join(help_of(("audit",)).split())
    ctx = command.make_context("audit", [], resilient_parsing=True)
    marks = {"--target": "[required unless --config]", "--out": "[required unless --config]",
             "--members": "[required unless --data or --config]", "--nonmembers": "[required unless --data or --config]"}
    for param in command.params:
        if param.opts[0] in marks:
            term, text = param.get_help_record(ctx)
            assert text.endswith(marks.pop(param.opts[0])) and " ".join(f"{term} {text}".split()) in shown, term
    assert not marks
    assert "--suspect PATH The texts suspected" in " ".join(help_of(("dataset-inference",)).split())
    assert "[required]" in " ".join(help_of(("dataset-inference",)).split())


@pytest.mark.parametrize(("args", "missing"), [
    (["--members", "members.csv"], "missing --target, --nonmembers, --out"),
    (["--data", "all.csv", "--target", "model"], "missing --out"),
])
def test_audit_names_what_is_missing_without_a_config(args, missing):
    result = CliRunner().invoke(main, ["audit", *args])
    assert result.exit_code == 2 and missing in result.stderr, result.stderr


def test_options_no_heading_names_fall_under_other_options():
    command = GroupedCommand("tool", params=[click.Option(["--a"], help="A."), click.Option(["--b"], help="B.")],
                             groups={"First": "--a"}, epilog="tool --a 1")
    found = sections(command.get_help(click.Context(command, info_name="tool")))
    assert found == {"First": ["--a"], OTHER: ["--b", "--help"], "Examples": ["tool --a 1"]}


@pytest.mark.parametrize("groups", [{"First": "--c"}, {"First": "--a", "Second": "--a"}])
def test_groups_naming_an_unknown_option_or_one_twice_are_refused(groups):
    with pytest.raises(ValueError, match="tool: the help groups name"):
        GroupedCommand("tool", params=[click.Option(["--a"], help="A.")], groups=groups)
