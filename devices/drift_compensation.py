"""Global drift compensation of a tile (aihwkit 1.1.0's GlobalDriftCompensation, aihwkit/inference/
compensation/drift.py and base.py).

Right after programming (here: at the end of training) the tile reads the probe, the in_size one-hot input
vectors (the identity), through its forward periphery, read noise included, and keeps the baseline
r0 = max(mean |y|, 1e-4) over all outputs of all probe vectors. After an idle time it reads the same probe
again, r(t) likewise, and scales every later forward output by alpha = r0 / r(t). A drift that scales every
weight by the same factor f is undone exactly (up to the read noise of the two probe reads): r(t) = f r0.
"""

from __future__ import annotations

import numpy as np

from aimc.devices.tile import AnalogTile

READOUT_FLOOR = 1e-4
"""Smallest readout r (aihwkit's clamp), so that a tile reading all zeros gets a finite scale."""


def probe_readout(tile: AnalogTile) -> float:
    """max(mean |y|, 1e-4) of the forward reads y of the one-hot probe (without the tile's out_scale)."""
    y = tile.forward(np.eye(tile.in_size, dtype=np.float32)) / np.float32(tile.out_scale)
    return max(float(np.abs(y).mean()), READOUT_FLOOR)


def compensate(tile: AnalogTile, baseline: float) -> float:
    """Set tile.out_scale to baseline / r(t), r(t) the probe readout now; returns the scale."""
    tile.out_scale = 1.0
    tile.out_scale = baseline / probe_readout(tile)
    return tile.out_scale
