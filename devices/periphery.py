"""Read periphery of a crossbar: y = W x through DAC, output noise, ADC and bound management.

Model (aihwkit 1.1.0's forward pass, see ../shared/AIHWKIT.md; R1's settings in DOMAIN.md section 3):
each input vector is divided by its absolute maximum (noise management), clipped to +-inp_bound and
quantized to 2^inp_bits - 1 levels; the analog MVM adds N(0, out_noise^2) to every output; outputs are
clipped to +-out_bound and quantized to 2^out_bits - 1 levels; where an output saturates and bound
management is on, that sample is read again with its input halved, up to `max_bm_reads` times. The result
is scaled back to the units of x. The output noise of sample b comes from stream (seed, counter, b) of
the caller's `devices.rng.Stream`, one counter per read (and per bound-management re-read).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from numba import njit, uint64
from pydantic import BaseModel, ConfigDict, Field

from devices.kernels import abs_max
from devices.rng import Stream, fill_normals, stream_seed


class PeripheryConfig(BaseModel):
    """DAC/ADC and noise of one read direction. Defaults are R1's hardware settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inp_bound: float = Field(1.0, gt=0, description="DAC input range +-inp_bound (normalized units)")
    inp_bits: int | None = Field(7, ge=1, le=24, description="DAC resolution in bits; None: no quantization")
    out_bound: float = Field(12.0, gt=0, description="ADC output range +-out_bound (normalized units)")
    out_bits: int | None = Field(9, ge=1, le=24, description="ADC resolution in bits; None: no quantization")
    out_noise: float = Field(0.06, ge=0, description="std of additive output noise (normalized units)")
    noise_management: bool = Field(True, description="scale each input vector by its absolute maximum")
    bound_management: bool = Field(True, description="re-read saturated samples with the input halved")
    max_bm_reads: int = Field(10, ge=1, le=30, description="most reads per sample under bound management")
    ideal: bool = Field(False, description="exact floating-point MVM: no DAC, noise, ADC or bounds")

    @classmethod
    def perfect(cls) -> "PeripheryConfig":
        """An exact read, y = W x."""
        return cls(ideal=True)


@njit(cache=True, inline="always")
def _level_step(bound, bits):
    """Step between the 2^bits - 1 levels of a converter over +-bound (float32; 1 for bits 0: none)."""
    return np.float32(2.0 * bound / (2.0**bits - 2.0)) if bits > 0 else np.float32(1.0)


@njit(cache=True, inline="always")
def _quantize(v, b32, step):
    """v clipped to +-b32 and rounded to the nearest level (a DAC or ADC conversion)."""
    return np.float32(np.rint(min(max(v, -b32), b32) / step)) * step


@njit(cache=True)
def _prepare_input(x, bound, bits, noise_management):
    """Noise management (divide each row by its max |x|, 1 where 0), clip to +-bound, quantize to
    2^bits - 1 levels (bits 0: none). Returns (xq float32, scale float32 (batch,))."""
    batch, n = x.shape
    xq = np.empty((batch, n), np.float32)
    scale = np.ones(batch, np.float32)
    step = _level_step(bound, bits)
    b32 = np.float32(bound)
    for i in range(batch):
        s = np.float32(1.0)
        if noise_management:
            m = np.float32(abs_max(x[i]))
            if m > 0:
                s = m
        scale[i] = s
        row = x[i]
        out = xq[i]
        if bits > 0:
            for j in range(n):
                out[j] = _quantize(row[j] / s, b32, step)
        else:
            for j in range(n):
                out[j] = min(max(row[j] / s, -b32), b32)
    return xq, scale


@njit(cache=True)
def _finish_rows(y, rows, row_scale, out_noise, bound, bits, check, seed, counter):
    """Add out_noise * N(0, 1) to y[rows] (row i from stream (seed, counter, i)); unless `check` finds a
    saturated output (|y| >= bound) in a row, clip, quantize and multiply that row by row_scale[k] in
    place. Returns a bool per row: finished (True) or saturated (left for a re-read). Serial: a parallel
    launch costs more than the work of one read."""
    n = y.shape[1]
    b32 = np.float32(bound)
    step = _level_step(bound, bits)
    done = np.ones(len(rows), np.bool_)
    state = np.empty(1, np.uint64)
    noise = np.empty(n)
    for k in range(len(rows)):
        i = rows[k]
        out = y[i]
        if out_noise > 0:
            state[0] = stream_seed(uint64(seed), uint64(counter), uint64(i))
            fill_normals(noise, state)
            for j in range(n):
                out[j] += np.float32(out_noise * noise[j])
        if check:
            for j in range(n):
                if abs(out[j]) >= b32:
                    done[k] = False
                    break
        if done[k]:
            s = row_scale[k]
            if bits > 0:
                for j in range(n):
                    out[j] = _quantize(out[j], b32, step) * s
            else:
                for j in range(n):
                    out[j] = min(max(out[j], -b32), b32) * s
    return done


def analog_mvm(weight: np.ndarray, x: np.ndarray, cfg: PeripheryConfig, stream: Stream,
               product: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """y[b] = weight @ x[b] read through the periphery; weight (out, in), x (batch, in) -> (batch, out).

    stream: the source of the output noise (one counter per read). product(xq) computes xq @ weight.T for
    a float32 (rows, in) block (default numpy); the trainer layer passes a torch product, so both share
    this one model and its random draws.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    prod = product if product is not None else (lambda a: a @ weight.T)
    if cfg.ideal:
        return np.ascontiguousarray(prod(x), dtype=np.float32)
    inp_bits, out_bits = cfg.inp_bits or 0, cfg.out_bits or 0
    xq, scale = _prepare_input(x, cfg.inp_bound, inp_bits, cfg.noise_management)
    y = np.ascontiguousarray(prod(xq), dtype=np.float32)
    rows = np.arange(len(x))
    check = cfg.bound_management and cfg.max_bm_reads > 1
    done = _finish_rows(y, rows, scale, cfg.out_noise, cfg.out_bound, out_bits, check, stream.seed, stream.take())
    if not done.all():
        _reread_saturated(y, x, rows[~done], scale, cfg, prod, stream)
    return y


def _reread_saturated(y, x, todo, scale, cfg, prod, stream) -> None:
    """Bound management: read the saturated rows `todo` of y again with their input halved once more per
    attempt, up to cfg.max_bm_reads reads in all (the last one is clipped); y is finished in place."""
    inp_bits, out_bits = cfg.inp_bits or 0, cfg.out_bits or 0
    factor = np.float32(1.0)
    for attempt in range(1, cfg.max_bm_reads):
        if len(todo) == 0:
            break
        factor *= np.float32(0.5)
        xs, _ = _prepare_input(x[todo] * (factor / scale[todo])[:, None], cfg.inp_bound, inp_bits, False)
        y[todo] = prod(xs)
        check = attempt < cfg.max_bm_reads - 1
        done = _finish_rows(y, todo, scale[todo] / factor, cfg.out_noise, cfg.out_bound, out_bits, check,
                            stream.seed, stream.take())
        todo = todo[~done]
