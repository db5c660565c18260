"""The zero shift of a tile's fast arrays before training, and the report of what it cost.

Residual learning [R1 Sec. 4] needs P's symmetric point at P's zero: P is driven to its symmetric point
by pulses and the reference array is programmed to the value reached. Two pulse sequences:

- "cycles": alternating up/down pulse pairs (Kim et al. 2019), `ConductanceArray.zero_shift`: n pairs per
  element, by default as many as each element's own drift needs (`ConductanceArray.zero_shift_cycles`,
  up to 100 n_states);
- "random": n single pulses of random sign per element (arXiv:2602.21321 Algorithm 1, the stochastic
  zero-shifting whose error falls as O(1 / (n dw_min)) + Theta(dw_min), Theorem 2.2); default n = n_states.

[R1] Wu et al., NeurIPS 2025, arXiv:2502.06309.
"""

from __future__ import annotations

import logging
from typing import Literal

import numpy as np

from aimc.common import seeds
from aimc.devices import AnalogTile

LOG = logging.getLogger("aimc.trainers")

ZeroShiftMode = Literal["cycles", "random"]
ZERO_SHIFT_MODE = (
    'how the zero shift drives P to its symmetric point: "cycles", alternating up/down pulse pairs '
    '(Kim et al. 2019; zero_shift_cycles pairs); "random", zero_shift_cycles single pulses of '
    "random sign (Algorithm 1 of arXiv:2602.21321; default count the device's number of states)"
)


def zero_shift(tile: AnalogTile, index: int, mode: str, count: int | None) -> int:
    """Zero-shift array `index` of `tile` (mode "cycles" or "random", `count` pairs or pulses per element);
    returns the pulses fired."""
    if mode == "cycles":
        return tile.zero_shift(index, count)
    lo, hi = tile.bounds(index)
    n = int(count) if count is not None else int(np.ceil((hi - lo) / tile.granularity(index)))
    rng = seeds.generator(tile.seed & 0x7FFFFFFF, seeds.ZERO_SHIFT, index)
    fired = 0
    for _ in range(n):
        fired += tile.pulse(rng.integers(0, 2, (tile.out_size, tile.in_size), dtype=np.int64) * 2 - 1, index)
    tile.latch_reference(index)
    return fired


def report(algorithm: str, pulses: int, weights: int, seconds: float, mode: str, count: int | None) -> None:
    """One log line (logger "aimc.trainers", level WARNING: shown without any logging setup) with the zero
    shift's pulses and time."""
    how = (
        f"{count} {'pulse pairs' if mode == 'cycles' else 'pulses'} per element"
        if count is not None
        else "each element's own need (zero_shift_cycles=None)"
        if mode == "cycles"
        else "n_states pulses per element"
    )
    LOG.warning(
        "%s: the zero shift of the fast arrays fired %d setup pulses (%.0f per weight, %s) in %.2f s before "
        "training; set zero_shift_cycles for fewer, or zero_shift=false",
        algorithm,
        pulses,
        pulses / max(weights, 1),
        how,
        seconds,
    )
