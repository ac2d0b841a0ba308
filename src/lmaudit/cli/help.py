"""Help that reads on commands with many options: the options under headings, and examples at the end.

click has no option groups: GroupedCommand writes one section per heading, in the order given, and the options that no
heading names under "Other options", so that none is left out of the help. Its epilog holds example command lines,
one a line, written under "Examples" as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import click

from lmaudit.cli.renamed import RenamingCommand

OTHER = "Other options"
COLUMN_MAX = 30  # click's widest column of option names; every heading's help text starts in the same column


def names(decorator: Callable[[Callable], Callable]) -> str:
    """The options that `decorator` adds, by name in help order: a heading for a shared stack of options."""
    return " ".join(param.opts[0] for param in click.command()(decorator(lambda **_: None)).params)


class GroupedCommand(RenamingCommand):
    """A command whose help lists its options under headings: `groups` maps a heading to its options' names (a string
    of names separated by spaces, in help order); `renamed`, options' old names still read (cli/renamed.py)."""

    def __init__(self, *args, groups: Mapping[str, str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.groups = {title: tuple(listed.split()) for title, listed in groups.items()}
        self._check_groups()

    def _check_groups(self) -> None:
        """ValueError for a heading naming an option the command lacks, or an option under two headings."""
        by_name = _by_name(self.params)
        named = [name for group in self.groups.values() for name in group]
        unknown = [name for name in named if name not in by_name]
        if unknown:
            raise ValueError(f"{self.name}: the help groups name no option {', '.join(unknown)}")
        if len({id(by_name[name]) for name in named}) < len(named):
            raise ValueError(f"{self.name}: the help groups name an option twice")

    def option_groups(self, ctx: click.Context) -> dict[str, list[click.Parameter]]:
        """The options under each heading, in help order; those no heading names (-h among them) under OTHER."""
        params = self.get_params(ctx)
        by_name = _by_name(params)
        grouped = {title: [by_name[name] for name in group] for title, group in self.groups.items()}
        placed = {id(param) for group in grouped.values() for param in group}
        return {**grouped, OTHER: [param for param in params if id(param) not in placed]}

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """One section per heading, the help texts of all of them starting in one column."""
        sections = {title: [record for param in group if (record := param.get_help_record(ctx))]
                    for title, group in self.option_groups(ctx).items()}
        width = min(COLUMN_MAX, max((len(term) for rows in sections.values() for term, _ in rows), default=0))
        for title, rows in sections.items():
            if rows:
                with formatter.section(title):
                    # write_dl sizes its first column by the longest name it is given: pad them all alike
                    formatter.write_dl([(term.ljust(width), text) for term, text in rows], col_max=COLUMN_MAX)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The example command lines, under their heading like the options and not rewrapped (click's epilog is)."""
        if self.epilog:
            with formatter.section("Examples"):
                for line in self.epilog.splitlines():
                    formatter.write(f"{'':>{formatter.current_indent}}{line}\n")


def _by_name(params: list[click.Parameter]) -> dict[str, click.Parameter]:
    """Each parameter under each of its names (--lowercase and --no-lowercase alike)."""
    return {name: param for param in params for name in (*param.opts, *param.secondary_opts)}
