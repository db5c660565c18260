"""`python -m aimc`: the `aimc` command line."""

from aimc.cli import run

run()
