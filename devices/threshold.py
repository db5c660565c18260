"""Threshold transfer: a digital buffer becomes pulse counts where it crosses a multiple of the granularity
(TTv2 and residual learning v2 fire their transfers through these kernels)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from aimc.devices.loops import total


@njit(cache=True)
def _pulses_for(v, lim, granularity, max_pulses, single) -> int:
    """Signed pulses for buffer value v: 0 below lim; else sign(v) (single) or sign(v) floor(|v| / granularity),
    at least 1 and at most max_pulses."""
    if abs(v) < lim:
        return 0
    if single:
        return 1 if v > 0 else -1
    m = min(max(int(abs(v) / granularity), 1), max_pulses)
    return m if v > 0 else -m


@njit(cache=True, parallel=True)
def threshold_counts(h, counts, granularity, threshold, max_pulses, single):
    """Where |h| >= threshold * granularity: n = sign(h) floor(|h| / granularity) pulses (single: n = sign(h)),
    clipped to +-max_pulses, written into counts; h -= n granularity. Elsewhere counts = 0. Returns sum |n|."""
    rows, cols = h.shape
    fired = np.empty(rows, np.int64)
    lim = threshold * granularity
    for i in prange(rows):
        fired[i] = 0
        for j in range(cols):
            v = h[i, j]
            n = _pulses_for(v, lim, granularity, max_pulses, single)
            if n != 0:
                h[i, j] = v - n * granularity
                fired[i] += abs(n)
            counts[i, j] = n
    return total(fired)


@njit(cache=True)
def threshold_counts_cols(h, cols, counts, granularity, threshold, max_pulses, single):
    """threshold_counts on the columns `cols` of h (rows x in) only; counts (rows x in) gets the pulses
    in those columns (the caller keeps the other columns zero). Returns sum |n|."""
    rows = h.shape[0]
    total = 0
    lim = threshold * granularity
    for c in range(cols.shape[0]):
        j = cols[c]
        for i in range(rows):
            v = h[i, j]
            n = _pulses_for(v, lim, granularity, max_pulses, single)
            if n != 0:
                h[i, j] = v - n * granularity
                total += abs(n)
            counts[i, j] = n
    return total
