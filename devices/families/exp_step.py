"""aihwkit 1.1.0's exponential step: dw max(1 - A exp(+-gamma z), 0), z = 2 a w / (b_max - b_min) + b, A and gamma
those of the pulse's direction (+ up, - down).

Config: aihwkit 1.1.0's ExpStep.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numba import njit
from pydantic import Field

from aimc.devices.device_base import EXP_STEP, GAMMA_DOWN, GAMMA_UP, U_DW_UP, U_GAMMA_UP, U_W_MAX, U_W_MIN, W_MAX, W_MIN
from aimc.devices.families.fitting import Family
from aimc.devices.families.pulsed import AIHW_FIXED, AIHW_SPREAD, PulsedDevice, aihw_box, aihw_start

CODE = EXP_STEP


class ExpStep(PulsedDevice):
    """aihwkit ExpStep: up + max(1 - A_up exp(gamma_up z), 0) dw_up, down - max(1 - A_down exp(-gamma_down z), 0)
    dw_down, with z = 2 a w / (b_max - b_min) + b. Defaults are aihwkit 1.1.0's.

    Cycle noise: a step s at weight w becomes s + dw_min_std (s + dw_min_std_add + dw_min_std_slope |w|) xi,
    w the weight before the pulse (aihwkit 1.1.0's ExpStep update with its "complex noise"; with add and slope
    0 the usual s (1 + dw_min_std xi)). The expected update's noise leaves add and slope out.
    """

    kind: Literal["ExpStep"] = "ExpStep"
    A_up: float = Field(0.00081, description="amplitude of the up non-linearity")
    A_down: float = Field(0.36833, description="amplitude of the down non-linearity")
    gamma_up: float = Field(12.44625, description="exponent of the up non-linearity")
    gamma_down: float = Field(12.78785, description="exponent of the down non-linearity")
    a: float = Field(0.244, description="slope of z in w")
    b: float = Field(0.2425, description="offset of z")
    dw_min_std_add: float = Field(
        0.0, description="cycle noise: added to the step before scaling by dw_min_std (weight units)"
    )
    dw_min_std_slope: float = Field(
        0.0, description="cycle noise: times |w| added to the step before scaling by dw_min_std"
    )

    @property
    def granularity(self) -> float:
        """The nominal down step at w = 0, (1 - max(up_down, 0)) dw_min max(1 - A_down e^(-gamma_down b), 0),
        or dw_min where that is 0 (aihwkit 1.1.0, rpu_expstep_device.h: its granularity takes the down step
        at zero only)."""
        shape = max(1.0 - self.A_down * np.exp(-self.gamma_down * self.b), 0.0)
        down = (1.0 - max(self.up_down, 0.0)) * self.dw_min * shape
        return float(down) if down > 0 else float(self.dw_min)

    def _code(self) -> int:
        return CODE

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[:4] = (self.A_up, self.A_down, self.a, self.b)
        if self.dw_min_std_add != 0.0 or self.dw_min_std_slope != 0.0:  # consts[6] > 0: pulses add the spread
            out[4:7] = (self.dw_min_std_add, self.dw_min_std_slope, 1.0)
        return out

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        ep[..., GAMMA_UP] = self.gamma_up
        ep[..., GAMMA_DOWN] = self.gamma_down


@njit(cache=True, inline="always")
def step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F):
    """Mean step magnitude dw max(1 - A exp(+-gamma z), 0) of element j of the row er, A = consts[k] and dw,
    gamma of direction k (0 up, 1 down), z = 2 consts[2] w / (b_max - b_min) + consts[3]; 0 where
    b_max <= b_min (as `response_step.element_step`, which gives k and j as unsigned offsets and w in the float
    type F). The exponential in float64 whatever F: float32's overflow at e^88 would give 0 * inf."""
    one = F(1.0)
    zero = F(0.0)
    dw = F(er[j, U_DW_UP + k])
    span = F(er[j, U_W_MAX]) - F(er[j, U_W_MIN])
    if span <= zero:
        return zero
    sg = one - F(2.0) * F(k)
    z = 2.0 * consts[2] * float(w) / float(span) + consts[3]
    return dw * F(max(1.0 - consts[k] * math.exp(float(sg) * float(er[j, U_GAMMA_UP + k]) * z), 0.0))


@njit(cache=True, inline="always")
def step_derivative(up, w, er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn):
    """(s, ds/dw) of the nominal element er (shape (1, 6)) at w, in float64, adding ds/dp into row i of g
    (p: the 6 element columns, then consts from offset c0, tab_up from t_up, tab_dn from t_dn); 0 where the
    step is clipped at 0."""
    k = 0 if up else 1
    dw = er[0, k]
    span = er[0, W_MAX] - er[0, W_MIN]
    if span <= 0.0:
        return 0.0, 0.0
    sg = 1.0 - 2.0 * k
    a, gam, amp = consts[2], er[0, GAMMA_UP + k], consts[k]
    z = 2.0 * a * w / span + consts[3]
    e = np.exp(sg * gam * z)
    q = 1.0 - amp * e
    if q <= 0.0:
        return 0.0, 0.0
    dz = -dw * amp * e * sg * gam  # ds/dz
    g[i, k] += q
    g[i, c0 + k] -= dw * e
    g[i, GAMMA_UP + k] -= dw * amp * e * sg * z
    g[i, W_MAX] -= dz * 2.0 * a * w / (span * span)
    g[i, W_MIN] += dz * 2.0 * a * w / (span * span)
    g[i, c0 + 2] += dz * 2.0 * w / span
    g[i, c0 + 3] += dz
    return dw * q, dz * 2.0 * a / span


def fit_families(n_nodes: int, dw0: float) -> list[Family]:
    """The fits of this module's configs (n_nodes, dw0: PiecewiseStep's, unused here): ExpStep with a = 0.5,
    b = 0 (any other a != 0, b gives the same responses: aimc.calibration.families.expstep_canonical)."""
    return [
        Family(
            "ExpStep",
            ExpStep,
            ("dw_min", "up_down", "w_max", "w_min", "A_up", "A_down", "gamma_up", "gamma_down"),
            lambda d: aihw_box(d, (-50.0, -50.0, -40.0, -40.0), (50.0, 50.0, 40.0, 40.0)),  # aihwkit PCM: A_up -27
            lambda d: [aihw_start(d, d.dw0 / (1 - a)) + [a, a, g, g] for a, g in ((0.1, 4.0), (-0.1, -4.0))],
            {**AIHW_FIXED, "a": 0.5, "b": 0.0},
            AIHW_SPREAD,
        )
    ]
