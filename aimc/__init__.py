"""aimc: train neural networks on simulated analog in-memory computing tiles with non-ideal devices."""

import os
from importlib.metadata import PackageNotFoundError, version

if "OMP_WAIT_POLICY" not in os.environ:  # before torch starts its OpenMP pool (devices/threads.py)
    os.environ.setdefault("GOMP_SPINCOUNT", "30000")

try:
    __version__ = version("aimc")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"
