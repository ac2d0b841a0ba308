"""Options renamed so that one thing has one name on the command line: the old spelling is read as the new one for a
release, with a warning line that gives the new name.

click offers aliases (an option with two names) but cannot tell which one was typed, so the old name would be accepted
silently; rewriting the old name before click parses makes the warning possible and keeps the help to the new name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import click

log = logging.getLogger("lmaudit")


class RenamingCommand(click.Command):
    """A command whose options in `renamed` (old name -> new name) were renamed: an old name typed is read as the new
    one, and a warning says so."""

    def __init__(self, *args, renamed: Mapping[str, str] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.renamed = dict(renamed or {})
        names = {name for param in self.params for name in (*param.opts, *param.secondary_opts)}
        unknown = [new for new in self.renamed.values() if new not in names]
        taken = [old for old in self.renamed if old in names]
        if unknown or taken:
            raise ValueError(f"{self.name}: renamed to no option {unknown}, or from a name still in use {taken}")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The arguments with every renamed option under its new name (up to a lone '--', after which nothing is an
        option), then click's parsing."""
        current, options_end = [], False
        for arg in args:
            options_end = options_end or arg == "--"
            current.append(arg if options_end else self._new_name(arg))
        return super().parse_args(ctx, current)

    def _new_name(self, arg):
        if not isinstance(arg, str):  # a value passed as a Path or a number (CliRunner's callers): never an option
            return arg
        old, equals, value = arg.partition("=")
        new = self.renamed.get(old)
        if new is None:
            return arg
        log.warning("%s is now %s; the old name is read until the next release", old, new)
        return f"{new}{equals}{value}"
