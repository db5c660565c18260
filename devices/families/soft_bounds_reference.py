"""aihwkit 1.1.0's soft bounds read against a reference: dw dist / |b|, dist the distance to the bound b the pulse
moves toward, in the shifted coordinates of a reference device (devices.families.reference): GAMMA_UP and
GAMMA_DOWN hold 1 / |b| of the unshifted bounds.

Config: aihwkit 1.1.0's SoftBoundsReference.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numba import njit
from pydantic import Field

from aimc.devices.device_base import (
    DW_DOWN,
    DW_UP,
    GAMMA_DOWN,
    GAMMA_UP,
    SOFT_REF,
    U_GAMMA_UP,
    W_MAX,
    W_MIN,
)
from aimc.devices.families.fitting import Family
from aimc.devices.families.paper import scaled_distance, step_distance
from aimc.devices.families.pulsed import PulsedDevice
from aimc.devices.families.reference import Reference

CODE = SOFT_REF


class SoftBoundsReference(Reference, PulsedDevice):
    """aihwkit SoftBoundsReference: soft bounds on g = w + ref, up g + dw_up (1 - g/b_max), down
    g - dw_down (1 - g/b_min), g clipped to [b_min, b_max].

    Per element (bounds sign-consistent, b_max > 0 > b_min): the slopes dw_up / b_max and dw_down / |b_min|
    scale by |1 + slope_up_dtod xi| and |1 + slope_down_dtod xi|, which moves the bounds to
    b_max = dw_up / slope_up and b_min = -dw_down / slope_down; the symmetric point is
    sp = (dw_up - dw_down) / (dw_up / b_max - dw_down / b_min). Cycle noise additive by default
    (mult_noise False): the step is dw (1 - g/b + dw_min_std xi).
    """

    kind: Literal["SoftBoundsReference"] = "SoftBoundsReference"
    mult_noise: bool = Field(False, description="multiplicative cycle noise (else additive: dw_min_std dw xi)")
    slope_up_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of the up slope")
    slope_down_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of the down slope")

    def _code(self) -> int:
        return CODE

    def _additive(self) -> bool:
        return not self.mult_noise

    def _consts(self) -> np.ndarray:
        return np.ones(8)  # unused by the step

    def _shape(self, ep, rng) -> None:
        shape = ep.shape[:-1]

        def factor(dtod: float):
            """A drawn factor |1 + dtod xi| per element (1 without a generator or spread)."""
            return np.abs(1.0 + dtod * rng.standard_normal(shape)) if rng is not None and dtod > 0 else 1.0

        up, dn, hi, lo = ep[..., DW_UP], ep[..., DW_DOWN], ep[..., W_MAX], ep[..., W_MIN]
        ok = (hi > 0) & (lo < 0)
        slope_dn = factor(self.slope_down_dtod) * dn / np.where(ok, -lo, 1.0)  # drawn first, as aihwkit
        slope_up = factor(self.slope_up_dtod) * up / np.where(ok, hi, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ep[..., W_MAX] = np.where(ok & (slope_up != 0), up / slope_up, hi)
            ep[..., W_MIN] = np.where(ok & (slope_dn != 0), -dn / slope_dn, lo)
            hi, lo = ep[..., W_MAX], ep[..., W_MIN]
            ep[..., GAMMA_UP] = np.where(hi > 0, 1.0 / np.abs(hi), 0.0)
            ep[..., GAMMA_DOWN] = np.where(lo < 0, 1.0 / np.abs(lo), 0.0)

    def _symmetric_points(self, ep) -> np.ndarray:
        up, dn, hi, lo = ep[..., DW_UP], ep[..., DW_DOWN], ep[..., W_MAX], ep[..., W_MIN]
        return (up - dn) / (up / hi - dn / lo)


@njit(cache=True, inline="always")
def step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F):
    """Mean step magnitude dw dist g of element j of the row er, dist the distance (>= 0) to the shifted bound
    of direction k (0 up: W_MAX, 1 down: W_MIN), g = 1 / |bound| of that direction; 0 where b_max <= b_min (as
    `response_step.element_step`, which gives k and j as unsigned offsets and w in the float type F)."""
    zero = F(0.0)
    dw, span, dist = step_distance(k, w, er, j, F)
    if span <= zero:
        return zero
    g = F(er[j, U_GAMMA_UP + k])
    return dw * dist * g


@njit(cache=True, inline="always")
def step_derivative(up, w, er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn):
    """(s, ds/dw) of the nominal element er (shape (1, 6)) at w, in float64, adding ds/dp into row i of g
    (p: the 6 element columns, then consts from offset c0, tab_up from t_up, tab_dn from t_dn); 0 at or
    beyond the bound."""
    k, dw, _, sg, dist, _ = scaled_distance(up, w, er, consts)
    if dist <= 0.0:
        return 0.0, 0.0
    gam = er[0, GAMMA_UP + k]
    g[i, k] += dist * gam
    g[i, GAMMA_UP + k] += dw * dist
    g[i, W_MAX + k] += dw * gam * sg
    return dw * dist * gam, -dw * gam * sg


def fit_families(n_nodes: int, dw0: float) -> list[Family]:
    """None of its own: a SoftBoundsReference is fitted as its element's family, SoftBounds (a reference only
    shifts the weight that is read)."""
    return []
