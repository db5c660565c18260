"""The expected update: the Analog Update with granularity, a fast stand-in for the pulsed update.

The Analog Update of [R1] (Wu et al., NeurIPS 2025, arXiv:2502.06309, eq. 5) is the small-step limit of a
pulse train, W <- W + dW F(W) - |dW| G(W) with F = (q_minus + q_plus) / 2 and G = (q_minus - q_plus) / 2
(R1 Theorem 4 bounds the gap); here it keeps the granularity of whole pulses and their noise.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, uint64

from aimc.devices.loops import total
from aimc.devices.pulsed_set import mark
from aimc.devices.response_step import DW_UP, W_MAX, W_MIN, element_step
from aimc.devices.rng import normal_step, stream_seed, uniform_step


@njit(cache=True, parallel=True)
def expected_update_kernel(w, dw, granularity, params, seed, counter, pulsed) -> int:
    """Analog Update with granularity: |dw|/granularity stochastically rounded to n whole pulses, applied as
    n mean steps at the current w plus noise of n pulses' variance, then clipped; params the elements'
    ElementKernelParams (devices.kernel_bundles). Returns pulses fired; adds the elements with n > 0 to the
    set `pulsed` (devices.pulsed_set; where it has rows: write noise)."""
    ep, code, consts, grid, tab_up, tab_dn, sigma, additive = params
    rows = w.shape[0]
    fired = np.empty(rows, np.int64)
    for i in prange(rows):
        fired[i] = expected_update_row(
            w, dw, granularity, ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter, pulsed, i
        )
    return total(fired)


@njit(cache=True, inline="always")
def expected_update_row(
    w, dw, granularity, ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter, pulsed, i
) -> int:
    """Row i of expected_update_kernel, from its own stream (seed, counter, i): the CPU kernel runs the rows
    in parallel, the GPU twin (devices.gpu.expected_update) one row per thread. Returns the row's pulses. Takes
    the ElementKernelParams' fields, unpacked once outside the parallel loop (the bundle unpacked per row made a
    512 x 512 update of aihwkit_reram_es 3% slower, one thread, 2026-12-06)."""
    fired = 0
    rs = stream_seed(uint64(seed), uint64(counter), uint64(i))
    er = ep[i]
    for j in range(w.shape[1]):
        desired = dw[i, j]
        if desired == 0.0:
            continue
        real = abs(desired) / granularity
        n = int(real)
        u, rs = uniform_step(rs)
        if u < real - n:
            n += 1
        if n == 0:
            continue
        up = desired > 0.0
        k = 1 - int(up)  # branch-free direction, see element_step
        v = float(w[i, j])
        s = element_step(code, up, v, er, j, consts, grid, tab_up, tab_dn)
        step = n * s
        if sigma > 0.0:
            scale = er[j, DW_UP + k] if additive else s
            xi, rs = normal_step(rs)
            step += sigma * scale * math.sqrt(n) * xi
        v = v + (1.0 - 2.0 * k) * step
        v = min(max(v, er[j, W_MIN]), er[j, W_MAX])
        w[i, j] = v
        fired += n
        if pulsed.shape[0] > 0:
            mark(pulsed, i, j)
    return fired
