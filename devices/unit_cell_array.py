"""A crossbar of unit cells of several devices (devices.unit_cells): one conductance array per device,
W = sum_k gamma_k w_k, the update of each cycle routed by the cell's policy, behind ConductanceArray's
interface so that a tile and its trainers use it unchanged.

Under ALL every device takes the mini-batch's update with the same pulse trains (drawn from the cell's seed
and call counter, so each device sees the same coincidences, as in aihwkit); their cycle-to-cycle noise is
keyed by the same stream as well, so it repeats across the devices of a cell (aihwkit draws it afresh per
device). Under the SINGLE policies the samples of a mini-batch are split by the device each goes to, and each
device takes its samples, in order, as one update of its own.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from aimc.common import seeds
from aimc.devices.array import ConductanceArray
from aimc.devices.array_update import update_array
from aimc.devices.drift import DriftParameter
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.pulsed_update import pulsed_update_kernel
from aimc.devices.unit_cells import VectorUnitCell
from aimc.devices.update import UpdateConfig, checked_batch

POLICY_DRAWS = 0x7C1  # a SINGLE_RANDOM cell's device choices
SHARED_TRAINS = 0x7C2  # the pulse trains an ALL cell's devices share
WRITE_NOISE_KEYS = 1 << 40  # counters of an ALL cell's write-noise redraws start here


class UnitCellArray:
    """out x in cells of config `cell`: device k's array seeded seed * n + k (n devices); the shared trains
    of ALL and the SINGLE_RANDOM choices from streams of `seed`. `w` is W (kept up to date), `reference`
    zero."""

    def __init__(self, out_size: int, in_size: int, cell: VectorUnitCell, seed: int = 0):
        self.device = cell
        self.shape = (int(out_size), int(in_size))
        self.seed = int(seed) & 0x3FFFFFFFFFFFF
        devices = cell.cell_devices
        n = len(devices)
        self.parts = [ConductanceArray(*self.shape, dev, seed=self.seed * n + k) for k, dev in enumerate(devices)]
        self.gammas = np.asarray(cell.gammas, np.float32)
        self.w = np.zeros(self.shape, np.float32)
        self.reference = np.zeros(self.shape, np.float32)
        self.train_seed = seeds.stream_seed(self.seed, SHARED_TRAINS)
        self.counter = self.cycles = 0
        self._reduce()

    def _reduce(self) -> None:
        self.w[...] = 0.0
        for g, a in zip(self.gammas, self.parts):
            self.w += g * a.w

    # -- the interface of ConductanceArray a tile uses ------------------------------------------------------
    @property
    def granularity(self) -> float:
        """Weight change one pulse counts for: the mean of the devices' drawn granularities (aihwkit's)."""
        return float(np.mean([float(a.params.granularity) for a in self.parts]))

    @property
    def params(self) -> SimpleNamespace:
        """What a tile reads of the element parameters: the cell's granularity."""
        return SimpleNamespace(granularity=self.granularity)

    @property
    def weights(self) -> np.ndarray:
        """W (float32 copy)."""
        return self.w.copy()

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-element range of W: sum_k gamma_k times device k's bounds (swapped where gamma_k < 0)."""
        lo, hi = np.zeros(self.shape, np.float32), np.zeros(self.shape, np.float32)
        for g, a in zip(self.gammas, self.parts):
            b0, b1 = g * a.bounds[0], g * a.bounds[1]
            lo, hi = lo + np.minimum(b0, b1), hi + np.maximum(b0, b1)
        return lo, hi

    @property
    def pulses(self) -> int:
        """Pulses into all devices."""
        return sum(a.pulses for a in self.parts)

    def set_weights(self, weights: np.ndarray) -> None:
        """Every device's w_k = W (clipped to its bounds); under SINGLE_FIXED device first_update_idx gets W
        and the others 0 (aihwkit's). W then reads back as sum_k gamma_k w_k."""
        weights = np.asarray(weights, np.float32)
        fixed = self.device.update_policy == "SINGLE_FIXED"
        for k, a in enumerate(self.parts):
            keep = not fixed or k == self.device.first_update_idx
            a.set_weights(weights if keep else np.zeros_like(weights))
        self._reduce()

    def set_device_weights(self, k: int, weights: np.ndarray) -> None:
        """Write device k's w_k alone (clipped to its bounds), e.g. a reference cell's reference device (aihwkit's
        set_hidden_update_index(1) before set_weights); a tile holding this array needs `invalidate()` after."""
        self.parts[k].set_weights(np.asarray(weights, np.float32))
        self._reduce()

    def post_update_step(self) -> bool:
        """The devices' once-per-step effects (diffusion, decay); whether any was applied."""
        done = [a.post_update_step() for a in self.parts]
        if any(done):
            self._reduce()
        return any(done)

    def decay_weights(self, alpha: float = 1.0) -> bool:
        """One decay of every device (ConductanceArray.decay_weights); whether any decays."""
        done = [a.decay_weights(alpha) for a in self.parts]
        if any(done):
            self._reduce()
        return any(done)

    def idle(self, delta_t: float, step_s: float = 1.0, drift: DriftParameter | None = None, seed: int = 0) -> None:
        """Leave every device idle for delta_t seconds (ConductanceArray.idle), then reduce W."""
        for a in self.parts:
            a.idle(delta_t, step_s, drift, seed)
        self._reduce()

    def pulse(self, counts: np.ndarray) -> int:
        """Fire counts[i, j] signed pulses (> 0 up) into the device the next update cycle goes to (every
        device under ALL). Not an update cycle. Returns pulses fired."""
        counts = np.asarray(counts, np.int64)
        targets = range(len(self.parts)) if self.device.update_policy == "ALL" else [self._devices_of(1)[0]]
        n = sum(self.parts[k].pulse(counts) for k in targets)
        self._reduce()
        return n

    def _devices_of(self, batch: int) -> np.ndarray:
        """The device of each of the next `batch` update cycles (SINGLE policies; the cycle counter is not
        advanced)."""
        cell, n = self.device, len(self.parts)
        if cell.update_policy == "SINGLE_FIXED":
            return np.full(batch, cell.first_update_idx, np.int64)
        if cell.update_policy == "SINGLE_SEQUENTIAL":
            return (cell.first_update_idx + 1 + self.cycles + np.arange(batch)) % n
        u = seeds.generator(self.seed, POLICY_DRAWS, self.cycles).uniform(size=batch)
        return np.minimum((u * n).astype(np.int64), n - 1)

    def update(self, x: np.ndarray, d: np.ndarray, lr: float, cfg: UpdateConfig | None = None) -> int:
        """W -= lr d^T x from a mini-batch x (batch, in), d (batch, out), each sample one update cycle routed
        by the update policy. Returns pulses fired."""
        cfg = cfg or UpdateConfig()
        x, d = checked_batch(x, d, self.shape)
        settings = update_settings(lr, self.granularity, cfg)
        pulsed = cfg.mode == "pulsed"
        before = self.pulses
        self.counter += 1
        if self.device.update_policy == "ALL":
            for k, a in enumerate(self.parts):
                if pulsed:
                    self._shared_update(k, x, d, settings)
                else:
                    update_array(a.handle(), x, d, settings, False)
        else:
            which = self._devices_of(x.shape[0])
            for k, a in enumerate(self.parts):
                take = np.flatnonzero(which == k)
                if take.size:
                    xs, ds = np.ascontiguousarray(x[take]), np.ascontiguousarray(d[take])
                    update_array(a.handle(), xs, ds, settings, pulsed)
        self.cycles += x.shape[0]
        self._reduce()
        return self.pulses - before

    def _shared_update(self, k: int, x, d, settings) -> None:
        """The pulsed update of device k with the trains of the cell's seed and call counter (shared by every
        device of an ALL cell); its write-noise redraw keyed by WRITE_NOISE_KEYS + its own counter * n + k, a
        stream of its own (the cell's counters stay far below WRITE_NOISE_KEYS)."""
        a = self.parts[k]
        w, app, _, wn, params, _, _, _ = a.handle()
        wn_counter = WRITE_NOISE_KEYS + a.next_counter() * len(self.parts) + k if wn.shape[0] > 0 else 0
        n = pulsed_update_kernel(w, x, d, settings, params, self.train_seed, self.counter, app, wn, wn_counter)
        a.add_pulses(n)

    # -- state --------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Every device's state and the cell's counters: enough to continue bit-exactly."""
        return {"parts": [a.state_dict() for a in self.parts], "counter": self.counter, "cycles": self.cycles}

    def load_state_dict(self, state: dict) -> None:
        if "parts" not in state or len(state["parts"]) != len(self.parts):
            raise ValueError(f"state is not a unit cell's of {len(self.parts)} devices; the tile's device differs")
        for a, s in zip(self.parts, state["parts"]):
            a.load_state_dict(s)
        self.counter, self.cycles = int(state["counter"]), int(state["cycles"])
        self._reduce()

    def zero_shift(self, n_cycles: int | None = None) -> None:
        """Not for a unit cell of several devices."""
        raise ValueError(f"zero_shift: not modelled for a unit cell ({self.device.kind})")
