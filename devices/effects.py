"""aihwkit's device effects beyond the pulse response: write noise, decay toward the reset value, diffusion,
reset, corrupt devices and drift (devices.drift), with aihwkit's parameter names, defaults and equations
(IBM aihwkit 1.1.0's PulsedDevice; where its docstrings and its binary disagree, the binary: docs/devices.md
lists where).

`DeviceEffects` holds the config fields (a base of the aihwkit families); `draw_effects` draws the
per-element values of an array once, `ElementEffects` holds them; `redraw_kernel` adds Gaussian noise to
chosen elements (write noise, diffusion, reset) from counter-keyed streams, so results do not depend on the
thread count. All of it is skipped where the effect is off: an array without effects pays nothing per pulse.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange, uint64
from pydantic import BaseModel, Field, field_validator, model_serializer

from aimc.devices.device_base import DW_DOWN, DW_UP, W_MAX, W_MIN
from aimc.devices.drift import DriftParameter
from aimc.devices.normals import BLOCK, fill_normals
from aimc.devices.pulsed_set import row_columns
from aimc.devices.rng import stream_seed

EFFECT_STREAMS = uint64(1) << uint64(50)
"""Stream index offset of the effects' noise: row i of effect stream k draws from stream
EFFECT_STREAMS + k * 2^32 + i, apart from the pulse and train streams of the same call."""
WRITE, DIFFUSE, RESET = 0, 1, 2
NO_WRITE_NOISE = np.zeros((0, 0), np.float32)
"""The write-noise std of an array without write noise, for the kernels that take the std as a (1, 1)
array (ConductanceArray.write_std): both are writable C-contiguous float32 arrays to Numba, so the pulsed
update kernel compiles once for both (40 s each time), not twice. (A broadcast view would be another type,
and a read-only array turns writable in a deep copy.)"""
REDRAW_ROWS = 16
"""Rows per parallel chunk of redraw_kernel (each chunk allocates its buffers once)."""


class DeviceEffects(BaseModel):
    """aihwkit 1.1.0's effect fields of a pulsed device (all off by default, as there)."""

    write_noise_std: float = Field(
        0.0,
        ge=0,
        description="write noise: std of the apparent weight around the "
        "hidden one, in units of dw_min, redrawn after each pulse",
    )
    apply_write_noise_on_set: bool = Field(True, description="draw write noise when weights are set")
    lifetime: float = Field(
        0.0,
        ge=0,
        description="decay toward the reset value per optimizer step: w <- b + (w - b)(1 - 1/lifetime); 0 = off, "
        "else above 1",
    )
    lifetime_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of the lifetime")
    diffusion: float = Field(0.0, ge=0, description="std of the random walk per optimizer step (weight units)")
    diffusion_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of the diffusion rate")
    reset: float = Field(0.0, ge=0, description="mean reset value b (also the decay target)")
    reset_dtod: float = Field(0.0, ge=0, description="device-to-device std of the reset value (absolute)")
    reset_std: float = Field(0.01, ge=0, description="cycle-to-cycle std of a reset")
    corrupt_devices_prob: float = Field(0.0, ge=0, le=1, description="probability that an element is stuck")
    corrupt_devices_range: float = Field(
        0.1, ge=0, description="a stuck element's value is uniform within +- this range (and its bounds)"
    )
    drift: DriftParameter = Field(
        default_factory=DriftParameter, description="power-law drift of an idle array (devices.drift); off by default"
    )

    @field_validator("lifetime")
    @classmethod
    def _lifetime_off_or_above_one(cls, value: float) -> float:
        """aihwkit clamps the decay factor 1 - 1/L to 0 for L <= 1: every optimizer step would reset the
        weights to the reset value."""
        if 0 < value <= 1:
            raise ValueError(
                f"{value:g} must be 0 (no decay) or above 1 optimizer step (at most 1 resets the weights to the "
                "reset value every step)"
            )
        return value

    @model_serializer(mode="wrap")
    def _without_default_drift(self, handler):
        """The dump leaves out `drift` while it is off, so configs without drift keep their JSON and hash."""
        data = handler(self)
        if isinstance(data, dict) and not self.drift.model_dump(exclude_defaults=True):
            data.pop("drift", None)
        return data

    def corrupt(self, ep: np.ndarray, rng: np.random.Generator) -> None:
        """Stick elements with probability corrupt_devices_prob: b_max = b_min = a value uniform in
        [max(b_lo, -range), min(b_hi, range)] (b_lo, b_hi the element's bounds in order), zero steps."""
        if self.corrupt_devices_prob <= 0:
            return
        shape = ep.shape[:-1]
        stuck = rng.uniform(size=shape) < self.corrupt_devices_prob
        lo = np.maximum(np.minimum(ep[..., W_MIN], ep[..., W_MAX]), -self.corrupt_devices_range)
        hi = np.minimum(np.maximum(ep[..., W_MIN], ep[..., W_MAX]), self.corrupt_devices_range)
        value = lo + (hi - lo) * rng.uniform(size=shape)
        for col, v in ((W_MAX, value), (W_MIN, value), (DW_UP, 0.0), (DW_DOWN, 0.0)):
            ep[..., col] = np.where(stuck, v, ep[..., col])

    def draw_effects(self, shape: tuple[int, int], rng: np.random.Generator) -> ElementEffects:
        """Per-element effect values of an array of `shape` (device-to-device spread from rng)."""

        def spread(mean: float, dtod: float, relative: bool) -> np.ndarray:
            if dtod <= 0:
                return np.broadcast_to(np.float32(mean), shape)
            xi = rng.standard_normal(shape)
            return (mean * (1 + dtod * xi) if relative else mean + dtod * xi).astype(np.float32)

        reset_bias = spread(self.reset, self.reset_dtod, relative=False)  # additive (aihwkit's binary)
        decay = None
        if self.lifetime > 0:
            life = spread(self.lifetime, self.lifetime_dtod, relative=True).astype(float)
            decay = np.where(life > 1, 1 - 1 / np.where(life > 1, life, 1.0), 0.0).astype(np.float32)
        diffusion = None
        if self.diffusion > 0:
            diffusion = np.abs(spread(self.diffusion, self.diffusion_dtod, relative=True))
        return ElementEffects(
            write_noise=float(self.write_noise_std * self.dw_min),
            on_set=bool(self.apply_write_noise_on_set),
            reset_bias=reset_bias,
            reset_std=float(self.reset_std),
            decay_scale=decay,
            diffusion_rate=diffusion,
        )


@dataclass
class ElementEffects:
    """An array's drawn effect values: write_noise (absolute std, weight units; 0 = off) and on_set;
    reset_bias b (out, in) float32 (reset value and decay target); reset_std; decay_scale 1 - 1/L per element
    (0 where L <= 1; None: no decay); diffusion_rate per element (None: no diffusion). Arrays without spread
    are read-only broadcast views."""

    write_noise: float
    on_set: bool
    reset_bias: np.ndarray
    reset_std: float
    decay_scale: np.ndarray | None
    diffusion_rate: np.ndarray | None


@njit(cache=True, parallel=True)
def redraw_kernel(w, base, pulsed, scale, lo, hi, clip, seed, counter, stream) -> None:
    """w[i, j] = base[i, j] + scale[i, j] xi, clipped to [lo, hi] where `clip`, for the elements of the set
    `pulsed` (devices.pulsed_set; every element for a set without rows). The k-th chosen element of row i, in
    column order, takes normal k of the float32 stream (seed, counter, EFFECT_STREAMS + stream 2^32 + i), so a
    row draws only as many normals as it has chosen elements (rounded up to a block). Arrays (out, in);
    scale, lo, hi may be broadcast views."""
    rows, cols = w.shape
    chunks = (rows + REDRAW_ROWS - 1) // REDRAW_ROWS
    if pulsed.shape[0] > 0:
        for c in prange(chunks):
            xi = np.empty(cols + BLOCK, np.float32)  # buffers per chunk of rows: an allocation per row cost
            js = np.empty(cols, np.int64)  # more than a sparse row's work
            for i in range(c * REDRAW_ROWS, min(rows, (c + 1) * REDRAW_ROWS)):
                _redraw_row(w, base, scale, lo, hi, clip, i, js, row_columns(pulsed, i, js), xi, seed, counter, stream)
        return
    for c in prange(chunks):
        xi = np.empty(cols + BLOCK, np.float32)
        for i in range(c * REDRAW_ROWS, min(rows, (c + 1) * REDRAW_ROWS)):
            fill_normals(xi, 0, (cols + BLOCK - 1) // BLOCK * BLOCK, row_key(seed, counter, stream, i), 0)
            for j in range(cols):
                redraw_element(w, base, scale, lo, hi, clip, i, j, xi[j])


@njit(cache=True, inline="always")
def _redraw_row(w, base, scale, lo, hi, clip, i, js, count, xi, seed, counter, stream) -> None:
    """The chosen elements js[:count] (increasing columns) of row i in redraw_kernel; xi a work array of at
    least count + BLOCK float32."""
    if count == 0:
        return
    fill_normals(xi, 0, (count + BLOCK - 1) // BLOCK * BLOCK, row_key(seed, counter, stream, i), 0)
    for k in range(count):
        redraw_element(w, base, scale, lo, hi, clip, i, js[k], xi[k])


@njit(cache=True, inline="always")
def row_key(seed, counter, stream, i) -> uint64:
    """The key of row i's normals in redraw_kernel (effect `stream`, call `counter`)."""
    return stream_seed(uint64(seed), uint64(counter), EFFECT_STREAMS + (uint64(stream) << uint64(32)) + uint64(i))


@njit(cache=True, inline="always")
def redraw_element(w, base, scale, lo, hi, clip, i, j, xi) -> None:
    """w[i, j] = base[i, j] + scale[i, j] xi in float32, clipped to [lo, hi] where `clip` (as redraw_kernel)."""
    v = np.float32(base[i, j] + scale[i, j] * xi)
    if clip:
        v = min(max(v, lo[i, j]), hi[i, j])
    w[i, j] = v


@njit(cache=True, inline="always")
def contiguous_row(a, i, spare):
    """Row i of the 2-D array a as a C-contiguous 1-D array, so that a loop over it vectorizes: a view where
    the row is contiguous, `spare` (length a.shape[1]) filled with the row's value where a broadcasts it
    (stride 0), a copy otherwise."""
    if a.strides[1] == 0:
        spare[:] = a[i, 0]
        return spare
    return np.ascontiguousarray(a[i])


@njit(cache=True, parallel=True)
def decay_kernel(w, bias, scale, lo, hi, clip) -> None:
    """w <- bias + (w - bias) scale per element (aihwkit's decay with alpha 1), clipped to [lo, hi] where
    `clip` (needed only where a bias lies outside its element's bounds: the step is a convex combination of
    w and the bias). Arrays (out, in) float32, w C-contiguous; bias, scale, lo, hi may be broadcast views.
    Row by row over contiguous rows (contiguous_row), so the loop vectorizes also where the reset value or
    the lifetime has no spread: 512 x 512, per-element lifetimes, one reset value, one thread, no clip, 0.111
    ms indexing the broadcast view element by element, 0.045 ms so; with per-element reset values 0.038 and
    0.044 ms (Zen 4, 2026-12-05)."""
    rows, cols = w.shape
    chunks = (rows + REDRAW_ROWS - 1) // REDRAW_ROWS
    for c in prange(chunks):
        spares = np.empty((4, cols), np.float32)
        for i in range(c * REDRAW_ROWS, min(rows, (c + 1) * REDRAW_ROWS)):
            wr = w[i]
            br = contiguous_row(bias, i, spares[0])
            sr = contiguous_row(scale, i, spares[1])
            if clip:
                lr = contiguous_row(lo, i, spares[2])
                hr = contiguous_row(hi, i, spares[3])
                for j in range(cols):
                    wr[j] = min(max(br[j] + (wr[j] - br[j]) * sr[j], lr[j]), hr[j])
            else:
                for j in range(cols):
                    wr[j] = br[j] + (wr[j] - br[j]) * sr[j]
