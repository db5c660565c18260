"""Where the comparisons with IBM aihwkit 1.1.0 find it: its own interpreter, `AIMC_AIHWKIT_PYTHON` (default
~/aihwkit-venv/bin/python; docs/performance.md says how to install it). The tests that need it skip where it
is absent."""

from __future__ import annotations

import os
from pathlib import Path

PYTHON = Path(os.path.expanduser(os.environ.get("AIMC_AIHWKIT_PYTHON", "~/aihwkit-venv/bin/python")))
"""The interpreter of the aihwkit environment."""

INERT = dict(
    construction_seed=0,
    perfect_bias=False,
    count_pulses=False,
    dw_min_dtod_log_normal=False,
    dw_min_std_add=0.0,
    dw_min_std_slope=0.0,
    allow_increasing=False,
    reverse_up=False,
    reverse_down=False,
    reverse_offset=0.01,
    slope_up_dtod=0.0,
    slope_down_dtod=0.0,
    reference_mean=0.0,
    reference_std=0.0,
    subtract_symmetry_point=False,
)
"""aihwkit fields that its device presets leave at values without effect (not modelled as fields here)."""
