"""Per-element characteristics of an array's drawn devices: mean steps at given weights, symmetric points."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from aimc.devices.response_step import W_MAX, W_MIN, element_step


@njit(cache=True, parallel=True)
def element_steps_kernel(w, up, params):
    """Mean pulse step magnitude of every element at the weights w (any float array of the shape of params.ep,
    params a devices.kernel_bundles.ElementKernelParams)."""
    ep, code, consts, grid, tab_up, tab_dn, _, _ = params
    rows, cols = w.shape
    out = np.empty((rows, cols))
    for i in prange(rows):
        er = ep[i]
        for j in range(cols):
            out[i, j] = element_step(code, up, float(w[i, j]), er, j, consts, grid, tab_up, tab_dn)
    return out


@njit(cache=True)
def _net_step(w, er, j, code, consts, grid, tab_up, tab_dn) -> float:
    """Mean up step minus mean down step of element j at the weight w. A plain call, so that the response
    functions are compiled in once and not at each of the bisection's three call sites."""
    return element_step(code, True, w, er, j, consts, grid, tab_up, tab_dn) - element_step(
        code, False, w, er, j, consts, grid, tab_up, tab_dn
    )


@njit(cache=True, parallel=True)
def symmetric_point_kernel(params):
    """Per-element weight where the mean up and down steps are equal (bisection, 60 halvings); params a
    devices.kernel_bundles.ElementKernelParams.

    Where up steps win everywhere the element drifts to its upper bound (returned), likewise the lower;
    where both are equal everywhere (constant step, no asymmetry) there is no symmetric point: NaN.
    """
    ep, code, consts, grid, tab_up, tab_dn, _, _ = params
    rows, cols = ep.shape[0], ep.shape[1]
    out = np.empty((rows, cols))
    for i in prange(rows):
        er = ep[i]
        for j in range(cols):
            lo = er[j, W_MIN]
            hi = er[j, W_MAX]
            h_lo = _net_step(lo, er, j, code, consts, grid, tab_up, tab_dn)
            h_hi = _net_step(hi, er, j, code, consts, grid, tab_up, tab_dn)
            if h_lo == 0.0 and h_hi == 0.0:
                out[i, j] = np.nan
                continue
            if h_lo <= 0.0 and h_hi <= 0.0:
                out[i, j] = lo
                continue
            if h_lo >= 0.0 and h_hi >= 0.0:
                out[i, j] = hi
                continue
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                h = _net_step(mid, er, j, code, consts, grid, tab_up, tab_dn)
                if (h > 0.0) == (h_lo > 0.0):
                    lo = mid
                    h_lo = h
                else:
                    hi = mid
            out[i, j] = 0.5 * (lo + hi)
    return out
