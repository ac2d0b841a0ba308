"""How long the command line takes to answer `lmaudit --help`, against the floor of the libraries it needs to parse
options (click, pydantic, PyYAML): whole processes, repeated, median and fastest. Python keeps compiled modules, as on
a user's machine (a first run writes them).

    python benchmarks/startup.py [--out docs/performance.md] [--repeats 21]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from markdown_section import markdown_table, replace_section

WAYS = {
    "lmaudit --help": [str(Path(sys.executable).with_name("lmaudit")), "--help"],
    "python: import click, pydantic, yaml": [sys.executable, "-c", "import click, pydantic, yaml"],
    "python: pass": [sys.executable, "-c", "pass"],
}


def seconds(command: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    for command in WAYS.values():  # writes the compiled modules
        seconds(command, env)
    times = {way: [] for way in WAYS}
    for _ in range(args.repeats):  # the ways take turns, so that a slow spell of the machine falls on each
        for way, command in WAYS.items():
            times[way].append(seconds(command, env))
    rows = [{"process": way, "median s": f"{statistics.median(t):.3f}", "fastest s": f"{min(t):.3f}"}
            for way, t in times.items()]
    text = (f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} threads; Python "
            f"{platform.python_version()}; {args.repeats} runs of each.\n\n" + markdown_table(rows))
    print(text)
    if args.out:
        replace_section(args.out, "startup", text)


if __name__ == "__main__":
    main()
