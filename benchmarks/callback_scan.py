"""The in-vocabulary canaries' pre-flight scan (`CanaryCallback` before step 1: every planted copy's secret looked for
in every tokenized training row): its seconds on a training set of `--rows` rows of `--length` token ids with the
planted copies of `--canaries` canaries at 1, 4 and 16 copies (half planted), 16 tokens each. It runs once per run.

    python benchmarks/callback_scan.py [--rows 20000] [--length 256] [--canaries 250]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from markdown_section import machine_line

from lmaudit.training.callback import occurrences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--canaries", type=int, default=250)
    arguments = parser.parse_args()
    rng = np.random.default_rng(0)
    secrets = [rng.integers(0, 30000, 16).tolist() for _ in range(arguments.canaries // 2)]
    copies = [secret for index, secret in enumerate(secrets) for _ in range((1, 4, 16)[index % 3])]
    rows = [rng.integers(0, 30000, arguments.length).tolist() for _ in range(arguments.rows)]
    rows += copies  # each copy its own row, as planted
    started = time.perf_counter()
    _, found = occurrences(rows, copies)
    seconds = time.perf_counter() - started
    assert found == len(copies)
    print(f"{machine_line()} {len(rows)} rows of {arguments.length} ids, {len(copies)} planted copies of "
          f"{len(secrets)} secrets: the scan took {seconds:.2f} s, once before step 1.")


if __name__ == "__main__":
    main()
