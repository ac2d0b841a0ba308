"""`python -m lmaudit.cli`: the command line, as the `lmaudit` script runs it."""

from lmaudit.cli import main

main()
