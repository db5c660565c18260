"""An analog tile: a stack of conductance arrays read together with gains, behind one read periphery.

The forward weight is sum_n gains[n] (w_n - reference_n). Analog SGD uses one array of gain 1; Tiki-Taka
[R2] two, W and the fast array P, with P's gain 0 so that the forward pass sees W alone; residual learning
[R1] gains (1, gamma), the mixed weight W + gamma P; multi-tile residual learning [R3] gains gamma^n. The
tile counts the MVMs it performs (forward, backward and column reads) for the trainers' cost model.

[R1] Wu et al., NeurIPS 2025, arXiv:2502.06309; [R2] Wu et al., NeurIPS 2024, arXiv:2406.12774;
[R3] Li et al., arXiv:2510.02516.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from aimc.common import seeds
from aimc.devices.array import ConductanceArray
from aimc.devices.column_read import ReadStream, one_hot_settings
from aimc.devices.drift import DriftParameter
from aimc.devices.effective_weight import effective_weight_kernel
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.noise_management import fresh_average
from aimc.devices.one_sided import OneSided
from aimc.devices.one_sided_array import OneSidedArray
from aimc.devices.periphery import PeripheryConfig, analog_mvm
from aimc.devices.response import DeviceConfig
from aimc.devices.threshold import threshold_counts, threshold_counts_cols
from aimc.devices.unit_cell_array import UnitCellArray
from aimc.devices.unit_cells import VectorUnitCell
from aimc.devices.update import UpdateConfig


@cache
def one_hot_inputs(n: int) -> np.ndarray:
    """The n one-hot input vectors of a column read, (n, n) float32, read-only: made once per n (a column
    read of a transfer algorithm builds it every step otherwise)."""
    eye = np.eye(n, dtype=np.float32)
    eye.flags.writeable = False
    return eye


class AnalogTile:
    """`len(gains)` arrays of shape (out, in), each of `device` (array n of array_devices[n] where given); the
    forward weight is sum_n gains[n] W_n.

    Array n draws its device parameters and pulses from seeds.array_seed(seed, n). Reads use a cached forward
    weight: every method that changes an array (`update`, `pulse`, `zero_shift`, `set_weight`,
    `set_stack`, `load_state_dict`) refreshes it; code that writes `arrays[n].w` directly calls
    `invalidate()`.
    """

    def __init__(
        self,
        out_size: int,
        in_size: int,
        device: DeviceConfig,
        gains: Sequence[float] = (1.0,),
        forward: PeripheryConfig | None = None,
        backward: PeripheryConfig | None = None,
        update: UpdateConfig | None = None,
        seed: int = 0,
        array_devices: Sequence[DeviceConfig] = (),
    ):
        self.out_size, self.in_size = int(out_size), int(in_size)
        self.device = device
        self.array_devices = tuple(array_devices)  # array n's device where given (n < len), else `device`
        self.seed = int(seed)
        self.gains = np.zeros(0, np.float32)
        self.arrays: list[ConductanceArray] = []
        self._w = np.zeros(0, np.float32)  # the cached forward weight, laid out by `_relayout`
        self.set_stack(gains)
        self.forward_cfg = forward or PeripheryConfig()
        self.backward_cfg = backward or PeripheryConfig()
        self.update_cfg = update or UpdateConfig()
        self.stream = ReadStream(seeds.stream_seed(self.seed, seeds.TILE_READS))  # read noise, reads
        self.out_scale = 1.0  # digital scale of forward outputs: the drift compensation (devices.drift_compensation)
        self.nm_average = fresh_average()  # average_abs_max's running average, forward and backward reads alike

    # -- the stack --------------------------------------------------------------------------------------

    def __repr__(self) -> str:
        """`AnalogTile(out x in, device <kind>, arrays n, gains [...], seed s)`."""
        gains = ", ".join(f"{g:g}" for g in self.gains)
        return (
            f"AnalogTile({self.out_size} x {self.in_size}, device {self.device.kind}, arrays {len(self.arrays)}, "
            f"gains [{gains}], seed {self.seed})"
        )

    def set_stack(self, gains: Sequence[float]) -> None:
        """Make the stack len(gains) arrays with these forward gains. Arrays that exist keep their state;
        array n created here is fresh (weights at 0 clipped to its bounds), seeded seeds.array_seed(seed, n)."""
        gains = [float(g) for g in gains]
        if len(gains) < 1:
            raise ValueError("a tile needs at least one array")
        arrays = self.arrays[: len(gains)]
        for n in range(len(arrays), len(gains)):
            device = self.array_devices[n] if n < len(self.array_devices) else self.device
            make = (
                OneSidedArray
                if isinstance(device, OneSided)
                else UnitCellArray
                if isinstance(device, VectorUnitCell)
                else ConductanceArray
            )
            arrays.append(make(self.out_size, self.in_size, device, seed=seeds.array_seed(self.seed, n)))
        self.arrays = arrays
        self.gains = np.asarray(gains, dtype=np.float32)
        self.invalidate(layout=True)

    def set_weight(self, weight: np.ndarray) -> None:
        """Write `weight` (out, in) exactly into array 0 as w - reference (clipped to each element's
        bounds) and 0 into the others, as aihwkit's set_weights."""
        for n, a in enumerate(self.arrays):
            a.set_weights((weight if n == 0 else np.zeros_like(a.w)) + a.reference)
        self.invalidate(layout=True)

    def post_update_step(self) -> None:
        """aihwkit's once-per-optimizer-step effects (diffusion, decay) on every array
        (ConductanceArray.post_update_step); nothing where the device has none."""
        if any([a.post_update_step() for a in self.arrays]):
            self.invalidate()

    def decay_weights(self, alpha: float = 1.0) -> None:
        """One decay of every array on demand, aihwkit's `decay_weights(alpha)` (ConductanceArray.
        decay_weights); nothing where the device has no lifetime."""
        if any([a.decay_weights(alpha) for a in self.arrays]):
            self.invalidate()

    def idle(self, delta_t: float, step_s: float = 1.0, drift: DriftParameter | None = None, seed: int = 0) -> None:
        """Leave every array idle for delta_t seconds (ConductanceArray.idle: drift, diffusion, decay)."""
        for a in self.arrays:
            a.idle(delta_t, step_s, drift, seed)
        self.invalidate()

    # -- the cached forward weight ----------------------------------------------------------------------
    def invalidate(self, layout: bool = False) -> None:
        """Mark the cached forward weight stale (after a change of the arrays); layout=True after a change
        of gains or references, which decides whether the cache is array 0's own weights."""
        self._dirty = True
        if layout:
            self._direct = None

    def _relayout(self) -> None:
        """Where array 0 alone is live, with gain 1 and a zero reference, its raw weights are the forward
        weight: reads use them in place and an update costs no recomputation. Otherwise the cache is a
        buffer of its own, recomputed on the first read after a change."""
        live = [n for n, g in enumerate(self.gains) if g != 0]
        direct = live == [0] and self.gains[0] == 1 and not self.arrays[0].reference.any()
        if direct:
            self._w = self.arrays[0].w
        elif self._direct is not False:
            self._w = np.zeros((self.out_size, self.in_size), np.float32)
        self._direct = direct
        self._dirty = not direct

    def forward_weight(self) -> np.ndarray:
        """The forward weight the reads use (float32, out x in; cached, not to be written)."""
        if self._direct is None:
            self._relayout()
        if self._dirty and not self._direct:
            self.weight(out=self._w)
            self._dirty = False
        return self._w

    def weight(self, out: np.ndarray | None = None) -> np.ndarray:
        """Effective weight sum_n gains[n] W_n (float32, out x in), into `out` when given."""
        if out is None:
            out = np.empty((self.out_size, self.in_size), np.float32)
        effective_weight_kernel(
            out, tuple(a.w for a in self.arrays), tuple(a.reference for a in self.arrays), self.gains
        )
        return out

    # -- reads -----------------------------------------------------------------------------------------
    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = out_scale W x for x (batch, in) through the forward periphery (out_scale 1 but after a drift
        compensation)."""
        self.stream.count_reads(len(x))
        y = analog_mvm(self.forward_weight(), x, self.forward_cfg, self.stream, self.nm_average)
        return y if self.out_scale == 1.0 else y * np.float32(self.out_scale)

    def backward(self, d: np.ndarray) -> np.ndarray:
        """z = W^T d for d (batch, out) through the backward periphery."""
        self.stream.count_reads(len(d))
        return analog_mvm(self.forward_weight().T, d, self.backward_cfg, self.stream, self.nm_average)

    def read_columns(self, index: int, cols: np.ndarray) -> np.ndarray:
        """Read columns `cols` of array `index` through the forward periphery, one one-hot input each:
        returns (len(cols), out) noisy values W_index[:, j] (as R1's transfer reads P). Only the read
        columns enter the product (a one-hot input sees nothing else). The reads leave `nm_average` alone:
        under average_abs_max each has scale 1, the running average of one-hot inputs of 1 (aihwkit's
        transfer reads keep an average of their own)."""
        cols = np.atleast_1d(cols)
        a = self.arrays[index]
        sub = a.w[:, cols] - a.reference[:, cols]  # (out, n)
        self.stream.count_reads(len(cols))
        return analog_mvm(sub, one_hot_inputs(len(cols)), self.forward_cfg, self.stream)

    # -- what kernels of other layers take --------------------------------------------------------------
    def granularity(self, index: int) -> float:
        """The weight change one pulse into array `index` counts for (DeviceBase.granularity of its drawn
        elements)."""
        return float(self.arrays[index].params.granularity)

    def bounds(self, index: int) -> tuple[float, float]:
        """Nominal weight bounds (w_min, w_max) of array `index`'s device."""
        return self.arrays[index].device.bounds

    def update_settings(self, index: int, lr: float) -> tuple:
        """The settings of an update W_index -= lr d^T x with the tile's update config, as the update protocol
        (devices.array_update) takes them (devices.kernel_bundles.UpdateSettings, a plain tuple);
        `update_cfg.mode` says pulsed or expected."""
        return update_settings(lr, self.granularity(index), self.update_cfg)

    def kernel_handles(self, first: int, second: int) -> tuple:
        """Arrays `first` and `second` and the forward periphery as a Numba kernel of another layer takes them:
        it updates and pulses them through devices.array_update and reads columns through
        devices.column_read.read_column, which advance the arrays' and the tile's counters in place. The
        caller calls `invalidate()` after such a kernel changed the arrays. Returns (the first array's
        ArrayHandle, the second's, the ColumnReader), each a plain tuple of its fields (devices.kernel_bundles
        says why)."""
        return (
            self.arrays[first].handle(),
            self.arrays[second].handle(),
            (one_hot_settings(self.forward_cfg), self.stream.seed, self.stream.counts),
        )

    # -- programming ------------------------------------------------------------------------------------
    def update(self, x: np.ndarray, d: np.ndarray, lr: float, index: int = 0, cfg: UpdateConfig | None = None) -> int:
        """Pulsed (or expected) update W_index -= lr d^T x with the tile's update settings (or `cfg`);
        returns pulses fired. A one-sided cell's refresh reads count among the tile's reads."""
        a = self.arrays[index]
        own = a.reads if isinstance(a, OneSidedArray) else 0
        n = a.update(x, d, lr, cfg or self.update_cfg)
        if isinstance(a, OneSidedArray):
            self.stream.count_reads(a.reads - own)
        self.invalidate()
        return n

    def pulse(self, counts: np.ndarray, index: int = 0) -> int:
        """Fire counts[i, j] signed exact pulses into array `index` (ConductanceArray.pulse); returns pulses
        fired."""
        n = self.arrays[index].pulse(counts)
        self.invalidate()
        return n

    def zero_shift(self, index: int, n_cycles: int | None = None) -> int:
        """Zero-shift array `index` (ConductanceArray.zero_shift: its reference becomes its symmetric
        point); returns pulses fired."""
        a = self.arrays[index]
        before = a.pulses
        a.zero_shift(n_cycles)
        self.invalidate(layout=True)
        return a.pulses - before

    # -- counters ---------------------------------------------------------------------------------------
    @property
    def pulses(self) -> int:
        """Pulses fired into all arrays so far."""
        return sum(a.pulses for a in self.arrays)

    def saturation(self) -> tuple[int, int]:
        """(elements within dw_min / 2 of their own bounds, elements), over all arrays."""
        hit = total = 0
        for a in self.arrays:
            lo, hi = a.bounds
            half = 0.5 * a.device.dw_min
            hit += int(np.count_nonzero((a.w <= lo + half) | (a.w >= hi - half)))
            total += a.w.size
        return hit, total

    @property
    def reads(self) -> int:
        """Vector reads performed so far: forward, backward, column reads and one-sided refresh reads."""
        return self.stream.reads

    def state_dict(self) -> dict:
        return {
            "arrays": [a.state_dict() for a in self.arrays],
            "gains": self.gains.copy(),
            "read_counter": self.stream.counter,
            "reads": self.reads,
            "nm_average": float(self.nm_average[0]),
        }

    def load_state_dict(self, state: dict) -> None:
        if len(state["arrays"]) != len(self.arrays):
            raise ValueError(f"state has {len(state['arrays'])} arrays, tile has {len(self.arrays)}")
        for a, s in zip(self.arrays, state["arrays"]):
            a.load_state_dict(s)
        self.gains = np.asarray(state["gains"], np.float32)
        self.stream.counts[:] = (int(state["read_counter"]), int(state["reads"]))
        self.nm_average[0] = state.get("nm_average", -1.0)  # a checkpoint without it: no vector read yet
        self.invalidate(layout=True)

    # -- what the algorithms ask of a tile ---------------------------------------------------------------
    def has_reset(self, index: int) -> bool:
        """Whether array `index` has a reset value (aihwkit's families: reset, reset_dtod, reset_std)."""
        return getattr(self.arrays[index], "effects", None) is not None

    def array_seed(self, index: int) -> int:
        """The seed of array `index` (aimc.common.seeds.array_seed, masked), for draws an algorithm keys to it."""
        return self.arrays[index].seed

    def reset_columns(self, index: int, cols: np.ndarray) -> None:
        """Reset the columns `cols` of array `index` to their reset values (ConductanceArray.reset)."""
        self.arrays[index].reset(cols)
        self.invalidate()

    def reference(self, index: int, cols: np.ndarray | None = None) -> np.ndarray:
        """A copy of array `index`'s reference (out, in), or of its columns `cols` (out, len(cols))."""
        ref = self.arrays[index].reference
        return ref.copy() if cols is None else ref[:, cols]

    def set_reference(self, index: int, values: np.ndarray, cols: np.ndarray | None = None) -> None:
        """Program array `index`'s reference (all of it, or its columns `cols`) to `values`, which the reads
        subtract from then on."""
        ref = self.arrays[index].reference
        if cols is None:
            ref[...] = values
        else:
            ref[:, cols] = values
        self.invalidate(layout=True)

    def latch_reference(self, index: int) -> None:
        """Program array `index`'s reference to its present weights (the end of a zero shift: reads of the
        array are 0 at the point reached)."""
        a = self.arrays[index]
        a.reference[...] = a.w
        self.invalidate(layout=True)

    def threshold_pulses(
        self,
        buffer: np.ndarray,
        counts: np.ndarray,
        threshold: float,
        max_pulses: int,
        index: int = 0,
        cols: np.ndarray | None = None,
        single: bool = False,
    ) -> int:
        """Fire whole pulses into array `index` where |buffer| >= threshold * dw_min: n = sign floor(|buffer| /
        dw_min) (at most max_pulses; one with `single`), taken off the buffer (in place). With `cols` only
        those columns are thresholded and counts is cleared there afterwards. counts: (out, in) int64 scratch
        space of the caller. Returns pulses fired."""
        dw = self.granularity(index)
        if cols is None:
            n = threshold_counts(buffer, counts, dw, float(threshold), int(max_pulses), single)
        else:
            n = threshold_counts_cols(
                buffer, cols.astype(np.int64), counts, dw, float(threshold), int(max_pulses), single
            )
        fired = self.pulse(counts, index) if n else 0
        if cols is not None:
            counts[:, cols] = 0
        return fired
