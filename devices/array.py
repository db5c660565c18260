"""A crossbar array of resistive elements: weights, per-element parameters, pulses, reads, programming."""

from __future__ import annotations

import math

import numpy as np

from aimc.common import seeds
from aimc.devices.array_update import (
    COUNTER,
    PULSES,
    expected_array_update,
    pulse_array,
    update_array,
)
from aimc.devices.characteristics import element_steps_kernel, symmetric_point_kernel
from aimc.devices.device_base import ElementParams
from aimc.devices.drift import DriftParameter, DriftState, drift_weights, start_drift
from aimc.devices.effects import (
    DIFFUSE,
    NO_WRITE_NOISE,
    RESET,
    WRITE,
    DeviceEffects,
    ElementEffects,
    decay_kernel,
    redraw_kernel,
)
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.periphery import PeripheryConfig, analog_mvm
from aimc.devices.pulsed_set import NO_SET, set_of_mask
from aimc.devices.pulses import alternate_kernel
from aimc.devices.response import DeviceConfig
from aimc.devices.response_step import DW_DOWN, DW_UP, W_MAX, W_MIN
from aimc.devices.rng import Stream
from aimc.devices.update import UpdateConfig, mean_update


class ConductanceArray:
    """Weights of shape (out, in) as float32, each element with its own drawn response.

    The weight an MVM sees is `w - reference`: `reference` is the zero-shift reference array (zero until
    `zero_shift` programs it). All random draws come from `seed` and a call counter, so a run is
    reproducible whatever the thread count. `pulses` counts every pulse fired into the array.

    Devices with aihwkit's effects (devices.effects) carry `effects`; with write noise the pulses move the
    hidden weight `hidden` and `w` is the apparent weight that reads see, redrawn as hidden + noise for
    every element a call pulses (None without write noise: `w` is the weight); `write_std` holds the
    noise std as a (1, 1) array, the form the pulsed update kernel takes (effects.NO_WRITE_NOISE).
    """

    def __init__(self, out_size: int, in_size: int, device: DeviceConfig, seed: int = 0):
        self.device = device
        self.shape = (int(out_size), int(in_size))
        self.seed = int(seed) & 0x7FFFFFFFFFFFFFFF
        setup = seeds.generator(self.seed, seeds.ARRAY_SETUP)
        self.params: ElementParams = device.draw(self.shape, setup)
        self.w = np.zeros(self.shape, np.float32)
        np.clip(self.w, self.params.ep[..., W_MIN], self.params.ep[..., W_MAX], out=self.w, casting="unsafe")
        self.reference = np.zeros(self.shape, np.float32)
        self._counts = np.zeros(2, np.int64)  # COUNTER, PULSES (devices.array_update), advanced in place
        self.read_stream = Stream(seeds.stream_seed(self.seed, seeds.ARRAY_READS))  # reads and read noise
        self.effects: ElementEffects | None = (
            device.draw_effects(self.shape, setup) if isinstance(device, DeviceEffects) else None
        )
        self.hidden: np.ndarray | None = None
        self.write_std: np.ndarray | None = None
        self._bounds_c: tuple[np.ndarray, np.ndarray] | None = None  # see contiguous_bounds
        self._decay_clip: bool | None = None  # whether a reset value lies outside its element's bounds
        self.drift: DriftState | None = None  # made by the first `idle` call with drift on
        if self.effects is not None and self.effects.write_noise > 0:
            self.hidden = self.w.copy()
            self.write_std = np.full((1, 1), np.float32(self.effects.write_noise))
            if self.effects.on_set:
                self._redraw_apparent()

    # -- state ------------------------------------------------------------------------------------------
    @property
    def weights(self) -> np.ndarray:
        """Effective weights w - reference (float32 copy)."""
        return self.w - self.reference

    @property
    def counter(self) -> int:
        """Calls so far that drew random numbers (each call's streams are keyed by it)."""
        return int(self._counts[COUNTER])

    @property
    def pulses(self) -> int:
        """Pulses fired into the array so far."""
        return int(self._counts[PULSES])

    def next_counter(self) -> int:
        """Advance the call counter and return it: the key of one call's random streams."""
        self._counts[COUNTER] += 1
        return int(self._counts[COUNTER])

    def add_pulses(self, n: int) -> None:
        """Count n pulses fired into the array by a kernel that does not count them itself."""
        self._counts[PULSES] += int(n)

    def handle(self) -> tuple:
        """The array as the update protocol (devices.array_update) and kernels of other layers take it: its
        weights, element parameters, seed and counters, which those kernels advance in place; the fields of
        ArrayHandle as a plain tuple (devices.kernel_bundles says why)."""
        wn = NO_WRITE_NOISE if self.hidden is None else self.write_std
        return (
            self._target,
            self.w,
            self.reference,
            wn,
            self.params.kernel,
            float(self.params.granularity),
            self.seed,
            self._counts,
        )  # devices.array_update.ArrayHandle's fields

    def state_dict(self) -> dict:
        """Everything needed to continue bit-exactly: weights (and the hidden ones), reference, counters,
        read RNG."""
        out = {
            "w": self.w.copy(),
            "reference": self.reference.copy(),
            "counter": self.counter,
            "pulses": self.pulses,
            "read_counter": self.read_stream.counter,
        }
        if self.hidden is not None:
            out["hidden"] = self.hidden.copy()
        if self.drift is not None:
            out["drift"] = {k: np.copy(v) for k, v in vars(self.drift).items()}
        return out

    def load_state_dict(self, state: dict) -> None:
        if tuple(state["w"].shape) != self.shape:
            raise ValueError(f"state has shape {tuple(state['w'].shape)}, array is {self.shape}")
        self.w[...] = state["w"]
        self.reference[...] = state["reference"]
        self._counts[:] = (int(state["counter"]), int(state["pulses"]))
        self.read_stream.counter = int(state["read_counter"])
        if self.hidden is not None:
            self.hidden[...] = state["hidden"]
        self.drift = DriftState(**state["drift"]) if "drift" in state else None

    def set_weights(self, weights: np.ndarray) -> None:
        """Set the raw weights to `weights` clipped to each element's bounds (with write noise: the hidden
        weights, and the apparent ones drawn around them where apply_write_noise_on_set, as aihwkit)."""
        lo, hi = self.bounds
        target = self.w if self.hidden is None else self.hidden
        np.clip(np.asarray(weights, np.float32), lo, hi, out=target)
        if self.hidden is not None:
            if self.effects.on_set:
                self._redraw_apparent()
            else:
                self.w[...] = self.hidden

    # -- effects (devices.effects) -----------------------------------------------------------------------
    @property
    def _target(self) -> np.ndarray:
        """The weights pulses and effects change: the hidden ones with write noise, else w."""
        return self.w if self.hidden is None else self.hidden

    def _redraw_apparent(self, pulsed: np.ndarray = NO_SET) -> None:
        """w = hidden + write noise for the elements of the set `pulsed` (every element for NO_SET)."""
        redraw_kernel(
            self.w,
            self.hidden,
            pulsed,
            np.broadcast_to(self.write_std, self.shape),
            self.w,
            self.w,
            False,
            self.seed,
            self.next_counter(),
            WRITE,
        )

    def post_update_step(self) -> bool:
        """What aihwkit 1.1.0 applies once per optimizer step (its post_update_step, alpha 1): diffusion
        w <- clip(w + rate xi), then decay w <- b + (w - b) scale, clipped to the element's bounds; on the
        hidden weights with write noise, then every apparent weight is redrawn. Returns whether anything
        was applied (False without diffusion and lifetime)."""
        fx = self.effects
        if fx is None or (fx.diffusion_rate is None and fx.decay_scale is None):
            return False
        lo, hi = self.contiguous_bounds()
        w = self._target
        if fx.diffusion_rate is not None:
            redraw_kernel(w, w, NO_SET, fx.diffusion_rate, lo, hi, True, self.seed, self.next_counter(), DIFFUSE)
        if fx.decay_scale is not None:
            decay_kernel(w, fx.reset_bias, fx.decay_scale, lo, hi, self.decay_clips())
        if self.hidden is not None:
            self._redraw_apparent()
        return True

    def decay_weights(self, alpha: float = 1.0) -> bool:
        """One decay on demand (aihwkit's decay_weights(alpha)): w <- b + (w - b)(1 + alpha (scale - 1)),
        clipped to the element's bounds (alpha 1: the decay of post_update_step); on the hidden weights with
        write noise, then every apparent weight is redrawn. Returns whether the device decays (lifetime > 0)."""
        if not math.isfinite(alpha):
            raise ValueError(f"decay_weights: alpha must be finite (got {alpha})")
        fx = self.effects
        if fx is None or fx.decay_scale is None:
            return False
        lo, hi = self.contiguous_bounds()
        scale = (1.0 + alpha * (fx.decay_scale.astype(float) - 1.0)).astype(np.float32)
        decay_kernel(self._target, fx.reset_bias, scale, lo, hi, True)
        if self.hidden is not None:
            self._redraw_apparent()
        return True

    def idle(self, delta_t: float, step_s: float = 1.0, drift: DriftParameter | None = None, seed: int = 0) -> None:
        """Leave the array idle for delta_t seconds: drift (devices.drift; `drift`, else the device's own),
        clipped to the element bounds, then diffusion and decay for n = delta_t / step_s optimizer steps in
        closed form, w <- clip(w + sqrt(n) rate xi), then w <- b + (w - b) scale^n (n steps of
        `post_update_step`, but clipped once at the end); on the hidden weights with write noise, then every
        apparent weight is redrawn. Draws come from (array seed, `seed`, call counter); seed 0 keeps the
        array's own diffusion stream."""
        if not (0 <= delta_t < math.inf and 0 < step_s < math.inf):
            raise ValueError(f"idle: delta_t must be finite and >= 0, step_s finite and > 0 (got {delta_t}, {step_s})")
        fx = self.effects
        drift = drift if drift is not None else getattr(self.device, "drift", None)
        lo, hi = self.contiguous_bounds()
        w = self._target
        if drift is not None and drift.enabled:
            if self.drift is None:
                self.drift = start_drift(drift, w, seeds.generator(self.seed, seed, seeds.DRIFT_START))
            drift_weights(drift, self.drift, w, delta_t, seeds.generator(self.seed, seed, self.next_counter()))
            np.clip(w, lo, hi, out=w)
        n = delta_t / step_s
        if fx is not None and fx.diffusion_rate is not None and n > 0:
            key = self.seed if seed == 0 else int(seeds.generator(self.seed, seed).integers(2**62))
            redraw_kernel(
                w,
                w,
                NO_SET,
                (np.sqrt(n) * fx.diffusion_rate).astype(np.float32),
                lo,
                hi,
                True,
                key,
                self.next_counter(),
                DIFFUSE,
            )
        if fx is not None and fx.decay_scale is not None and n > 0:
            decay_kernel(w, fx.reset_bias, (fx.decay_scale.astype(float) ** n).astype(np.float32), lo, hi, True)
        if self.hidden is not None:
            self._redraw_apparent()

    def decay_clips(self) -> bool:
        """Whether the decay must clip: a reset value (the decay's target) lies outside its element's bounds
        (made once; False without device effects)."""
        if self._decay_clip is None:
            fx, (lo, hi) = self.effects, self.contiguous_bounds()
            self._decay_clip = fx is not None and bool(((fx.reset_bias < lo) | (fx.reset_bias > hi)).any())
        return self._decay_clip

    def contiguous_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Contiguous copies of the element bounds (made once): the effects' passes over every element read
        them at 8 bytes per element instead of the parameter rows' 24."""
        if self._bounds_c is None:
            self._bounds_c = tuple(np.ascontiguousarray(b) for b in self.bounds)
        return self._bounds_c

    def reset(self, columns: np.ndarray | None = None, prob: float = 1.0) -> None:
        """Reset the elements of `columns` (default all), each with probability prob (1: all of them):
        w = clip(b + reset_std xi) with b the element's reset value (aihwkit 1.1.0's reset_columns); with
        write noise on the hidden weights, then every apparent weight is redrawn."""
        self._reset_effects()
        mask = np.zeros(self.shape, np.uint8)
        mask[:, slice(None) if columns is None else np.atleast_1d(columns)] = 1
        if prob < 1.0:
            draw = seeds.generator(self.seed, self.next_counter(), RESET).uniform(size=self.shape)
            mask &= (draw < prob).astype(np.uint8)
        self.reset_elements(mask)

    def reset_elements(self, mask: np.ndarray) -> None:
        """Reset the elements where mask (uint8, out x in) is nonzero, as `reset` does."""
        fx = self._reset_effects()
        lo, hi = self.contiguous_bounds()
        redraw_kernel(
            self._target,
            fx.reset_bias,
            set_of_mask(mask),
            np.broadcast_to(np.float32(fx.reset_std), self.shape),
            lo,
            hi,
            True,
            self.seed,
            self.next_counter(),
            RESET,
        )
        if self.hidden is not None:
            self._redraw_apparent()

    def _reset_effects(self):
        """The device effects, which hold the reset values; ValueError for a device without them."""
        if self.effects is None:
            raise ValueError(f"{type(self.device).__name__} has no reset (aihwkit's families have)")
        return self.effects

    # -- pulses -----------------------------------------------------------------------------------------
    def pulse(self, counts: np.ndarray) -> int:
        """Fire counts[i, j] signed pulses (> 0 up) into each element, one at a time (the exact reference)."""
        counts = np.require(counts, np.int64, ["C", "W"])  # a read-only array would compile the kernel again
        if counts.shape != self.shape:
            raise ValueError(f"counts has shape {counts.shape}, array is {self.shape}")
        return int(pulse_array(self.handle(), counts, np.arange(self.shape[1])))

    def update(self, x: np.ndarray, d: np.ndarray, lr: float, cfg: UpdateConfig | None = None) -> int:
        """Rank-k update W -= lr d^T x from a mini-batch x (batch, in), d (batch, out); returns pulses fired.
        A NaN or infinity in x or d raises ValueError and leaves the weights as they were."""
        cfg = cfg or UpdateConfig()
        x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, self.shape[1])
        d = np.ascontiguousarray(d, dtype=np.float32).reshape(-1, self.shape[0])
        if x.shape[0] != d.shape[0]:
            raise ValueError(f"x has {x.shape[0]} samples, d has {d.shape[0]}")
        granularity = float(self.params.granularity)
        if cfg.mode == "pulsed":
            return int(update_array(self.handle(), x, d, update_settings(lr, granularity, cfg), True))
        dw = mean_update(x, d, lr, granularity, cfg)  # numpy's matmul: the sum order of the expected update
        return int(expected_array_update(self.handle(), np.ascontiguousarray(dw, np.float64), granularity))

    # -- reads ------------------------------------------------------------------------------------------
    def read(self, x: np.ndarray, periphery: PeripheryConfig | None = None) -> np.ndarray:
        """y = W x for x (batch, in) through the periphery (default: R1's settings)."""
        return analog_mvm(self.weights, x, periphery or PeripheryConfig(), self.read_stream)

    def read_transposed(self, d: np.ndarray, periphery: PeripheryConfig | None = None) -> np.ndarray:
        """z = W^T d for d (batch, out) through the periphery."""
        return analog_mvm(self.weights.T, d, periphery or PeripheryConfig(), self.read_stream)

    def read_weights(self, noise_std: float = 0.0) -> np.ndarray:
        """Element-wise read of the effective weights with Gaussian read noise (weight units)."""
        w = self.weights
        if noise_std > 0:
            w = w + (noise_std * self.read_stream.normal(self.shape)).astype(np.float32)
        return w

    # -- device characteristics -------------------------------------------------------------------------
    def element_steps(self, up: bool, w: np.ndarray | None = None) -> np.ndarray:
        """Mean pulse step magnitude of every element at raw weights w (default: the current ones)."""
        w = self._target if w is None else np.ascontiguousarray(w, dtype=np.float64)
        return element_steps_kernel(w, up, self.params.kernel)

    def symmetric_points(self) -> np.ndarray:
        """Per-element raw weight where mean up and down steps are equal (NaN where they always are)."""
        return symmetric_point_kernel(self.params.kernel)

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-element raw bounds (w_min, w_max)."""
        return self.params.ep[..., W_MIN], self.params.ep[..., W_MAX]

    # -- programming ------------------------------------------------------------------------------------
    def program(
        self,
        target: np.ndarray,
        max_iters: int = 30,
        read_noise_std: float = 0.0,
        tolerance: float | None = None,
        max_pulses: int | None = None,
    ) -> np.ndarray:
        """Closed-loop programming of the effective weights to `target`: read, fire round(error / granularity)
        pulses (at most max_pulses per element and iteration), repeat until every |error| < tolerance
        (default granularity / 2; `DeviceBase.granularity`, dw_min for most families) or max_iters. Returns
        the residual error target - weights (weight units)."""
        target = np.asarray(target, dtype=np.float32)
        if target.shape != self.shape:
            raise ValueError(f"target has shape {target.shape}, array is {self.shape}")
        tol = self.params.granularity / 2 if tolerance is None else tolerance
        for _ in range(max_iters):
            err = target - self.read_weights(read_noise_std)
            n = np.rint(err / self.params.granularity).astype(np.int64)
            n[np.abs(err) < tol] = 0
            if max_pulses is not None:
                np.clip(n, -max_pulses, max_pulses, out=n)
            if not n.any():
                break
            self.pulse(n)
        return target - self.weights

    def zero_shift(self, n_cycles: int | None = None, read_noise_std: float = 0.0) -> np.ndarray:
        """Drive every element to its symmetric point by alternating up/down pulses, then program the
        reference array to the value read there, so the effective weight w - reference is 0 where
        G = (q_minus - q_plus) / 2 = 0: the zero shift that residual learning needs, G(0) = 0 in the shifted
        coordinates ([R1] Wu et al., NeurIPS 2025, arXiv:2502.06309, Sec. 4).

        n_cycles: (up, down) pairs for every element. None: each element gets the pairs its own drift needs,
        `zero_shift_cycles`. Returns the reference.
        """
        cycles = np.full(self.shape, int(n_cycles), np.int64) if n_cycles is not None else self.zero_shift_cycles()
        alternate_kernel(self._target, cycles, self.params.kernel, self.seed, self.next_counter())
        if self.hidden is not None:
            self._redraw_apparent(set_of_mask(cycles))
        self.add_pulses(2 * int(cycles.sum()))
        self.reference[...] = self.w
        if read_noise_std > 0:
            self.reference += (read_noise_std * self.read_stream.normal(self.shape)).astype(np.float32)
        return self.reference.copy()

    def zero_shift_cycles(self, margin: float = 1.5) -> np.ndarray:
        """Pulse pairs each element needs to come within half a step of its symmetric point.

        Near w_sym one (up, down) pair changes w by about -r (w - w_sym), r = -d(up - down)/dw at w_sym, so
        the distance D shrinks as (1 - r)^n: n = margin ln(2 D / step) / r + 10. Where no such point attracts
        (constant steps, a drift to a bound: r <= 0 or no w_sym) the element gets n_states pairs; at most
        100 n_states pairs (an element with a tenth of the typical step needs about 50 n_states).
        """
        w_sym = self.symmetric_points()
        lo, hi = self.bounds
        step = np.maximum(0.5 * (self.params.ep[..., DW_UP] + self.params.ep[..., DW_DOWN]), 1e-12)
        h = np.maximum(step, 1e-9)
        at = np.nan_to_num(w_sym)
        net = lambda w: self.element_steps(True, w) - self.element_steps(False, w)  # noqa: E731
        rate = (net(np.clip(at - h, lo, hi)) - net(np.clip(at + h, lo, hi))) / (2 * h)
        dist = np.abs(self.w - at)
        ok = np.isfinite(w_sym) & (rate > 1e-12) & (w_sym > lo) & (w_sym < hi)
        n = margin * np.log(np.maximum(2 * dist / step, 1.0)) / np.where(ok, rate, 1.0) + 10
        lo_n, hi_n = self.device.bounds
        fallback = int(np.ceil((hi_n - lo_n) / self.params.granularity))
        return np.where(ok, np.minimum(np.ceil(n), 100 * fallback), fallback).astype(np.int64)
