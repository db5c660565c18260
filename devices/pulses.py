"""Pulses fired one at a time into chosen elements: the pulse kernel (programming, traces; float32 arithmetic as
aihwkit's tiles) and the alternating up/down pulses of the zero shift (float64 within a call), with the
one-pulse step the pulsed update shares.

Each kernel takes (seed, counter) and keys one random stream per row, so results do not depend on the
thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, uint64

from aimc.devices.loops import total
from aimc.devices.response_step import EXP_STEP, U_DW_UP, U_W_MAX, U_W_MIN, element_step
from aimc.devices.rng import normal_step, stream_seed

SIGNS = np.array([1.0, -1.0], np.float32)
"""Sign of a pulse's change by direction (k = 0 up, 1 down): one load, where computing 1 - 2k in floating
point took three instructions more."""


@njit(cache=True, inline="always")
def noisy_pulse(w, up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, xi, F=np.float64, noisy=True):
    """w after one pulse whose cycle-to-cycle noise is sigma times the standard normal xi, clipped to the
    element's bounds; arithmetic in F (float64 in the reference kernels, where a call keeps an element's
    weight in float64 over its pulses; float32 in the pulsed update: aihwkit's tiles compute in float32,
    and it takes 10%-15% off a pulse, docs/performance.md). noisy: apply the noise at all (callers pass
    sigma > 0, a constant where they can fix it)."""
    s = element_step(code, up, w, er, j, consts, grid, tab_up, tab_dn, F)
    k = uint64(1 - int(up))  # branch-free direction and unsigned indices, see element_step
    j = uint64(j)
    if noisy:
        if additive:
            s += F(sigma) * F(er[j, U_DW_UP + k]) * F(xi)
        else:
            s *= F(1.0) + F(sigma) * F(xi)
            if code == EXP_STEP and consts[6] > 0.0:  # ExpStep's extra spread: std sigma (add + slope |w|) more
                s += F(sigma) * (F(consts[4]) + F(consts[5]) * abs(F(w))) * F(xi)
    w = F(w) + F(SIGNS[k]) * s
    return min(max(w, F(er[j, U_W_MIN])), F(er[j, U_W_MAX]))


@njit(cache=True, inline="always")
def _one_pulse(w, up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, rs, F):
    """Apply one pulse with cycle-to-cycle noise (drawn from RNG state rs), then clip to the element's
    bounds; arithmetic in F. Returns (new w, next state)."""
    xi = 0.0
    noisy = sigma > 0.0
    if noisy:
        xi, rs = normal_step(rs)
    return noisy_pulse(w, up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, xi, F, noisy), rs


@njit(cache=True, inline="always")
def element_pulses(w, n, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, s):
    """Apply |n| pulses one at a time, up for n > 0, down for n < 0, in float32 as aihwkit's tiles (a noiseless
    trace equals aihwkit 1.1.0's to float32 rounding). Returns (new w, next state)."""
    up = n > 0
    w = np.float32(w)
    for _ in range(abs(n)):
        w, s = _one_pulse(w, up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, s, np.float32)
    return w, s


@njit(cache=True, inline="always")
def row_pulses(w, counts, cols, ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter, i) -> int:
    """Fire counts[i, j] signed pulses into the elements j of `cols` (increasing) of row i, element after
    element, from the row's stream (seed, counter, i): the row of pulse_kernel and pulse_columns_kernel and of
    their GPU twins (devices.gpu.pulses). The element parameters come unpacked (ElementKernelParams' fields):
    unpacked per row, the 512 x 512 pulses took 40% longer."""
    s = stream_seed(uint64(seed), uint64(counter), uint64(i))
    er = ep[i]
    fired = 0
    for c in range(cols.shape[0]):
        j = cols[c]
        n = counts[i, j]
        if n != 0:
            v, s = element_pulses(float(w[i, j]), n, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, s)
            w[i, j] = v
            fired += abs(n)
    return fired


@njit(cache=True, parallel=True)
def pulse_kernel(w, counts, params, seed, counter) -> int:
    """Apply counts[i, j] signed pulses to every element of w (float32, in place), params the elements'
    ElementKernelParams (devices.kernel_bundles); returns pulses fired."""
    ep, code, consts, grid, tab_up, tab_dn, sigma, additive = params
    rows, cols = w.shape
    fired = np.empty(rows, np.int64)
    # row_pulses over every column, with j counted rather than read from a column list: 0.24 against 0.33 ms
    # for a 512 x 512 array with 5% of its counts nonzero (2026-12-06, one process, same machine)
    for i in prange(rows):
        fired[i] = 0
        s = stream_seed(uint64(seed), uint64(counter), uint64(i))
        er = ep[i]
        for j in range(cols):
            n = counts[i, j]
            if n != 0:
                v, s = element_pulses(float(w[i, j]), n, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, s)
                w[i, j] = v
                fired[i] += abs(n)
    return total(fired)


@njit(cache=True, parallel=True)
def pulse_columns_kernel(w, counts, cols, params, seed, counter) -> int:
    """pulse_kernel where only the columns `cols` (increasing) of counts may be nonzero, on the calling thread
    and without a pass over the other columns: the same weights (an element without pulses draws nothing
    from its row's stream). Returns pulses fired.

    Built with parallel=True although it has no parallel loop (aimc.devices filters the warning): as in
    devices.pulsed_update.pulsed_update_kernel, the parallel pipeline removes the reference counting of the
    inlined pulse's array arguments on every pulse (the c-TTv2 transfers of R1's CNN first convolution,
    52 000 pulses into C in 184 calls: 2.6 -> 0.8 ms, one thread, 2026-12-04)."""
    ep, code, consts, grid, tab_up, tab_dn, sigma, additive = params
    fired = 0
    for i in range(w.shape[0]):
        fired += row_pulses(w, counts, cols, ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter, i)
    return fired


@njit(cache=True, parallel=True)
def alternate_kernel(w, cycles, params, seed, counter):
    """Fire cycles[i, j] (up, down) pulse pairs into element (i, j) of w (float32, in place)."""
    ep, code, consts, grid, tab_up, tab_dn, sigma, additive = params
    rows, cols = w.shape
    for i in prange(rows):
        s = stream_seed(uint64(seed), uint64(counter), uint64(i))
        er = ep[i]
        for j in range(cols):
            v = float(w[i, j])
            for k in range(2 * cycles[i, j]):  # one call site: the response is compiled in once, not twice
                v, s = _one_pulse(
                    v, k % 2 == 0, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, s, np.float64
                )
            w[i, j] = v
