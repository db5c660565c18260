"""The power step: a step that is a power of the distance to the bound the pulse moves toward,
dw (dist * consts[0] / (b_max - b_min))^gamma, gamma and dw those of the pulse's direction.

Configs: R1's `power` (consts[0] = 2: distances in units of tau), aihwkit 1.1.0's PowStep (consts[0] = 1:
distances in units of b_max - b_min) and its PowStepReference (the PowStep element read against a reference).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numba import njit
from pydantic import Field

from aimc.devices.device_base import (
    DW_DOWN,
    DW_UP,
    GAMMA_DOWN,
    GAMMA_UP,
    POWER,
    U_GAMMA_UP,
    W_MAX,
    W_MIN,
)
from aimc.devices.families.fitting import Family, MeasuredRange, by_field, span
from aimc.devices.families.paper import UpDownGamma, add_distance_terms, gamma_families, scaled_distance, step_distance
from aimc.devices.families.pulsed import AIHW_FIXED, AIHW_SPREAD, PulsedDevice, aihw_box, aihw_start
from aimc.devices.families.reference import Reference

CODE = POWER


class Power(UpDownGamma):
    """Power response: q_plus = (1 + c)(1 - w/tau)^gamma, q_minus = (1 - c)(1 + w/tau)^gamma_down
    (R1 Table 1 with gamma_down = gamma)."""

    kind: Literal["power"] = "power"
    gamma: float = Field(1.0, gt=0, description="exponent of the response (R1 uses 0.5 to 4)")
    gamma_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of gamma")
    gamma_down: float | None = Field(None, gt=0, description="exponent of q_minus (depression); None: gamma")
    gamma_down_dtod: float | None = Field(
        None,
        ge=0,
        description="device-to-device relative std of gamma_down, drawn apart from gamma's; None: gamma_dtod",
    )

    def _code(self) -> int:
        return CODE

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 2.0  # distances to the bound measured in units of tau = span / 2
        return out

    def symmetric_point(self) -> float:
        if self.gamma_minus != self.gamma:  # no closed form: bisection of q_plus - q_minus
            return super().symmetric_point()
        # (1 + c)(1 - u)^g = (1 - c)(1 + u)^g  =>  u = (r - 1) / (r + 1),  r = ((1 + c) / (1 - c))^(1/g)
        r = ((1.0 + self.c) / (1.0 - self.c)) ** (1.0 / self.gamma)
        return self.tau * (r - 1.0) / (r + 1.0)


class PowStep(PulsedDevice):
    """aihwkit PowStep: up + dw_up ((b_max - w)/r)^gamma_up, down - dw_down ((w - b_min)/r)^gamma_down,
    r = b_max - b_min.

    The exponents split one-sidedly, as dw_up / dw_down do (aihwkit 1.1.0's binary; its docstring's
    gamma (1 +- split) is not what it computes): with g = 1 + pow_gamma_dtod xi (additive gain) and
    s = pow_up_down_dtod xi, gamma_up = pow_gamma (min(pow_up_down, 0) + g + s) and
    gamma_down = pow_gamma (-max(pow_up_down, 0) + g - s), magnitudes with enforce_consistency.
    """

    kind: Literal["PowStep"] = "PowStep"
    pow_gamma: float = Field(1.0, gt=0, description="exponent of the response")
    pow_gamma_dtod: float = Field(0.1, ge=0, description="device-to-device std of the exponent (relative)")
    pow_up_down: float = Field(
        0.0,
        gt=-1,
        lt=1,
        description="lowers one exponent by pow_gamma |pow_up_down|: > 0 the down exponent, < 0 the up exponent",
    )
    pow_up_down_dtod: float = Field(0.0, ge=0, description="device-to-device std of the exponent split")

    @property
    def granularity(self) -> float:
        """dw_min 0.5^pow_gamma: the mean step at the midpoint of the bounds (aihwkit 1.1.0,
        rpu_powstep_device.h), so a desired change of lr |x| |d| fires the pulses that move a midpoint
        element by that much."""
        return float(self.dw_min * 0.5**self.pow_gamma)

    def _code(self) -> int:
        return CODE

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 1.0  # distances to the bound in units of r = b_max - b_min
        return out

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = 1.0 + self.pow_gamma_dtod * z()
        split = self.pow_up_down_dtod * z()
        g_up = self.pow_gamma * (min(self.pow_up_down, 0.0) + gain + split)
        g_dn = self.pow_gamma * (-max(self.pow_up_down, 0.0) + gain - split)
        if self.enforce_consistency:
            g_up, g_dn = np.abs(g_up), np.abs(g_dn)
        ep[..., GAMMA_UP] = np.maximum(g_up, 0.0)
        ep[..., GAMMA_DOWN] = np.maximum(g_dn, 0.0)


@njit(cache=True)
def pow_symmetric_points(su, sd, bu, bd, gu, gd, n_steps):
    """aihwkit 1.1.0's PowStepReference estimate of each element's symmetric point, in float32 as there:
    from sp = 0, n times sp += -sd ((sp - bd)/r)^gd + su ((bu - sp)/r)^gu, r = bu - bd; n = n_steps where
    > 0, else min(round(10 r / min(|sd|, |su|)), 10000). Arrays (out, in) of the drawn steps, bounds and
    exponents; returns float64 (out, in)."""
    out = np.zeros(su.shape)
    for i in range(su.shape[0]):
        for j in range(su.shape[1]):
            u, d = np.float32(su[i, j]), np.float32(sd[i, j])
            hi, lo = np.float32(bu[i, j]), np.float32(bd[i, j])
            g_up, g_dn = np.float32(gu[i, j]), np.float32(gd[i, j])
            r = hi - lo
            n = n_steps
            if n <= 0:
                smallest = min(abs(d), abs(u))
                n = 10000 if smallest == 0 else min(int(np.floor(np.float32(10.0) * (r / smallest) + 0.5)), 10000)
            sp = np.float32(0.0)
            for _ in range(n):
                sp += -d * ((sp - lo) / r) ** g_dn + u * ((hi - sp) / r) ** g_up
            out[i, j] = sp
    return out


class PowStepReference(Reference, PowStep):
    """aihwkit PowStepReference: the PowStep rule on g = w + ref (up + dw_up ((b_max - g)/r)^gamma_up, down
    - dw_down ((g - b_min)/r)^gamma_down, r = b_max - b_min), g clipped to [b_min, b_max]; the symmetric point
    is the fixed-point estimate of pow_symmetric_points. No write noise (aihwkit 1.1.0 refuses it)."""

    kind: Literal["PowStepReference"] = "PowStepReference"
    n_estimation_steps: int = Field(
        -1, description="fixed-point steps of the symmetric-point estimate; <= 0: min(round(10 r / min step), 10000)"
    )
    write_noise_std: Literal[0.0] = Field(0.0, description="fixed at 0: aihwkit's PowStepReference has no write noise")

    def _symmetric_points(self, ep) -> np.ndarray:
        cols = [
            np.ascontiguousarray(np.broadcast_to(ep[..., c], ep.shape[:-1]))
            for c in (DW_UP, DW_DOWN, W_MAX, W_MIN, GAMMA_UP, GAMMA_DOWN)
        ]
        return pow_symmetric_points(*cols, int(self.n_estimation_steps))


@njit(cache=True, inline="always")
def step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F):
    """Mean step magnitude dw v^gamma of element j of the row er, v = dist consts[0] / (b_max - b_min), dist
    the distance (>= 0) to the bound of direction k (0 up: b_max, 1 down: b_min); 0 where b_max <= b_min (as
    `response_step.element_step`, which gives k and j as unsigned offsets and w in the float type F)."""
    one = F(1.0)
    zero = F(0.0)
    dw, span, dist = step_distance(k, w, er, j, F)
    if span <= zero:
        return zero
    g = F(er[j, U_GAMMA_UP + k])
    v = dist * F(consts[0]) / span  # in units of span / consts[0]
    if g == one:
        return dw * v
    if g == F(2.0):
        return dw * v * v
    if g == F(0.5):
        return dw * math.sqrt(v)
    return dw * v**g  # pow is the slow path: the exponents of R1's devices above skip it


@njit(cache=True, inline="always")
def step_derivative(up, w, er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn):
    """(s, ds/dw) of the nominal element er (shape (1, 6)) at w, in float64, adding ds/dp into row i of g
    (p: the 6 element columns, then consts from offset c0, tab_up from t_up, tab_dn from t_dn); 0 at or
    beyond the bound."""
    k, dw, span, sg, dist, v = scaled_distance(up, w, er, consts)
    if dist <= 0.0:
        return 0.0, 0.0
    gam = er[0, GAMMA_UP + k]
    pv = v**gam
    s = dw * pv
    dv = gam * s / v  # dw gam v^(gam - 1), v > 0 here
    g[i, k] += pv
    g[i, GAMMA_UP + k] += s * np.log(v)
    return s, add_distance_terms(g, i, c0, k, sg, dist, span, v, dv, consts)


def _wide_start(d: MeasuredRange) -> list[float]:
    """A PowStep start for traces that stop short of the bounds (a steep power law approaches them slowly):
    bounds half the measured range beyond the reads, exponent 2 (at mid range ((b_max - w) / r)^2 = 1/4, so
    dw_min = 4 dw0)."""
    s = span(d)
    return [4.0 * d.dw0, 0.0, d.hi + 0.5 * s, d.lo - 0.5 * s, 2.0, 0.0]


def fit_families(n_nodes: int, dw0: float) -> list[Family]:
    """The fits of this module's configs (n_nodes, dw0: PiecewiseStep's, unused here): power with one exponent
    and with gamma_down (power_ud), PowStep; PowStepReference is fitted as PowStep."""
    return [
        *gamma_families("power", Power),
        Family(
            "PowStep",
            PowStep,
            ("dw_min", "up_down", "w_max", "w_min", "pow_gamma", "pow_up_down"),
            lambda d: aihw_box(d, (0.05, -0.99), (10.0, 0.99)),
            lambda d: [aihw_start(d, d.dw0 / 0.5**g) + [g, 0.0] for g in (0.5, 1.0, 2.0)] + [_wide_start(d)],
            {**AIHW_FIXED, "pow_gamma_dtod": 0.0, "pow_up_down_dtod": 0.0},
            {
                **AIHW_SPREAD,
                "pow_gamma_dtod": (by_field("pow_gamma"), "rel"),
                "pow_up_down_dtod": (by_field("pow_up_down"), "abs"),
            },
        ),
    ]
