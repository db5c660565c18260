"""The linear step: a step that falls linearly with the weight, dw_up (1 - gamma_up w) up and
dw_down (1 - gamma_down w) down, clipped at zero (soft bounds where gamma is one over the bound).

Configs: R1's `linear`, aihwkit 1.1.0's LinearStep and SoftBounds (and its SoftBoundsPmaxDevice,
`soft_bounds_pmax`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numba import njit
from pydantic import Field

from aimc.devices.device_base import DW_DOWN, DW_UP, GAMMA_DOWN, GAMMA_UP, LINEAR, U_DW_UP, U_GAMMA_UP, W_MAX, W_MIN
from aimc.devices.families.fitting import Family, by_field
from aimc.devices.families.paper import PaperDevice, paper_family
from aimc.devices.families.pulsed import AIHW_FIXED, AIHW_SPREAD, PulsedDevice, aihw_box, aihw_start

CODE = LINEAR


class Linear(PaperDevice):
    """Linear response (soft bounds): q_plus = (1 + c)(1 - w/tau), q_minus = (1 - c)(1 + w/tau).

    Symmetric point c * tau; F = 1 - c w/tau, G = w/tau - c (R1 Table 1, c_Lin).
    """

    kind: Literal["linear"] = "linear"

    def _code(self) -> int:
        return CODE

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)
        ep[..., GAMMA_UP] = 1.0 / ep[..., W_MAX]
        ep[..., GAMMA_DOWN] = 1.0 / ep[..., W_MIN]

    def symmetric_point(self) -> float:
        return self.c * self.tau


class LinearStep(PulsedDevice):
    """aihwkit LinearStep: up + dw_up (1 - |gamma_up| w / w_ref_up), down - dw_down (1 - |gamma_down| w / w_ref_down).

    w_ref are the mean bounds (mean_bound_reference) or each element's own bounds; mult_noise False puts the
    noise on the constant part only (additive sigma * dw xi). Steps are clipped at zero.
    """

    kind: Literal["LinearStep"] = "LinearStep"
    gamma_up: float = Field(0.0, description="relative slope of the up step: 1 gives soft bounds")
    gamma_down: float = Field(0.0, description="relative slope of the down step")
    gamma_up_dtod: float = Field(0.05, ge=0, description="device-to-device std of gamma_up (relative)")
    gamma_down_dtod: float = Field(0.05, ge=0, description="device-to-device std of gamma_down (relative)")
    mean_bound_reference: bool = Field(True, description="slopes refer to the mean bounds, not each element's")
    mult_noise: bool = Field(True, description="multiplicative cycle noise (else on the constant part only)")

    def _code(self) -> int:
        return CODE

    def _additive(self) -> bool:
        return not self.mult_noise

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        g_up = np.abs(self.gamma_up * (1.0 + self.gamma_up_dtod * z()))
        g_dn = np.abs(self.gamma_down * (1.0 + self.gamma_down_dtod * z()))
        ref_up = self.w_max if self.mean_bound_reference else ep[..., W_MAX]
        ref_dn = self.w_min if self.mean_bound_reference else ep[..., W_MIN]
        ep[..., GAMMA_UP] = g_up / ref_up
        ep[..., GAMMA_DOWN] = g_dn / ref_dn


class SoftBounds(LinearStep):
    """aihwkit SoftBounds: up + dw_up (1 - w/b_max), down - dw_down (1 - w/b_min), each element's own bounds.

    Symmetric point (dw_up - dw_down) / (dw_up/b_max - dw_down/b_min), the closed form aihwkit 1.1.0 uses
    for SoftBoundsReference's subtract_symmetry_point.
    """

    kind: Literal["SoftBounds"] = "SoftBounds"
    gamma_up: Literal[1.0] = Field(1.0, description="fixed at 1 (soft bounds)")
    gamma_down: Literal[1.0] = Field(1.0, description="fixed at 1 (soft bounds)")
    gamma_up_dtod: Literal[0.0] = Field(0.0, description="fixed at 0")
    gamma_down_dtod: Literal[0.0] = Field(0.0, description="fixed at 0")
    mean_bound_reference: Literal[False] = Field(False, description="fixed: own bounds")

    def symmetric_point(self) -> float:
        p = self.nominal().ep[0, 0]
        up, dn, hi, lo = p[DW_UP], p[DW_DOWN], p[W_MAX], p[W_MIN]
        return float((up - dn) / (up / hi - dn / lo))


def soft_bounds_pmax(
    p_max: float = 1000.0, alpha: float = 0.0005, range_min: float = -1.0, range_max: float = 1.0, **fields
) -> SoftBounds:
    """aihwkit 1.1.0's SoftBoundsPmaxDevice, which its library turns into a SoftBounds device:
    B = (range_max - range_min) / (1 - exp(-p_max alpha)), w_min = range_min, w_max = range_min + B,
    dw_min = B alpha, up_down = 1 + 2 range_min / B (so dw_up = B alpha, dw_down = -2 alpha range_min).
    Its documented response B (1 - exp(-alpha p)) + range_min is not what that device does (docs/devices.md).
    `fields`: any other SoftBounds field (spreads, noise, effects)."""
    if not (p_max > 0 and alpha > 0 and range_max > range_min):
        raise ValueError("soft_bounds_pmax needs p_max > 0, alpha > 0 and range_max > range_min")
    span = (range_max - range_min) / (1.0 - np.exp(-p_max * alpha))
    return SoftBounds(
        w_min=range_min, w_max=range_min + span, dw_min=span * alpha, up_down=1.0 + 2.0 * range_min / span, **fields
    )


@njit(cache=True, inline="always")
def step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F):
    """Mean step magnitude dw max(1 - gamma w, 0) of element j of the row er, dw and gamma of direction k
    (0 up, 1 down) (as `response_step.element_step`, which gives k and j as unsigned offsets and w in the
    float type F); a negative dw (aihwkit without enforce_consistency) steps the wrong way."""
    dw = F(er[j, U_DW_UP + k])
    return dw * max(F(1.0) - F(er[j, U_GAMMA_UP + k]) * w, F(0.0))


@njit(cache=True, inline="always")
def step_derivative(up, w, er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn):
    """(s, ds/dw) of the nominal element er (shape (1, 6)) at w, in float64, adding ds/dp into row i of g
    (p: the 6 element columns, then consts from offset c0, tab_up from t_up, tab_dn from t_dn); 0 where the
    step is clipped at 0."""
    k = 0 if up else 1
    dw = er[0, k]
    gam = er[0, GAMMA_UP + k]
    q = 1.0 - gam * w
    if dw * q <= 0.0:
        return 0.0, 0.0
    g[i, k] += q
    g[i, GAMMA_UP + k] -= dw * w
    return dw * q, -dw * gam


def fit_families(n_nodes: int, dw0: float) -> list[Family]:
    """The fits of this module's configs (n_nodes, dw0: PiecewiseStep's, unused here)."""
    return [
        paper_family("linear", Linear),
        Family(
            "LinearStep",
            LinearStep,
            ("dw_min", "up_down", "w_max", "w_min", "gamma_up", "gamma_down"),
            lambda d: aihw_box(d, (0.0, 0.0), (10.0, 10.0)),
            lambda d: [aihw_start(d) + [g, g] for g in (0.3, 1.0)],
            {**AIHW_FIXED, "gamma_up_dtod": 0.0, "gamma_down_dtod": 0.0, "mean_bound_reference": True},
            {
                **AIHW_SPREAD,
                "gamma_up_dtod": (by_field("gamma_up"), "rel"),
                "gamma_down_dtod": (by_field("gamma_down"), "rel"),
            },
        ),
        Family(
            "SoftBounds",
            SoftBounds,
            ("dw_min", "up_down", "w_max", "w_min"),
            aihw_box,
            lambda d: [aihw_start(d)],
            AIHW_FIXED,
            AIHW_SPREAD,
        ),
    ]
