"""`python -m aimc`: the `aimc` command line."""

from aimc.commands.cli import run

run()
