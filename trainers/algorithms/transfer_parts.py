"""The parts a transfer algorithm is built from, passed to `TransferOptimizer` (and the buffer to mixed
precision):

- `ThresholdBuffer`: a digital buffer H per tile that fires whole pulses where |H| >= threshold * dw_min
  (TTv2, residual learning v2, RIDER with a threshold; mixed precision's accumulator X);
- how the reads of the fast array enter the buffer: `ReadSum`, H += rate * v (TTv2, RIDER), or `ReadEMA`,
  H <- (1 - beta) H + beta v (residual learning v2);
- `ReferenceTracking`: RIDER's digital reference Q of the fast array and the chopper sign c, and how the
  array's read reference Q~ follows Q (at each read for RIDER, at each chopper switch for E-RIDER).

Each part keeps its per-tile values in the tile state (a dict, checkpointed but for keys that start with "_").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aimc.devices import AnalogTile


@dataclass(frozen=True)
class ThresholdBuffer:
    """H (out x in, float32, zero at first, tile state `key`): where |H| >= threshold * dw_min of the target
    array, n = floor(|H| / dw_min) pulses (at most the caller's max_pulses; one with `single_pulse`) of
    sign(H) go into the array and H -= n dw_min."""

    threshold: float
    single_pulse: bool = False
    key: str = "H"

    def of(self, st: dict, tile: AnalogTile) -> np.ndarray:
        """The tile's buffer, made (zero) the first time."""
        h = st.get(self.key)
        if h is None:
            h = st[self.key] = np.zeros((tile.out_size, tile.in_size), np.float32)
        return h

    def fire(
        self, tile: AnalogTile, st: dict, h: np.ndarray, index: int, max_pulses: int, cols: np.ndarray | None = None
    ) -> int:
        """Threshold pulses of H (its columns `cols`, or all of it) into array `index`; H keeps the remainder.
        Returns pulses fired."""
        counts = st.get("_counts")
        if counts is None or counts.shape != h.shape:
            counts = st["_counts"] = np.zeros(h.shape, np.int64)
        return tile.threshold_pulses(h, counts, float(self.threshold), max_pulses, index, cols, self.single_pulse)


@dataclass(frozen=True)
class ReadSum:
    """Reads enter the buffer summed: H[:, cols] += rate * v.T (TT-v2's rule; rate = transfer_lr)."""

    rate: float

    def fold(self, h: np.ndarray, cols: np.ndarray, v: np.ndarray) -> None:
        """Fold the reads v (n, out) of columns `cols` into h, in place."""
        h[:, cols] += np.float32(self.rate) * v.T


@dataclass(frozen=True)
class ReadEMA:
    """Reads enter the buffer as an exponential moving average: H[:, cols] <- (1 - beta) H[:, cols] + beta v.T
    (residual learning v2's buffer_beta)."""

    beta: float

    def fold(self, h: np.ndarray, cols: np.ndarray, v: np.ndarray) -> None:
        """Fold the reads v (n, out) of columns `cols` into h, in place."""
        b = np.float32(self.beta)
        h[:, cols] = (np.float32(1.0) - b) * h[:, cols] + b * v.T


@dataclass(frozen=True)
class ReferenceTracking:
    """RIDER's reference of the fast array `index`: tile state Q (out x in float32, the digital reference,
    starting at the array's reference) and c (the chopper sign, +1 at first). A read v of P - Q~ moves Q by
    rate (P - Q) and the transfer by c v; with `every_read` Q~ follows Q after each transfer (RIDER),
    otherwise only at a chopper switch (E-RIDER)."""

    rate: float
    every_read: bool
    index: int = 1

    def start(self, tile: AnalogTile, st: dict) -> None:
        """Q = the array's reference (the zero shift's estimate of the symmetric point, or 0), c = +1."""
        st.update(Q=tile.reference(self.index), c=1.0)

    def signed(self, st: dict, d: np.ndarray) -> np.ndarray:
        """The output gradient as the chopper sends it into the fast array: d, or -d where c = -1."""
        return d if float(st["c"]) > 0 else -d

    def follow(self, tile: AnalogTile, st: dict, cols: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Q[:, cols] += rate (v.T + Q~[:, cols] - Q[:, cols]) for the reads v (n, out) of P - Q~; returns the
        transfer signal c v."""
        q = st["Q"]
        q[:, cols] += np.float32(self.rate) * (v.T + tile.reference(self.index, cols) - q[:, cols])
        return np.float32(st["c"]) * v

    def track(self, tile: AnalogTile, st: dict, cols: np.ndarray) -> int:
        """After a transfer: with `every_read`, Q~[:, cols] <- Q[:, cols]. Returns the elements programmed."""
        if not self.every_read:
            return 0
        tile.set_reference(self.index, st["Q"][:, cols], cols)
        return tile.out_size * len(cols)

    def switch(self, tile: AnalogTile, st: dict, gamma: float) -> int:
        """A chopper switch: c <- -c, Q~ <- Q, and the fast array's forward gain gamma c. Returns the elements
        programmed."""
        st["c"] = -float(st["c"])
        tile.set_reference(self.index, st["Q"])
        tile.set_stack([1.0, gamma * st["c"]])
        return st["Q"].size
