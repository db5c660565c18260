"""A crossbar of one-sided cells (devices.one_sided): two conductance arrays G+ and G-, W = G+ - G-, the
routed pulsed update (devices.one_sided_update) and the refresh, behind ConductanceArray's interface so that a
tile and its trainers use it unchanged.

Counters: `pulses` counts every pulse into either device, the refresh's rewrite pulses included, and each
device reset of a refresh as one pulse (`resets` counts those alone); `reads` counts the refresh's vector
reads (two per column and refresh: G+ and G-), which the tile adds to its own; `refreshes` counts refreshed
elements (aihwkit's refresh count); `cycles` is the update-cycle counter that schedules the refresh.
"""

from __future__ import annotations

import numpy as np

from aimc.common import seeds
from aimc.devices.array import ConductanceArray
from aimc.devices.device_base import kernel_params
from aimc.devices.drift import DriftParameter
from aimc.devices.expected_update import expected_update_kernel
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.one_sided import OneSided
from aimc.devices.one_sided_update import one_sided_update_kernel
from aimc.devices.periphery import analog_mvm
from aimc.devices.pulsed_set import NO_SET
from aimc.devices.response_step import DW_DOWN, DW_UP, W_MAX, W_MIN
from aimc.devices.rng import Stream
from aimc.devices.update import UpdateConfig, checked_batch, mean_update


class OneSidedArray:
    """out x in one-sided cells of config `cell`. G- draws its elements from seed * 2, G+ from seed * 2 + 1
    (G- first, as aihwkit); the routed update and the refresh reads from streams of `seed`. `w` is W (kept
    up to date in place), `reference` zero."""

    def __init__(self, out_size: int, in_size: int, cell: OneSided, seed: int = 0):
        self.device = cell
        self.shape = (int(out_size), int(in_size))
        self.seed = int(seed) & 0x3FFFFFFFFFFFFFFF
        minus_seed, plus_seed = seeds.one_sided_seeds(self.seed)
        self.minus = ConductanceArray(*self.shape, cell.device, seed=minus_seed)
        self.plus = ConductanceArray(*self.shape, cell.device, seed=plus_seed)
        if cell.copy_inverted:  # G+ mirrors its own draw (aihwkit's copyInvertDeviceParameter)
            ep = self.plus.params.ep.copy()
            ep[..., DW_UP], ep[..., DW_DOWN] = self.plus.params.ep[..., DW_DOWN], self.plus.params.ep[..., DW_UP]
            ep[..., W_MAX], ep[..., W_MIN] = -self.plus.params.ep[..., W_MIN], -self.plus.params.ep[..., W_MAX]
            self.plus.params.ep = kernel_params(ep)
            self.plus.w[...] = np.clip(self.plus.w, ep[..., W_MIN], ep[..., W_MAX])
        self.w = np.zeros(self.shape, np.float32)
        self.reference = np.zeros(self.shape, np.float32)
        self.read_stream = Stream(seeds.stream_seed(self.seed, seeds.REFRESH_READS))
        self.counter = self.cycles = self.refreshes = self.resets = self.reads = 0
        self._reduce()

    def _reduce(self) -> None:
        np.subtract(self.plus.w, self.minus.w, out=self.w)

    # -- the interface of ConductanceArray a tile uses ------------------------------------------------------
    @property
    def params(self):
        """G+'s drawn element parameters (their granularity is the cell's)."""
        return self.plus.params

    @property
    def weights(self) -> np.ndarray:
        """W (float32 copy)."""
        return self.w.copy()

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-element range of W: (G+ lower - G- upper, G+ upper - G- lower)."""
        (lo_p, hi_p), (lo_m, hi_m) = self.plus.bounds, self.minus.bounds
        return lo_p - hi_m, hi_p - lo_m

    @property
    def pulses(self) -> int:
        """Pulses into both devices, refresh rewrites included, plus one per device reset."""
        return self.plus.pulses + self.minus.pulses + self.resets

    def set_weights(self, weights: np.ndarray) -> None:
        """G+ = max(W, 0), G- = max(-W, 0), each clipped to its elements' bounds; the cycle counter restarts
        (as aihwkit's set_weights)."""
        weights = np.asarray(weights, np.float32)
        self.plus.set_weights(np.maximum(weights, 0))
        self.minus.set_weights(np.maximum(-weights, 0))
        self.cycles = 0
        self._reduce()

    def post_update_step(self) -> bool:
        """The devices' once-per-step effects (diffusion, decay) on both; whether any was applied."""
        done = [self.plus.post_update_step(), self.minus.post_update_step()]
        if any(done):
            self._reduce()
        return any(done)

    def decay_weights(self, alpha: float = 1.0) -> bool:
        """One decay of both devices (ConductanceArray.decay_weights); whether any decays."""
        done = [self.plus.decay_weights(alpha), self.minus.decay_weights(alpha)]
        if any(done):
            self._reduce()
        return any(done)

    def idle(self, delta_t: float, step_s: float = 1.0, drift: DriftParameter | None = None, seed: int = 0) -> None:
        """Leave both devices idle for delta_t seconds (ConductanceArray.idle, each with its own parameters,
        as aihwkit 1.1.0 applies decay, diffusion and drift to each device of a unit cell); then
        W = G+ - G-. A conductance drifting down shrinks |W| whichever side holds it."""
        self.plus.idle(delta_t, step_s, drift, seed)
        self.minus.idle(delta_t, step_s, drift, seed)
        self._reduce()

    def pulse(self, counts: np.ndarray) -> int:
        """counts[i, j] > 0: that many up pulses into G+; < 0: |counts| up pulses into G-. Not an update
        cycle (no refresh). Returns pulses fired."""
        counts = np.asarray(counts, np.int64)
        n = self.plus.pulse(np.maximum(counts, 0)) + self.minus.pulse(np.maximum(-counts, 0))
        self._reduce()
        return n

    def update(self, x: np.ndarray, d: np.ndarray, lr: float, cfg: UpdateConfig | None = None) -> int:
        """W -= lr d^T x from a mini-batch x (batch, in), d (batch, out): each sample is one update cycle,
        and the refresh runs after every cycle whose count is a multiple of refresh_every (times the batch
        size with units_in_mbatch). Returns pulses fired, the refresh's rewrites and resets included."""
        cfg = cfg or UpdateConfig()
        x, d = checked_batch(x, d, self.shape)
        cell = self.device
        batch = x.shape[0]
        period = cell.refresh_every * (batch if cell.units_in_mbatch else 1)
        cuts = [0]
        if period > 0:
            first = period - self.cycles % period  # samples until the next refresh
            cuts += list(range(first, batch + 1, period))
        cuts = sorted(set(cuts + [batch]))
        before = self.pulses
        for a, b in zip(cuts[:-1], cuts[1:]):
            self._update_chunk(x[a:b], d[a:b], lr, cfg)
            self.cycles += b - a
            if period > 0 and self.cycles % period == 0:
                self.refresh()
        self._reduce()
        return self.pulses - before

    def _update_chunk(self, x, d, lr, cfg) -> None:
        p, m = self.plus, self.minus
        self.counter += 1
        if cfg.mode == "pulsed":
            n = one_sided_update_kernel(
                p.w,
                m.w,
                x,
                d,
                update_settings(lr, p.params.granularity, cfg),
                p.params.kernel,
                m.params.kernel,
                self.seed,
                self.counter,
            )
            p.add_pulses(n)  # the routed pulses are counted on G+ (the total is what counts)
            return
        dw = np.ascontiguousarray(mean_update(x, d, lr, p.params.granularity, cfg), np.float64)
        for a, part in ((p, np.maximum(dw, 0.0)), (m, np.maximum(-dw, 0.0))):
            counter = a.next_counter()
            a.add_pulses(
                expected_update_kernel(a.w, part, a.params.granularity, a.params.kernel, a.seed, counter, NO_SET)
            )

    # -- the refresh --------------------------------------------------------------------------------------
    def refresh(self) -> int:
        """Read every column of G+ and G- through refresh_forward (one-hot inputs), reset both devices of
        the elements the criterion picks and write |g+ - g-| back onto the larger side with a pulsed update
        of refresh_update settings (lr -1, one one-hot sample per column). Returns elements refreshed."""
        cell = self.device
        eye = np.eye(self.shape[1], dtype=np.float32)
        gp = analog_mvm(self.plus.w, eye, cell.refresh_forward, self.read_stream).T  # (out, in)
        gm = analog_mvm(self.minus.w, eye, cell.refresh_forward, self.read_stream).T
        self.reads += 2 * self.shape[1]
        w_max = abs(cell.device.w_max)
        up, lo = cell.refresh_upper_thres, cell.refresh_lower_thres
        p_larger = gp > gm
        pick = np.where(p_larger, (gp / w_max > up) & (gm / w_max > lo), (gp / w_max > lo) & (gm / w_max > up))
        count = int(np.count_nonzero(pick))
        if count == 0:
            return 0
        mask = pick.view(np.uint8)
        for a in (self.plus, self.minus):
            a.reset_elements(mask)
        self.resets += 2 * count
        diff = np.abs(gp - gm)
        for a, side in ((self.plus, pick & p_larger), (self.minus, pick & ~p_larger)):
            cols = np.flatnonzero(side.any(axis=0))
            if cols.size:
                a.update(eye[cols], np.where(side, diff, 0.0).T[cols], -1.0, cell.refresh_update)
        self.refreshes += count
        self._reduce()
        return count

    # -- state --------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Both devices' states and the cell's counters and read RNG: enough to continue bit-exactly."""
        return {
            "plus": self.plus.state_dict(),
            "minus": self.minus.state_dict(),
            "counter": self.counter,
            "cycles": self.cycles,
            "refreshes": self.refreshes,
            "resets": self.resets,
            "reads": self.reads,
            "read_counter": self.read_stream.counter,
        }

    def load_state_dict(self, state: dict) -> None:
        if "plus" not in state:
            raise ValueError("state is not a one-sided cell's (no `plus` device); the tile's device differs")
        self.plus.load_state_dict(state["plus"])
        self.minus.load_state_dict(state["minus"])
        for key in ("counter", "cycles", "refreshes", "resets", "reads"):
            setattr(self, key, int(state[key]))
        self.read_stream.counter = int(state["read_counter"])
        self._reduce()

    def zero_shift(self, n_cycles: int | None = None) -> None:
        """Not for a one-sided cell: both directions are up pulses, so no symmetric point attracts W."""
        raise ValueError("zero_shift: a one-sided cell (OneSided) has no symmetric point to shift to")
