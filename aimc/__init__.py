"""aimc: train neural networks on simulated analog in-memory computing tiles with non-ideal devices.

Layers: `aimc.devices` (physics, numpy and Numba), `aimc.trainers` (torch layers and training algorithms),
`aimc.calibration` (measurement, fitting, reports), the application above them (`aimc.commands`: the
`aimc` command; `aimc.sweeps`; `aimc.runs`: training runs and run folders; the experiment config, models
and data sets in `aimc.config`, `aimc.models`, `aimc.datasets`) and `aimc.common` (errors, atomic files,
strict config models) under all of them.
"""

import os

from aimc.common.errors import ConfigError
from aimc.common.version import VERSION as __version__

# libgomp's spin before an idle OpenMP thread sleeps, for the pools of torch and Numba (why: devices/threads.py);
# set here, before any layer imports torch, since a runtime reads it when it starts
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "30000")

__all__ = ["ConfigError", "__version__"]
