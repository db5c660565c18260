"""Numba kernels of the increment model (`pulse_data`): the nominal element's mean steps at many weights, each
of its own polarity, in one serial call. A fit evaluates the model tens of thousands of times on a few
thousand increments each (one device), where the device layer's per-call set-up of `q_plus` and `q_minus`
(one nominal element and one parallel kernel launch per polarity) cost more than the steps themselves.

The arithmetic is that of `DeviceBase.q_plus` / `q_minus` times dw_min (the same `element_step`, rounded as
step / dw_min * dw_min), so the model's values are bit for bit those of the device layer's. The analytic
Jacobian takes each family's derivative of its step (`step_derivative` of its module in aimc.devices.families,
dispatched on the family code by `element_step_derivatives`)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from aimc.devices import DeviceConfig
from aimc.devices.response_step import (
    CONST,
    EXP_R1,
    EXP_STEP,
    LINEAR,
    POWER,
    SOFT_REF,
    TABLE,
    element_step,
    element_step_derivatives,
)


def element_args(device: DeviceConfig) -> tuple:
    """The nominal element of `device` as the kernels below take it: (er, code, consts, grid, tab_up, tab_dn,
    dw_min), er the element's parameter row (shape (1, 6), float64)."""
    p = device.nominal()
    return (np.ascontiguousarray(p.ep[0]), p.code, p.consts, p.grid, p.tab_up, p.tab_dn, float(device.dw_min))


@njit(cache=True, inline="always")
def _fill_steps(code, out, w, up, er, consts, grid, tab_up, tab_dn, dw_min):
    """out[i] = the mean step magnitude at w[i] (`mean_steps_kernel`), for a family code that is a constant where
    this is inlined: the dispatch in `element_step` then folds away and the loop holds one family's step."""
    for i in range(len(w)):
        out[i] = element_step(code, up[i], w[i], er, 0, consts, grid, tab_up, tab_dn) / dw_min * dw_min


@njit(cache=True, nogil=True)
def mean_steps_kernel(w, up, er, code, consts, grid, tab_up, tab_dn, dw_min):
    """Mean step magnitude (weight units) of the element at each weight w[i], up where up[i], else down.
    One loop per family: with the code a variable inside the loop, the branches of the other families kept it
    from vectorising (9000 SoftBounds steps: 0.62 ms against 0.05 ms; ExpStep 0.89 against 0.22 ms;
    docs/performance.md)."""
    out = np.empty(len(w))
    if code == CONST:
        _fill_steps(CONST, out, w, up, er, consts, grid, tab_up, tab_dn, dw_min)
    elif code == LINEAR:
        _fill_steps(LINEAR, out, w, up, er, consts, grid, tab_up, tab_dn, dw_min)
    elif code == EXP_STEP:
        _fill_steps(EXP_STEP, out, w, up, er, consts, grid, tab_up, tab_dn, dw_min)
    elif code == TABLE:
        _fill_steps(TABLE, out, w, up, er, consts, grid, tab_up, tab_dn, dw_min)
    elif code == SOFT_REF:
        _fill_steps(SOFT_REF, out, w, up, er, consts, grid, tab_up, tab_dn, dw_min)
    elif code == POWER:
        _fill_steps(POWER, out, w, up, er, consts, grid, tab_up, tab_dn, dw_min)
    else:
        _fill_steps(EXP_R1, out, w, up, er, consts, grid, tab_up, tab_dn, dw_min)
    return out


@njit(cache=True, inline="always")
def _start(x, up, s, anchor):
    """Where a pulse of mean step magnitude s seen from its anchor x (the point at fraction `anchor` of the
    increment, `pulse_data.PulseData.x`) started: x -+ anchor s (up / down)."""
    return x - (anchor if up else -anchor) * s


@njit(cache=True, inline="always")
def _room(x, up, lo, hi, anchor):
    """The largest increment a pulse seen from its anchor x can make before its bound: (w_max - x)^+ / (1 -
    anchor) up, (x - w_min)^+ / (1 - anchor) down (2 (w_max - x)^+ from the midpoint)."""
    return max(hi - x if up else x - lo, 0.0) / (1.0 - anchor)


@njit(cache=True, nogil=True)
def single_pulse_kernel(x, up, er, code, consts, grid, tab_up, tab_dn, dw_min, lo, hi, anchor):
    """(start, s, increment) of single pulses seen from their anchors x: the start x -+ anchor s(x), the mean
    step magnitude s there, and the clipped mean increment +-min(s, (w_max - x)^+ / (1 - anchor)) (up; down
    mirrored to w_min), bounds (lo, hi) = (w_min, w_max). The steps are two calls of `mean_steps_kernel`: with
    `element_step` inlined twice into one loop the loop ran 20-50 times slower (measured: 0.7 ms against 0.03 ms
    for 9000 LinearStep increments)."""
    n = len(x)
    s0 = mean_steps_kernel(x, up, er, code, consts, grid, tab_up, tab_dn, dw_min)
    start = np.empty(n)
    for i in range(n):
        start[i] = _start(x[i], up[i], s0[i], anchor)
    step = mean_steps_kernel(start, up, er, code, consts, grid, tab_up, tab_dn, dw_min)
    inc = np.empty(n)
    for i in range(n):
        mag = min(step[i], _room(x[i], up[i], lo, hi, anchor))
        inc[i] = mag if up[i] else -mag
    return start, step, inc


@njit(cache=True, inline="always")
def _censored_slopes(mu, sd, behind, ahead):
    """(dM/dmu, dM/dsd, dM/dahead, dM/dbehind) of M = E[clip(X, -behind, ahead)], X ~ N(mu, sd^2), sd > 0
    (`censored`): the probability inside, phi(alpha) - phi(beta), the probability above and minus the
    probability below, alpha = (-behind - mu) / sd, beta = (ahead - mu) / sd."""
    alpha, beta = (-behind - mu) / sd, (ahead - mu) / sd
    below, above = 0.5 * math.erfc(-alpha / _SQRT2), 0.5 * math.erfc(beta / _SQRT2)
    dens = _INV_SQRT_2PI * (math.exp(-0.5 * alpha * alpha) - math.exp(-0.5 * beta * beta))
    return 1.0 - above - below, dens, above, -below


@njit(cache=True, nogil=True)
def single_pulse_grad_kernel(x, up, er, code, consts, grid, tab_up, tab_dn, lo, hi, anchor, sigma, additive, g0, out):
    """d increment / d p of `single_pulse_kernel`'s increments into out, shape (n, P + 2): p as in
    `element_step_derivatives` (the element columns, consts, tab_up, tab_dn), then the bounds lo, hi that clip the
    step (the start x -+ anchor s(x) moves with p: chain rule); g0 (n, P): work space. Both are the caller's,
    reused from call to call (`single_pulse_jacobian`). sigma > 0: the increment is the censored mean of the noisy
    step (`pulse_data.predict`), its std sigma s (multiplicative) or sigma times the element's dw_up / dw_down
    (additive)."""
    n, n_p = len(x), 6 + len(consts) + 2 * len(tab_up)
    g0[:] = 0.0
    out[:] = 0.0
    s0, _ = element_step_derivatives(x, up, er, code, consts, grid, tab_up, tab_dn, g0)
    start = np.empty(n)
    for i in range(n):
        start[i] = _start(x[i], up[i], s0[i], anchor)
    s, ds_dw = element_step_derivatives(start, up, er, code, consts, grid, tab_up, tab_dn, out)
    inv = 1.0 / (1.0 - anchor)
    for i in range(n):
        room = _room(x[i], up[i], lo, hi, anchor)
        sign = 1.0 if up[i] else -1.0
        c = (anchor if up[i] else -anchor) * ds_dw[i]
        k = 0 if up[i] else 1
        sd = sigma * (er[0, k] if additive else s[i])
        if sd > 0.0:  # the censored mean: through the step, its std and the room on either side
            behind = _room(x[i], not up[i], lo, hi, anchor)
            d_mu, d_sd, d_ahead, d_behind = _censored_slopes(s[i], sd, behind, room)
            via_s = d_mu if additive else d_mu + sigma * d_sd
            for j in range(n_p):
                out[i, j] = sign * via_s * (out[i, j] - c * g0[i, j])
            if additive:
                out[i, k] += sign * sigma * d_sd
            # the room toward w_max is ahead of an up pulse and behind a down pulse; w_min's the other way round
            d_hi = (d_ahead if up[i] else d_behind) if hi > x[i] else 0.0
            d_lo = -(d_behind if up[i] else d_ahead) if x[i] > lo else 0.0
            out[i, n_p] = sign * inv * d_lo
            out[i, n_p + 1] = sign * inv * d_hi
        elif room < s[i]:  # clipped: the increment is the room to the bound
            for j in range(n_p):
                out[i, j] = 0.0
            if room > 0.0:  # up: (w_max - x) / (1 - anchor); down: -(x - w_min) / (1 - anchor)
                out[i, n_p + 1 if up[i] else n_p] = inv
        else:
            for j in range(n_p):
                out[i, j] = sign * (out[i, j] - c * g0[i, j])


_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _element_vector(device: DeviceConfig) -> np.ndarray:
    """p of `single_pulse_grad_kernel` for `device`: element columns, consts, tables, then w_min, w_max."""
    p = device.nominal()
    out = np.concatenate([p.ep[0, 0], p.consts, p.tab_up, p.tab_dn, device.bounds])
    out[out != out] = 0.0  # a NaN constant (Exponential's per-element denominator) is not used by the kernels
    return out


def single_pulse_jacobian(
    config, theta: np.ndarray, h: np.ndarray, x: np.ndarray, up: np.ndarray, anchor: float, work: dict | None = None
) -> np.ndarray:
    """d increment / d theta (n, len(theta)) of single pulses, config(theta) the device (with cycle noise: the
    censored mean, `noise_form`): the element's analytic derivatives (`single_pulse_grad_kernel`) times d p /
    d theta, the latter by forward differences of the nominal element with steps h (no data involved: some 50
    microseconds per parameter).
    work: a dict that keeps the kernel's work arrays from call to call (one per fit): allocated anew for every
    call, arrays of a few MB came from fresh pages of the system each time under some allocator states (30%
    slower per-device fits, the same evaluations; measured 8.2 s against 5.7 s for the EcRAM ExpStep fits)."""
    device = config(theta)
    p0 = _element_vector(device)
    dp = np.empty((len(p0), len(theta)))
    for j in range(len(theta)):
        step = np.zeros(len(theta))
        step[j] = h[j]
        dp[:, j] = (_element_vector(config(theta + step)) - p0) / h[j]
    er, code, consts, grid, tab_up, tab_dn, _ = element_args(device)
    work = {} if work is None else work
    if work.get("shape") != (len(x), len(p0)):
        work.update(shape=(len(x), len(p0)), g0=np.empty((len(x), len(p0) - 2)), grad=np.empty((len(x), len(p0))))
    lo, hi = device.bounds
    single_pulse_grad_kernel(
        x,
        up,
        er,
        code,
        consts,
        grid,
        tab_up,
        tab_dn,
        float(lo),
        float(hi),
        float(anchor),
        float(device.dw_min_std),
        noise_form(device) == "additive",
        work["g0"],
        work["grad"],
    )
    return work["grad"] @ dp


def noise_form(device: DeviceConfig) -> str | None:
    """How the increment model's cycle noise scales (`pulse_data.step_sd`): None without noise, "additive" (sigma
    times the element's dw_up / dw_down), "multiplicative" (sigma times the mean step), or "other" (ExpStep's
    dw_min_std_add / dw_min_std_slope terms, which the analytic Jacobian leaves to finite differences)."""
    if device.dw_min_std == 0:
        return None
    if getattr(device, "noise", "") == "additive" or getattr(device, "mult_noise", True) is False:
        return "additive"
    if getattr(device, "dw_min_std_add", 0.0) or getattr(device, "dw_min_std_slope", 0.0):
        return "other"
    return "multiplicative"
