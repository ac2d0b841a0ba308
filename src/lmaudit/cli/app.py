"""The `lmaudit` group: -h everywhere, logging switches, and one-line errors.

Usage errors and bad input are one line on stderr, `lmaudit: error: ...`, exit status 2, never a traceback or a usage
block; an interrupted run says that its finished work is kept. Logging: see `lmaudit.logs`.
"""

from __future__ import annotations

import logging
import sys

import click

from lmaudit.errors import InputError

CONTEXT = {"help_option_names": ["-h", "--help"], "show_default": True}


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _usage_line(err: click.UsageError) -> str:
    """`lmaudit: error: MESSAGE (see 'lmaudit COMMAND -h')` for the command whose options were wrong."""
    names, ctx = [], err.ctx
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    command = " ".join(["lmaudit", *reversed(names)])
    return f"lmaudit: error: {_one_line(err.format_message()).rstrip('.')} (see '{command} -h')"


class Commands(click.Group):
    """Turn InputError and usage errors (unknown option, bad choice or value, missing option) into one line on stderr
    and exit status 2, never a traceback or a usage block."""

    def make_context(self, info_name, args, parent=None, **extra):
        """The group's own options (lmaudit --bogus): a usage error is one line too."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as err:
            click.echo(_usage_line(err), err=True)
            raise click.exceptions.Exit(2) from None

    def invoke(self, ctx: click.Context):
        """Run the command; its bad input or usage error is one line and exit status 2."""
        try:
            return super().invoke(ctx)
        except InputError as err:
            click.echo(f"lmaudit: error: {err}", err=True)
            ctx.exit(2)
        except click.exceptions.NoArgsIsHelpError:  # `lmaudit train`: the group's help
            raise
        except click.UsageError as err:
            click.echo(_usage_line(err), err=True)
            ctx.exit(2)
        except click.ClickException as err:
            click.echo(f"lmaudit: error: {_one_line(err.format_message())}", err=True)
            ctx.exit(err.exit_code)
        except KeyboardInterrupt:
            # A model is saved whole when its training ends; audits, demos and studies keep every finished part.
            kept = ("nothing of the training was saved: a rerun trains again" if ctx.invoked_subcommand == "train" else
                    "finished work is kept and a rerun resumes from it")
            click.echo(f"lmaudit: interrupted; {kept}", err=True)
            ctx.exit(130)


def progress() -> bool:
    """Progress bars: when stderr is a terminal, unless --quiet."""
    ctx = click.get_current_context(silent=True)
    quiet = bool(ctx is not None and ctx.find_root().params.get("quiet"))
    return sys.stderr.isatty() and not quiet


def log_warnings(warnings: list[str]) -> None:
    """A result's warnings, logged: on stderr as `lmaudit: warning: ...` with the stages, silenced by --quiet (the
    result file keeps them)."""
    log = logging.getLogger("lmaudit")
    for warning in warnings:
        log.warning("%s", warning)


overwrite_option = click.option(
    "--overwrite", is_flag=True, help="Replace the result of a run configured otherwise in --out (without it such a "
    "folder, or one holding another command's result, is refused; a rerun of the same run reuses its signals).")


@click.group(cls=Commands, context_settings=CONTEXT)
@click.version_option(package_name="lmaudit")
@click.option("-v", "--verbose", is_flag=True, help="Log debug lines too (every chunk scored, every epoch).")
@click.option("-q", "--quiet", is_flag=True,
              help="Log errors only (no stages, no warnings: a report keeps its warnings), and show no progress bars.")
@click.pass_context
def main(ctx: click.Context, verbose: bool, quiet: bool) -> None:
    """Measure how much a language model leaks about its training text (membership inference).

    Stages are logged to stderr (timestamped when stderr is not a terminal); progress bars show on a terminal."""
    from lmaudit import logs

    if verbose and quiet:
        raise click.UsageError("--verbose and --quiet: give one of them", ctx)
    logs.configure(verbose, quiet)
    ctx.call_on_close(logs.reset)
