"""The timestamps of run and sweep manifests and of run outcomes. Standard library only: the sweep's workers
import it with the executors."""

from __future__ import annotations

import time


def timestamp(t: float | None = None) -> str:
    """Local time `t` (seconds since the epoch; default: now) in ISO 8601 with its UTC offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))
