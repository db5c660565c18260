"""Where the comparisons with IBM aihwkit 1.1.0 find it: its own interpreter, `AIMC_AIHWKIT_PYTHON` (default
~/aihwkit-venv/bin/python; docs/performance.md says how to install it). The tests that need it skip where it
is absent."""

from __future__ import annotations

import os
from pathlib import Path

PYTHON = Path(os.path.expanduser(os.environ.get("AIMC_AIHWKIT_PYTHON", "~/aihwkit-venv/bin/python")))
"""The interpreter of the aihwkit environment."""
