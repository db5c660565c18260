"""The element parameter layout and the mean step of one pulse, for every response family.

An array's elements share one response family (`code`) and carry their own drawn parameters in `ep`, an
array of shape (out, in, N_ELEMENT_PARAMS) with the columns below (float32 for a drawn array, float64 for a
nominal element). A pulse moves an element's weight w by +dw_min q_plus(w) (up) or -dw_min q_minus(w)
(down), plus cycle-to-cycle noise, then clips it to the element's bounds ([R1] Wu et al., NeurIPS 2025,
arXiv:2502.06309, eq. 2; aihwkit 1.1.0's pulsed devices: one update per coincidence, then clipping).
`element_step` is the mean change of one pulse as a magnitude in weight units; the sign of a pulse is
given separately.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

# response family codes
CONST, LINEAR, POWER, EXP_R1, EXP_STEP, TABLE, SOFT_REF = 0, 1, 2, 3, 4, 5, 6
# columns of the element parameter array `ep`
DW_UP, DW_DOWN, W_MAX, W_MIN, GAMMA_UP, GAMMA_DOWN = 0, 1, 2, 3, 4, 5
N_ELEMENT_PARAMS = 6
# the same columns as unsigned offsets: unsigned indices carry no negative-index wraparound code
U_DW_UP, U_W_MAX, U_W_MIN, U_GAMMA_UP = (np.uint64(c) for c in (DW_UP, W_MAX, W_MIN, GAMMA_UP))


@njit(cache=True, inline="always")
def _interp(t: float, grid: np.ndarray, table: np.ndarray) -> float:
    """Linear interpolation of `table` over increasing `grid`, constant beyond its ends."""
    n = grid.shape[0]
    if t <= grid[0]:
        return table[0]
    if t >= grid[n - 1]:
        return table[n - 1]
    k = np.searchsorted(grid, t) - 1
    f = (t - grid[k]) / (grid[k + 1] - grid[k])
    return table[k] + f * (table[k + 1] - table[k])


@njit(cache=True, inline="always")
def element_step(code, up, w, er, j, consts, grid, tab_up, tab_dn, F=np.float64):
    """Mean magnitude of one pulse's change of element j of a row at weight w (>= 0); er = ep[i], the
    row's element parameters. F: the float type of the arithmetic, float64 for analysis (mean steps,
    symmetric points), float32 for the pulses of a mini-batch update (as aihwkit, whose tiles compute in
    float32; see devices.pulses.noisy_pulse).

    The direction selects columns by offset (k = 0 up, 1 down: DW_UP + k, GAMMA_UP + k, W_MAX + k) and
    signs by arithmetic, not by branches: in a pulsed update the direction follows the sign of x and d,
    a coin flip per pulse, and a mispredicted branch per pulse doubled its cost (22 ns against 12 ns per
    pulse on one thread, docs/performance.md)."""
    k = uint64(1 - int(up))
    j = uint64(j)  # unsigned indices: no negative-index wraparound code (a 20% slower pulse without)
    w = F(w)
    one = F(1.0)
    zero = F(0.0)
    dw = F(er[j, U_DW_UP + k])
    if code == CONST:
        return dw
    if code == LINEAR:
        return max(dw * (one - F(er[j, U_GAMMA_UP + k]) * w), zero)
    bmax = F(er[j, U_W_MAX])
    bmin = F(er[j, U_W_MIN])
    span = bmax - bmin
    if span <= zero:
        return zero
    sg = one - F(2.0) * F(k)
    if code == EXP_STEP:  # exponentials in float64 whatever F: float32's overflow at e^88 would give 0 * inf
        z = 2.0 * consts[2] * float(w) / float(span) + consts[3]
        return dw * F(max(1.0 - consts[k] * np.exp(float(sg) * float(er[j, U_GAMMA_UP + k]) * z), 0.0))
    if code == TABLE:
        t = (w - bmin) / span
        return dw * max(F(_interp(t, grid, tab_up if up else tab_dn)), zero)
    # POWER, EXP_R1 and SOFT_REF: distance to the bound the pulse moves toward (W_MAX up, W_MIN down)
    dist = max(sg * (F(er[j, U_W_MAX + k]) - w), zero)
    g = F(er[j, U_GAMMA_UP + k])
    if code == SOFT_REF:  # soft bounds in shifted coordinates: GAMMA holds 1 / |bound| (reference_families)
        return dw * dist * g
    v = dist * F(consts[0]) / span  # in units of span / consts[0]
    if code == POWER:
        if g == one:
            return dw * v
        if g == F(2.0):
            return dw * v * v
        if g == F(0.5):
            return dw * np.sqrt(v)
        return dw * v**g  # pow is the slow path: the exponents of R1's devices above skip it
    if g < F(1e-9):
        return dw * v
    # float64 whatever F, as EXP_STEP (float() keeps a float32 float32 in Numba); the denominator is
    # consts[1 + k] where all elements share g (paper_families.Exponential), NaN where they do not
    g64 = np.float64(g)
    denom = consts[uint64(1) + k]
    if denom != denom:
        denom = np.expm1(g64)
    return dw * F(np.expm1(g64 * np.float64(v)) / denom)


@njit(cache=True)
def expm1(x: float) -> float:
    """exp(x) - 1 as the kernels compute it (the C library's, where numpy may use a SIMD one that differs
    in the last bit): for constants that stand in for a kernel's own evaluation."""
    return np.expm1(x)
