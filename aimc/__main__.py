"""`python -m aimc`: the `aimc` command line."""

from aimc.cli import main

raise SystemExit(main())
