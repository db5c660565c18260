"""Read periphery of a crossbar: y = W x through DAC, output noise, ADC and bound management.

Model (aihwkit 1.1.0's forward pass, see ../shared/AIHWKIT.md; R1's settings in DOMAIN.md section 3):
each input vector is divided by its absolute maximum (noise management), clipped to +-inp_bound and
quantized to 2^inp_bits - 1 levels; the analog MVM adds N(0, out_noise^2) to every output; outputs are
clipped to +-out_bound and quantized to 2^out_bits - 1 levels; where an output saturates and bound
management is on, that sample is read again with its input halved, up to `max_bm_reads` times. The result
is scaled back to the units of x.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from numba import njit
from pydantic import BaseModel, ConfigDict, Field


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


@njit(cache=True)
def _prepare_input(x, bound, bits, noise_management):
    """Noise management (divide each row by its max |x|, 1 where 0), clip to +-bound, quantize to
    2^bits - 1 levels (bits 0: none). Returns (xq float32, scale float32 (batch, 1))."""
    batch, n = x.shape
    xq = np.empty((batch, n), np.float32)
    scale = np.ones((batch, 1), np.float32)
    step = np.float32(2.0 * bound / (2.0**bits - 2.0)) if bits > 0 else np.float32(1.0)
    b32 = np.float32(bound)
    for i in range(batch):
        s = np.float32(1.0)
        if noise_management:
            m = np.float32(0.0)
            for j in range(n):
                m = max(m, abs(x[i, j]))
            if m > 0:
                s = m
        scale[i, 0] = s
        for j in range(n):
            v = min(max(x[i, j] / s, -b32), b32)
            if bits > 0:
                v = np.float32(np.rint(v / step)) * step
            xq[i, j] = v
    return xq, scale


@njit(cache=True)
def _finish_rows(y, rows, noise, out_noise, bound, bits, check):
    """Add out_noise * noise to y[rows]; unless `check` finds a saturated output (|y| >= bound) in a row,
    clip and quantize that row in place. Returns a bool per row: finished (True) or saturated."""
    n = y.shape[1]
    b32 = np.float32(bound)
    step = np.float32(2.0 * bound / (2.0**bits - 2.0)) if bits > 0 else np.float32(1.0)
    done = np.ones(len(rows), np.bool_)
    for k in range(len(rows)):
        i = rows[k]
        if out_noise > 0:
            for j in range(n):
                y[i, j] += np.float32(out_noise * noise[k, j])
        if check:
            for j in range(n):
                if abs(y[i, j]) >= b32:
                    done[k] = False
                    break
        if done[k]:
            for j in range(n):
                v = min(max(y[i, j], -b32), b32)
                if bits > 0:
                    v = np.float32(np.rint(v / step)) * step
                y[i, j] = v
    return done


def analog_mvm(weight: np.ndarray, x: np.ndarray, cfg: PeripheryConfig, rng: np.random.Generator,
               product: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """y[b] = weight @ x[b] read through the periphery; weight (out, in), x (batch, in) -> (batch, out).

    product(xq) computes xq @ weight.T for a float32 (rows, in) block (default numpy); the trainer layer
    passes a torch product, so both share this one model and its random draws.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    prod = product if product is not None else (lambda a: a @ weight.T)
    if cfg.ideal:
        return np.ascontiguousarray(prod(x), dtype=np.float32)
    xq, scale = _prepare_input(x, cfg.inp_bound, cfg.inp_bits or 0, cfg.noise_management)
    y = np.ascontiguousarray(prod(xq), dtype=np.float32)
    todo = np.arange(len(x))
    factor = np.float32(1.0)
    for attempt in range(cfg.max_bm_reads):
        if attempt > 0:  # re-read the saturated rows with their input halved once more
            factor *= np.float32(0.5)
            xs, _ = _prepare_input(x[todo] * (factor / scale[todo]), cfg.inp_bound, cfg.inp_bits or 0, False)
            y[todo] = prod(xs)
        noise = rng.standard_normal((len(todo), y.shape[1])) if cfg.out_noise > 0 else _NO_NOISE
        check = cfg.bound_management and attempt < cfg.max_bm_reads - 1
        done = _finish_rows(y, todo, noise, cfg.out_noise, cfg.out_bound, cfg.out_bits or 0, check)
        if factor != 1.0:
            y[todo[done]] /= factor
        todo = todo[~done]
        if len(todo) == 0:
            break
    y *= scale
    return y


_NO_NOISE = np.zeros((1, 1))
