"""Options renamed so that one thing has one name: the old spelling is still read, as the new one, with a warning;
the help names only the new one."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from lmaudit.cli import main
from lmaudit.cli.renamed import RenamingCommand
from tests.cli.test_cli_options import all_commands

RENAMED = [(("score",), "--model", "--target"), (("canaries", "audit"), "--model", "--target"),
           (("model-card",), "--model", "--target"), (("train", "mlm"), "--size", "--model-size"),
           (("train", "clm"), "--size", "--model-size"), (("train", "classifier"), "--size", "--model-size"),
           (("dp-sweep",), "--noise", "--noise-multipliers")]


@pytest.mark.parametrize("path, old, new", RENAMED)
def test_the_help_names_the_new_option_only(path, old, new):
    """Every renamed option is listed under its new name alone, and the command knows the old one as renamed."""
    command = dict(all_commands())[path]
    names = {name for param in command.params for name in param.opts}
    assert new in names and old not in names
    assert command.renamed[old] == new


def test_the_audited_model_is_target_in_every_command():
    """No command names the audited model --model any more (the serving engines' own flags are not lmaudit's)."""
    with_model = [path for path, command in all_commands() for param in command.params if "--model" in param.opts]
    assert with_model == []


def test_an_old_name_is_read_as_the_new_one_with_a_warning(tmp_path):
    """`score --model DIR` is parsed as `--target DIR` (no 'missing --target'; the data check comes next), and a warning
    says that --model is now --target."""
    result = CliRunner().invoke(main, ["score", "--model", str(tmp_path / "absent"), "--data", str(tmp_path / "d.csv"),
                                       "--out", str(tmp_path / "o.csv")])
    assert result.exit_code == 2
    assert "--model is now --target" in result.output
    assert "Missing option" not in result.output and "d.csv: no such file" in result.output


def test_an_old_name_with_equals_and_after_double_dash(tmp_path):
    """`--noise=1,abc` is renamed with its value; after a lone `--` nothing is an option and nothing is renamed."""
    result = CliRunner().invoke(main, ["dp-sweep", "--noise=1,abc", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--noise-multipliers 1,abc: expected comma-separated numbers" in result.output

    @click.command(cls=RenamingCommand, renamed={"--old": "--new"})
    @click.option("--new", default=None)
    @click.argument("rest", nargs=-1)
    def echo(new, rest):
        click.echo(f"{new}|{' '.join(rest)}")

    assert CliRunner().invoke(echo, ["--old", "a", "--", "--old"]).output == "a|--old\n"


def test_a_rename_to_no_option_is_a_programming_error():
    """A renamed map that names no option of the command, or an old name still in use, fails when the command is made."""
    def option(function):
        return click.option("--new")(function)

    with pytest.raises(ValueError, match="renamed to no option"):
        click.command(cls=RenamingCommand, renamed={"--old": "--other"})(option(lambda new: None))
    with pytest.raises(ValueError, match="still in use"):
        click.command(cls=RenamingCommand, renamed={"--new": "--new"})(option(lambda new: None))
