"""An analog tile: a stack of conductance arrays read together with gains, behind one read periphery.

Analog SGD uses one array; Tiki-Taka two with the gain of the fast array 0 in the forward pass; residual
learning gains (1, gamma); multi-tile residual learning gains gamma^n (DESIGN.md). The tile counts the
MVMs it performs (forward, backward and column reads) for the cost model of the trainers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aimc.devices import kernels as K
from aimc.devices.array import ConductanceArray
from aimc.devices.periphery import PeripheryConfig, analog_mvm
from aimc.devices.response import DeviceConfig
from aimc.devices.rng import Stream
from aimc.devices.update import UpdateConfig


class AnalogTile:
    """`len(gains)` arrays of shape (out, in) with the same device; the forward weight is sum_n gains[n] W_n."""

    def __init__(self, out_size: int, in_size: int, device: DeviceConfig, gains: Sequence[float] = (1.0,),
                 forward: PeripheryConfig | None = None, backward: PeripheryConfig | None = None,
                 update: UpdateConfig | None = None, seed: int = 0):
        self.out_size, self.in_size = int(out_size), int(in_size)
        self.gains = np.asarray(gains, dtype=np.float32)
        self.arrays = [ConductanceArray(out_size, in_size, device, seed=seed * 1009 + n)
                       for n in range(len(self.gains))]
        self.forward_cfg = forward or PeripheryConfig()
        self.backward_cfg = backward or PeripheryConfig()
        self.update_cfg = update or UpdateConfig()
        self.stream = Stream((int(seed) << 12) ^ 0x71E)  # read noise of the tile's periphery
        self.reads = 0

    def weight(self, out: np.ndarray | None = None) -> np.ndarray:
        """Effective weight sum_n gains[n] W_n (float32, out x in), into `out` when given."""
        if out is None:
            out = np.empty((self.out_size, self.in_size), np.float32)
        K.effective_weight_kernel(out, tuple(a.w for a in self.arrays), tuple(a.reference for a in self.arrays),
                                  self.gains)
        return out

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = W x for x (batch, in) through the forward periphery."""
        self.reads += len(x)
        return analog_mvm(self.weight(), x, self.forward_cfg, self.stream)

    def backward(self, d: np.ndarray) -> np.ndarray:
        """z = W^T d for d (batch, out) through the backward periphery."""
        self.reads += len(d)
        return analog_mvm(self.weight().T, d, self.backward_cfg, self.stream)

    def update(self, x: np.ndarray, d: np.ndarray, lr: float, index: int = 0,
               cfg: UpdateConfig | None = None) -> int:
        """Pulsed (or expected) update W_index -= lr d^T x with the tile's update settings (or `cfg`);
        returns pulses fired."""
        return self.arrays[index].update(x, d, lr, cfg or self.update_cfg)

    def read_columns(self, index: int, cols: np.ndarray) -> np.ndarray:
        """Read columns `cols` of array `index` through the forward periphery, one one-hot input each:
        returns (len(cols), out) noisy values W_index[:, j] (as R1's transfer reads P). Only the read
        columns enter the product (a one-hot input sees nothing else)."""
        cols = np.atleast_1d(cols)
        a = self.arrays[index]
        sub = a.w[:, cols] - a.reference[:, cols]  # (out, n)
        self.reads += len(cols)
        return analog_mvm(sub, np.eye(len(cols), dtype=np.float32), self.forward_cfg, self.stream)

    @property
    def pulses(self) -> int:
        """Pulses fired into all arrays so far."""
        return sum(a.pulses for a in self.arrays)

    def state_dict(self) -> dict:
        return {"arrays": [a.state_dict() for a in self.arrays], "gains": self.gains.copy(),
                "read_counter": self.stream.counter, "reads": self.reads}

    def load_state_dict(self, state: dict) -> None:
        if len(state["arrays"]) != len(self.arrays):
            raise ValueError(f"state has {len(state['arrays'])} arrays, tile has {len(self.arrays)}")
        for a, s in zip(self.arrays, state["arrays"]):
            a.load_state_dict(s)
        self.gains = np.asarray(state["gains"], np.float32)
        self.stream.counter = int(state["read_counter"])
        self.reads = int(state["reads"])
