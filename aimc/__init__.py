"""aimc: train neural networks on simulated analog in-memory computing tiles with non-ideal devices.

Layers: `aimc.devices` (physics, numpy and Numba), `aimc.trainers` (torch layers and training algorithms),
`aimc.calibration` (measurement, fitting, reports), the application modules beside them (configs, CLI,
sweeps, data) and `aimc.common` (errors, atomic files, strict config models) under all of them.
"""

import os

from aimc.common.errors import ConfigError
from aimc.common.version import VERSION as __version__

if "OMP_WAIT_POLICY" not in os.environ:  # before torch starts its OpenMP pool (devices/threads.py)
    os.environ.setdefault("GOMP_SPINCOUNT", "30000")

__all__ = ["ConfigError", "__version__"]
