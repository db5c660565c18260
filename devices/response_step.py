"""The mean step of one pulse and its derivative, for every response family: a dispatch on the family `code` to
the step of its family module (devices.families).

An array's elements share one response family (`code`) and carry their own drawn parameters in `ep`, an
array of shape (out, in, N_ELEMENT_PARAMS) with the columns of devices.device_base (float32 for a drawn array,
float64 for a nominal element), which this module names again for the kernels. A pulse moves an element's
weight w by +dw_min q_plus(w) (up) or -dw_min q_minus(w) (down), plus cycle-to-cycle noise, then clips it to
the element's bounds ([R1] Wu et al., NeurIPS 2025, arXiv:2502.06309, eq. 2; aihwkit 1.1.0's pulsed devices:
one update per coincidence, then clipping). `element_step` is the mean change of one pulse as a magnitude in
weight units; the sign of a pulse is given separately.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from aimc.devices.device_base import (
    CONST,
    DW_DOWN,
    DW_UP,
    EXP_R1,
    EXP_STEP,
    GAMMA_DOWN,
    GAMMA_UP,
    LINEAR,
    N_ELEMENT_PARAMS,
    POWER,
    SOFT_REF,
    TABLE,
    U_DW_UP,
    U_GAMMA_UP,
    U_W_MAX,
    U_W_MIN,
    W_MAX,
    W_MIN,
)
from aimc.devices.families import constant, exp_step, exponential, linear, power, soft_bounds_reference, table

__all__ = [
    "CONST",
    "DW_DOWN",
    "DW_UP",
    "EXP_R1",
    "EXP_STEP",
    "GAMMA_DOWN",
    "GAMMA_UP",
    "LINEAR",
    "N_ELEMENT_PARAMS",
    "POWER",
    "SOFT_REF",
    "TABLE",
    "U_DW_UP",
    "U_GAMMA_UP",
    "U_W_MAX",
    "U_W_MIN",
    "W_MAX",
    "W_MIN",
    "element_step",
    "element_step_derivatives",
]


@njit(cache=True, inline="always")
def element_step(code, up, w, er, j, consts, grid, tab_up, tab_dn, F=np.float64):
    """Mean magnitude of one pulse's change of element j of a row at weight w (>= 0); er = ep[i], the
    row's element parameters. F: the float type of the arithmetic, float64 for analysis (mean steps,
    symmetric points), float32 for the pulses of a mini-batch update (as aihwkit, whose tiles compute in
    float32; see devices.pulses.noisy_pulse).

    The direction selects columns by offset (k = 0 up, 1 down: DW_UP + k, GAMMA_UP + k, W_MAX + k) and
    signs by arithmetic, not by branches: in a pulsed update the direction follows the sign of x and d,
    a coin flip per pulse, and a mispredicted branch per pulse doubled its cost (22 ns against 12 ns per
    pulse on one thread, docs/performance.md). The family steps are inlined (inline="always"): the kernels
    that inline this function compile the same code as with the steps written out here."""
    k = uint64(1 - int(up))
    j = uint64(j)  # unsigned indices: no negative-index wraparound code (a 20% slower pulse without)
    w = F(w)
    if code == CONST:
        return constant.step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F)
    if code == LINEAR:
        return linear.step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F)
    if code == EXP_STEP:
        return exp_step.step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F)
    if code == TABLE:
        return table.step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F)
    if code == SOFT_REF:
        return soft_bounds_reference.step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F)
    if code == POWER:
        return power.step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F)
    return exponential.step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F)


@njit(cache=True, nogil=True)
def element_step_derivatives(w, up, er, code, consts, grid, tab_up, tab_dn, g):
    """(s, ds/dw): the nominal element's mean step magnitude s (float64, the value of `element_step`) and its
    slope at every weight w[i], up where up[i], else down, with ds/dp added into row i of g, p = (the
    N_ELEMENT_PARAMS element columns, consts, tab_up, tab_dn); er: the element's parameter row, shape (1, 6),
    float64. Where a max(., 0) clamps the step to 0, every derivative is 0.

    One loop per family, its step_derivative inlined: one loop with the code a variable, the branches of the
    other families made it 20 times slower (0.45 ms against 0.02 ms for 9000 LinearStep steps)."""
    n, nc, nt = len(w), len(consts), len(tab_up)
    c0, t_up, t_dn = N_ELEMENT_PARAMS, N_ELEMENT_PARAMS + nc, N_ELEMENT_PARAMS + nc + nt
    s, ds_dw = np.empty(n), np.empty(n)
    if code == CONST:
        for i in range(n):
            s[i], ds_dw[i] = constant.step_derivative(
                up[i], w[i], er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn
            )
    elif code == LINEAR:
        for i in range(n):
            s[i], ds_dw[i] = linear.step_derivative(up[i], w[i], er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn)
    elif code == EXP_STEP:
        for i in range(n):
            s[i], ds_dw[i] = exp_step.step_derivative(
                up[i], w[i], er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn
            )
    elif code == TABLE:
        for i in range(n):
            s[i], ds_dw[i] = table.step_derivative(up[i], w[i], er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn)
    elif code == POWER:
        for i in range(n):
            s[i], ds_dw[i] = power.step_derivative(up[i], w[i], er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn)
    elif code == EXP_R1:
        for i in range(n):
            s[i], ds_dw[i] = exponential.step_derivative(
                up[i], w[i], er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn
            )
    else:
        for i in range(n):
            s[i], ds_dw[i] = soft_bounds_reference.step_derivative(
                up[i], w[i], er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn
            )
    return s, ds_dw
