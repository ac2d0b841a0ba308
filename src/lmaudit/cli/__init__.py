"""The `lmaudit` command line: thin click commands that parse options and call one function of the package each.

One module per family of commands (`train.py`, `audit.py`, `erasure.py`, `extraction.py`, `studies.py`, `canaries.py`, `evidence.py`,
`integrity.py`), each listing its commands in COMMANDS; the group and its one-line errors in `app.py`; options built
from the settings models in `options.py`; the busiest commands' help (options under headings, an example) in `help.py`. A new command is a function
in a family module and its name in that module's COMMANDS; `scripts/cli_docs.py` then writes its help into docs/cli.md.
"""

from lmaudit.cli import audit, canaries, erasure, evidence, extraction, integrity, studies, train
from lmaudit.cli.app import main

for family in (train, audit, erasure, extraction, studies, canaries, evidence, integrity):
    for command in family.COMMANDS:
        main.add_command(command)

__all__ = ["main"]
