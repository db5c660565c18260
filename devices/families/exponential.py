"""R1's exponential step: dw expm1(gamma v) / expm1(gamma), v = dist / tau, dist the distance to the bound the
pulse moves toward, gamma and dw those of the pulse's direction ([R1] Wu et al., NeurIPS 2025,
arXiv:2502.06309, Table 1).

Config: R1's `exponential`.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numba import njit, uint64
from pydantic import Field

from aimc.devices.device_base import EXP_R1, GAMMA_DOWN, GAMMA_UP, U_GAMMA_UP
from aimc.devices.families.fitting import Family
from aimc.devices.families.paper import UpDownGamma, add_distance_terms, gamma_families, scaled_distance, step_distance

CODE = EXP_R1


@njit(cache=True)
def expm1(x: float) -> float:
    """exp(x) - 1 as the kernels compute it (the C library's, where numpy may use a SIMD one that differs
    in the last bit): for constants that stand in for a kernel's own evaluation."""
    return math.expm1(x)


class Exponential(UpDownGamma):
    """Exponential response: q_plus = (1 + c)(exp(g(1 - w/tau)) - 1)/(exp(g) - 1) with g = gamma, q_minus
    likewise with 1 + w/tau, (1 - c) and g = gamma_down (R1 Table 1 with gamma_down = gamma). Symmetric point
    0 for c = 0 and gamma_down = gamma, else found by bisection."""

    kind: Literal["exponential"] = "exponential"
    gamma: float = Field(
        1.0,
        gt=0,
        le=700,
        description="curvature g of the response (R1 uses 0.5 to 4; at most "
        "700: expm1(g) overflows float64 above 709.8)",
    )
    gamma_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of gamma")
    gamma_down: float | None = Field(
        None, gt=0, le=700, description="curvature of q_minus (depression), at most 700 as gamma; None: gamma"
    )
    gamma_down_dtod: float | None = Field(
        None,
        ge=0,
        description="device-to-device relative std of gamma_down, drawn apart from gamma's; None: gamma_dtod",
    )

    def _code(self) -> int:
        return CODE

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 2.0
        return out

    def _consts_of(self, ep: np.ndarray) -> np.ndarray:
        """consts[1 + k] = expm1(g) of direction k (0 up, 1 down) where all elements share g, else NaN: the
        mean step's denominator, which otherwise costs a second expm1 per step (an expected update of
        r1_exp_2 0.80-0.96 of the time with it, docs/performance.md)."""
        out = self._consts()
        for k, column in enumerate((GAMMA_UP, GAMMA_DOWN)):
            g = ep[..., column]
            shared = g.size > 0 and bool((g == g.flat[0]).all())
            out[1 + k] = expm1(float(g.flat[0])) if shared else np.nan
        return out


@njit(cache=True, inline="always")
def step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F):
    """Mean step magnitude dw expm1(g v) / expm1(g) of element j of the row er (dw v where g < 1e-9),
    v = dist consts[0] / (b_max - b_min), dist the distance (>= 0) to the bound of direction k (0 up: b_max,
    1 down: b_min); 0 where b_max <= b_min (as `response_step.element_step`, which gives k and j as unsigned
    offsets and w in the float type F). The exponentials in float64 whatever F (float() keeps a float32 float32
    in Numba); the denominator is consts[1 + k] where all elements share g (`Exponential._consts_of`), NaN where
    they do not."""
    zero = F(0.0)
    dw, span, dist = step_distance(k, w, er, j, F)
    if span <= zero:
        return zero
    g = F(er[j, U_GAMMA_UP + k])
    v = dist * F(consts[0]) / span  # in units of span / consts[0]
    if g < F(1e-9):
        return dw * v
    g64 = np.float64(g)
    denom = consts[uint64(1) + k]
    if denom != denom:
        denom = math.expm1(g64)
    return dw * F(math.expm1(g64 * np.float64(v)) / denom)


@njit(cache=True, inline="always")
def step_derivative(up, w, er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn):
    """(s, ds/dw) of the nominal element er (shape (1, 6)) at w, in float64, adding ds/dp into row i of g
    (p: the 6 element columns, then consts from offset c0, tab_up from t_up, tab_dn from t_dn); 0 at or
    beyond the bound."""
    k, dw, span, sg, dist, v = scaled_distance(up, w, er, consts)
    if dist <= 0.0:
        return 0.0, 0.0
    gam = er[0, GAMMA_UP + k]
    if gam < 1e-9:  # the linear limit
        s, dv = dw * v, dw
        g[i, k] += v
    else:
        denom = consts[1 + k]
        shared = denom == denom
        if not shared:
            denom = np.expm1(gam)
        em, ev = np.expm1(gam * v), np.exp(gam * v)
        s = dw * em / denom
        dv = dw * gam * ev / denom
        g[i, k] += em / denom
        g[i, GAMMA_UP + k] += dw * v * ev / denom
        if shared:
            g[i, c0 + 1 + k] -= s / denom
        else:
            g[i, GAMMA_UP + k] -= s * np.exp(gam) / denom
    return s, add_distance_terms(g, i, c0, k, sg, dist, span, v, dv, consts)


def fit_families(n_nodes: int, dw0: float) -> list[Family]:
    """The fits of this module's configs (n_nodes, dw0: PiecewiseStep's, unused here): exponential with one
    exponent and with gamma_down (exponential_ud)."""
    return gamma_families("exponential", Exponential)
