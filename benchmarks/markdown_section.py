"""Replace one marked section of a markdown file, so several benchmarks can share docs/performance.md."""

from __future__ import annotations

from pathlib import Path


def replace_section(path: Path, name: str, text: str) -> None:
    """Put `text` between the lines <!-- name --> and <!-- /name --> of `path` (appending both if absent)."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    content = path.read_text()
    if start in content and end in content:
        before, rest = content.split(start, 1)
        after = rest.split(end, 1)[1]
    else:
        before, after = content.rstrip("\n") + "\n\n", "\n"
    path.write_text(f"{before}{start}\n{text.rstrip()}\n{end}{after}")


def machine_line() -> str:
    """'Machine: <cpu>, <n> threads; torch <version>.': what a torch benchmark's numbers were measured on."""
    import os
    import platform

    import torch

    return f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} threads; torch {torch.__version__}."


def publish(text: str, out: Path | None, name: str) -> None:
    """Print a benchmark's result and, with `out`, put it in that markdown file's section `name`."""
    print(text)
    if out:
        replace_section(out, name, text)


def markdown_table(rows: list[dict]) -> str:
    """A markdown table of rows that share their keys (the keys are the header)."""
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[column]) for column in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def score_process_header() -> str:
    """The line above a table of whole `lmaudit score` processes: the machine, Python and torch, the model."""
    import os
    import platform

    import torch

    return (f"Machine: {platform.machine()}, {os.cpu_count()} threads; Python {platform.python_version()}, torch "
            f"{torch.__version__}. Whole `lmaudit score --signal clm_loss` processes (tiny GPT-2, 2 x 64), fresh store.\n\n")
