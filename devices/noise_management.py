"""Noise management of a read: the scale each input vector is divided by before the DAC, for every type of
aihwkit 1.1.0's NoiseManagementType that `devices.periphery.PeripheryConfig` offers (the codes of
`periphery.NM_CODES`), and the running average that average_abs_max keeps from read to read."""

from __future__ import annotations

import numpy as np
from numba import njit

from aimc.devices.loops import row_abs_max


def fresh_average() -> np.ndarray:
    """A running average of average_abs_max noise management before its first vector: float32 (1,), -1."""
    return np.full(1, -1.0, np.float32)


@njit(cache=True)
def nm_scales(x, nm, average):
    """The noise-management scale of each row of x (float32 (batch,)); nm: PeripheryConfig.nm_settings.
    Code 1 max |x|, 2 max x, each at most thres where thres > 0; 3 thres (1 where 0); 4 max |x| (at most
    thres) raised to np_sum_scale; 5 the running average average[0] (float32 (1,), negative before the first
    vector) updated row by row, in place: the first row's max |x|, then a (1 - decay) + decay max |x| (aihwkit
    1.1.0's CPU binary, measured: one update per vector, in batch order, in every read); 0 none. A scale
    <= 0 is returned as 0: that row's read is skipped and its output is 0, without output noise (aihwkit
    1.1.0's binary, measured: under ABS_MAX a zero input vector reads exactly 0 forward and backward; under
    MAX a vector without a positive entry)."""
    code, thres, wmax, out_bound, inp_res, max_bm_res, decay = nm
    batch = x.shape[0]
    scale = np.ones(batch, np.float32)
    if code == 1 or code == 2 or code == 4:
        x_max = row_max(x) if code == 2 else row_abs_max(x)
        for i in range(batch):
            v = x_max[i] if thres <= 0 else min(x_max[i], np.float32(thres))
            if code == 4:
                v = np_sum_scale(x[i], v, wmax, out_bound, inp_res, max_bm_res)
            scale[i] = v if v > 0 else np.float32(0.0)
    elif code == 3 and thres > 0:
        scale[:] = np.float32(thres)
    elif code == 5:
        x_max = row_abs_max(x)
        keep, d32 = np.float32(1.0) - np.float32(decay), np.float32(decay)
        for i in range(batch):
            a = average[0]
            a = x_max[i] if a < 0 else a * keep + d32 * x_max[i]
            average[0] = a
            scale[i] = a if a > 0 else np.float32(0.0)
    return scale


@njit(cache=True, inline="always")
def np_sum_scale(row, amax, wmax, out_bound, inp_res, max_bm_res):
    """abs_max_np_sum's scale of one input vector `row` whose max |x| (at most nm_thres) is amax:
    max(amax, min(S wmax / out_bound, amax / inp_res max_bm_res)), S = max(sum of the positive entries, -sum
    of the negative ones) summed in order, the min only with a DAC (inp_res > 0), all in float32 (aihwkit
    1.1.0's computeNoiseManagement, AbsMaxNPSum: the input is scaled so that a weight of wmax everywhere
    would not saturate the ADC, but by at most the DAC's max_bm_res limit; out_bound is finite here)."""
    psum = np.float32(0.0)
    nsum = np.float32(0.0)
    for j in range(row.shape[0]):
        v = row[j]
        if v > 0:
            psum += v
        elif v < 0:
            nsum += v
    s = max(psum, -nsum) * np.float32(wmax) / np.float32(out_bound)
    if inp_res > 0:
        s = min(amax / np.float32(inp_res) * np.float32(max_bm_res), s)
    return max(amax, s)


@njit(cache=True)
def row_max(x):
    """max_j x[i, j] per row (float32 (batch,))."""
    out = np.empty(x.shape[0], np.float32)
    for i in range(x.shape[0]):
        m = x[i, 0]
        for j in range(1, x.shape[1]):
            m = max(m, x[i, j])
        out[i] = m
    return out
