"""Read periphery of a crossbar: y = W x through DAC, output noise, ADC and bound management.

Model (aihwkit 1.1.0's forward pass, see ../shared/AIHWKIT.md; R1's settings in DOMAIN.md section 3):
each input vector is divided by its absolute maximum (noise management), clipped to +-inp_bound and
quantized to 2^inp_bits - 1 levels; the analog MVM adds N(0, out_noise^2) to every output; outputs are
clipped to +-out_bound and quantized to 2^out_bits - 1 levels; where an output saturates and bound
management is on, that sample is read again with its input halved, up to `max_bm_reads` times. The result
is scaled back to the units of x.
"""

from __future__ import annotations

import numpy as np
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


def _quantize(v: np.ndarray, bound: float, bits: int | None) -> np.ndarray:
    """Clip to +-bound and round to 2^bits - 1 levels (step 2 bound / (2^bits - 2))."""
    v = np.clip(v, -bound, bound)
    if bits is None:
        return v
    step = 2.0 * bound / (2.0**bits - 2.0)
    return np.round(v / step) * step


def analog_mvm(weight: np.ndarray, x: np.ndarray, cfg: PeripheryConfig, rng: np.random.Generator) -> np.ndarray:
    """y[b] = weight @ x[b] read through the periphery; weight (out, in), x (batch, in) -> (batch, out)."""
    x = np.asarray(x, dtype=np.float32)
    if cfg.ideal:
        return x @ weight.T
    scale = np.abs(x).max(axis=1, keepdims=True) if cfg.noise_management else np.ones((x.shape[0], 1), np.float32)
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    xn = x / scale
    out = np.empty((x.shape[0], weight.shape[0]), np.float32)
    todo = np.arange(x.shape[0])
    factor = 1.0
    for attempt in range(cfg.max_bm_reads):
        xq = _quantize(xn[todo] * factor, cfg.inp_bound, cfg.inp_bits).astype(np.float32)
        y = xq @ weight.T
        if cfg.out_noise > 0:
            y += (cfg.out_noise * rng.standard_normal(y.shape)).astype(np.float32)
        saturated = np.abs(y).max(axis=1) >= cfg.out_bound
        last = not cfg.bound_management or attempt == cfg.max_bm_reads - 1
        done = np.ones(len(todo), bool) if last else ~saturated
        out[todo[done]] = _quantize(y[done], cfg.out_bound, cfg.out_bits) / factor
        todo = todo[~done]
        if len(todo) == 0:
            break
        factor *= 0.5
    return out * scale
