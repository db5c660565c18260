"""The read periphery's converters: the levels of a DAC or ADC over +-bound and the DAC of input rows
(devices.periphery describes the read they belong to)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def level_step(bound, bits):
    """Step between the 2^bits - 1 levels of a converter over +-bound (float32; 1 for bits 0: none)."""
    return np.float32(2.0 * bound / (2.0**bits - 2.0)) if bits > 0 else np.float32(1.0)


@njit(cache=True, inline="always")
def quantize(v, b32, step):
    """v clipped to +-b32 and rounded to the nearest level (a DAC or ADC conversion). round(., 0) rounds half to
    even as np.rint (a NaN stays NaN) and compiles for the CUDA target too (devices.gpu.periphery)."""
    return np.float32(round(min(max(v, -b32), b32) / step, 0)) * step


@njit(cache=True, error_model="numpy")
def dac_rows(x, first, stop, bound, bits, scale, out) -> None:
    """out[k] = the DAC of row first + k of x, for rows first .. stop - 1: divided by its scale (1 where the
    scale is 0), clipped to +-bound and quantized to 2^bits - 1 levels (bits 0: clipped only). x (batch, n),
    scale (batch,) float32; out at least (stop - first, n). error_model "numpy": the divisors are never 0, and
    without Numba's division check the loop vectorizes."""
    step = level_step(bound, bits)
    b32 = np.float32(bound)
    for i in range(first, stop):
        s = scale[i] if scale[i] > 0 else np.float32(1.0)
        row = x[i]
        dst = out[i - first]
        if bits > 0:
            for j in range(x.shape[1]):
                dst[j] = quantize(row[j] / s, b32, step)
        else:
            for j in range(x.shape[1]):
                dst[j] = min(max(row[j] / s, -b32), b32)


@njit(cache=True)
def dac_input(x, bound, bits, scale):
    """The DAC of every row of x (dac_rows) into a new float32 array (batch, n)."""
    xq = np.empty(x.shape, np.float32)
    dac_rows(x, 0, x.shape[0], bound, bits, scale, xq)
    return xq
