"""The tabulated step: dw times a response given at grid points over the element's bounds, interpolated
linearly and constant beyond the grid (one table up, one down).

Configs: a measured response on a grid (`tabulated`) and aihwkit 1.1.0's PiecewiseStep (N+1 equally spaced
nodes).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numba import njit
from pydantic import Field, model_validator

from aimc.devices.device_base import DW_DOWN, DW_UP, TABLE, U_DW_UP, U_W_MAX, U_W_MIN, W_MAX, W_MIN, DeviceBase
from aimc.devices.families.fitting import Family, by_field, span
from aimc.devices.families.pulsed import AIHW_FIXED, PulsedDevice, aihw_box

CODE = TABLE


class Tabulated(DeviceBase):
    """q_plus and q_minus measured at weights `w` (increasing), interpolated linearly, constant beyond the
    grid. Element spread stretches the table with the element's bounds."""

    kind: Literal["tabulated"] = "tabulated"
    w: list[float] = Field(..., min_length=2, description="grid of weights, strictly increasing (weight units)")
    q_plus_values: list[float] = Field(..., min_length=2, description="q_plus at the grid points (>= 0)")
    q_minus_values: list[float] = Field(..., min_length=2, description="q_minus at the grid points (>= 0)")
    w_min: float | None = Field(None, description="lower bound; default the first grid point")
    w_max: float | None = Field(None, description="upper bound; default the last grid point")
    w_bound_dtod: float = Field(0.0, ge=0, lt=1, description="device-to-device relative std of each bound")
    up_down_dtod: float = Field(0.0, ge=0, description="device-to-device std of the up/down split")
    noise: Literal["additive", "multiplicative"] = Field("additive", description="form of the cycle noise")

    @model_validator(mode="after")
    def _check_table(self):
        n = len(self.w)
        if len(self.q_plus_values) != n or len(self.q_minus_values) != n:
            raise ValueError(f"w, q_plus_values and q_minus_values need the same length (w has {n})")
        if np.any(np.diff(self.w) <= 0):
            raise ValueError("w must be strictly increasing")
        if min(self.q_plus_values + self.q_minus_values) < 0:
            raise ValueError("response values must be >= 0")
        lo, hi = self.bounds
        if not lo < hi:
            raise ValueError(f"w_min ({lo}) must be below w_max ({hi})")
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        lo = self.w[0] if self.w_min is None else self.w_min
        hi = self.w[-1] if self.w_max is None else self.w_max
        return (float(lo), float(hi))

    def _code(self) -> int:
        return CODE

    def _additive(self) -> bool:
        return self.noise == "additive"

    def _table(self):
        lo, hi = self.bounds
        grid = (np.array(self.w, float) - lo) / (hi - lo)
        return grid, np.array(self.q_plus_values, float), np.array(self.q_minus_values, float)

    def _fill(self, ep, rng) -> None:
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = np.maximum(1.0 + self.dw_min_dtod * z(), 0.0)
        r = self.up_down_dtod * z()
        ep[..., DW_UP] = self.dw_min * np.maximum(gain + r, 0.0)
        ep[..., DW_DOWN] = self.dw_min * np.maximum(gain - r, 0.0)
        lo, hi = self.bounds
        ep[..., W_MAX] = hi + abs(hi) * self.w_bound_dtod * z()
        ep[..., W_MIN] = lo - abs(lo) * self.w_bound_dtod * z()


class PiecewiseStep(PulsedDevice):
    """aihwkit PiecewiseStep: the steps are dw_up, dw_down times a piecewise-linear function given at N+1
    equally spaced nodes over [b_min, b_max]."""

    kind: Literal["PiecewiseStep"] = "PiecewiseStep"
    piecewise_up: list[float] = Field([1.0, 1.0], min_length=2, description="relative up step at the nodes")
    piecewise_down: list[float] = Field([1.0, 1.0], min_length=2, description="relative down step at the nodes")

    @model_validator(mode="after")
    def _check_nodes(self):
        if len(self.piecewise_up) != len(self.piecewise_down):
            raise ValueError("piecewise_up and piecewise_down need the same number of nodes")
        if min(self.piecewise_up + self.piecewise_down) < 0:
            raise ValueError("piecewise nodes must be >= 0")
        return self

    @property
    def granularity(self) -> float:
        """dw_min times the up node in the middle, piecewise_up[N // 2] (aihwkit 1.1.0,
        rpu_piecewisestep_device.h); dw_min where that node is 0."""
        middle = self.piecewise_up[len(self.piecewise_up) // 2]
        return float(self.dw_min * middle) if middle > 0 else float(self.dw_min)

    def _code(self) -> int:
        return CODE

    def _table(self):
        n = len(self.piecewise_up)
        return np.linspace(0.0, 1.0, n), np.array(self.piecewise_up, float), np.array(self.piecewise_down, float)


@njit(cache=True, inline="always")
def _interp(t: float, grid: np.ndarray, table: np.ndarray) -> float:
    """Linear interpolation of `table` over increasing `grid`, constant beyond its ends."""
    n = grid.shape[0]
    if t <= grid[0]:
        return table[0]
    if t >= grid[n - 1]:
        return table[n - 1]
    lo, hi = 0, n - 1  # grid[lo] < t <= grid[hi]: bisect to the cell k with grid[k] < t <= grid[k + 1]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if grid[mid] < t:
            lo = mid
        else:
            hi = mid
    k = lo
    f = (t - grid[k]) / (grid[k + 1] - grid[k])
    return table[k] + f * (table[k + 1] - table[k])


@njit(cache=True, inline="always")
def step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F):
    """Mean step magnitude dw max(table(t), 0) of element j of the row er, t = (w - b_min) / (b_max - b_min),
    dw and table of the pulse's direction (k = 0 up, 1 down); 0 where b_max <= b_min (as
    `response_step.element_step`, which gives k and j as unsigned offsets and w in the float type F)."""
    zero = F(0.0)
    dw = F(er[j, U_DW_UP + k])
    bmin = F(er[j, U_W_MIN])
    span = F(er[j, U_W_MAX]) - bmin
    if span <= zero:
        return zero
    t = (w - bmin) / span
    return dw * max(F(_interp(t, grid, tab_up if up else tab_dn)), zero)


@njit(cache=True, inline="always")
def step_derivative(up, w, er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn):
    """(s, ds/dw) of the nominal element er (shape (1, 6)) at w, in float64, adding ds/dp into row i of g
    (p: the 6 element columns, then consts from offset c0, tab_up from t_up, tab_dn from t_dn); 0 where the
    table's value is 0."""
    k = 0 if up else 1
    dw = er[0, k]
    span = er[0, W_MAX] - er[0, W_MIN]
    if span <= 0.0:
        return 0.0, 0.0
    t = (w - er[0, W_MIN]) / span
    tab = tab_up if up else tab_dn
    off = t_up if up else t_dn
    n = len(grid)
    slope = 0.0
    if t <= grid[0]:
        val = tab[0]
        j, f = 0, 0.0
    elif t >= grid[n - 1]:
        val = tab[n - 1]
        j, f = n - 2, 1.0
    else:
        j = np.searchsorted(grid, t) - 1
        f = (t - grid[j]) / (grid[j + 1] - grid[j])
        val = tab[j] + f * (tab[j + 1] - tab[j])
        slope = (tab[j + 1] - tab[j]) / (grid[j + 1] - grid[j])
    if val <= 0.0:
        return 0.0, 0.0
    g[i, k] += val
    g[i, off + j] += dw * (1.0 - f)
    g[i, off + j + 1] += dw * f
    dt = dw * slope  # ds/dt, t = (w - w_min) / span
    g[i, W_MAX] -= dt * t / span
    g[i, W_MIN] += dt * (t - 1.0) / span
    return dw * val, dt / span


def _piecewise_family(n_nodes: int, dw0: float) -> Family:
    """PiecewiseStep's fit: n_nodes up and n_nodes down nodes and the bounds, dw_min fixed to dw0 (the nodes
    carry the step size)."""

    def fields(theta):
        return {
            "piecewise_up": [float(v) for v in theta[:n_nodes]],
            "piecewise_down": [float(v) for v in theta[n_nodes : 2 * n_nodes]],
            "w_max": float(theta[-2]),
            "w_min": float(theta[-1]),
        }

    def box(d):  # the table's ends stay within 5% of the measured range of the plateaus: nodes beyond the
        # reads are not measured, and a free end moves the nodes instead (measured ramps that stop short of
        # saturation: w_max 13% beyond the reads, its down node at 0)
        lo, hi = aihw_box(d)
        margin = 0.05 * span(d)
        return ([0.0] * (2 * n_nodes) + [lo[2], d.lo - margin], [1e3] * (2 * n_nodes) + [d.hi + margin, hi[3]])

    names = tuple(f"up_{k}" for k in range(n_nodes)) + tuple(f"down_{k}" for k in range(n_nodes))
    return Family(
        "PiecewiseStep",
        PiecewiseStep,
        names + ("w_max", "w_min"),
        box,
        lambda d: [[1.0] * (2 * n_nodes) + [d.hi, d.lo]],
        {**AIHW_FIXED, "dw_min": dw0, "up_down": 0.0},
        {"w_max_dtod": (by_field("w_max"), "rel"), "w_min_dtod": (by_field("w_min"), "rel")},
        fields,
    )


def fit_families(n_nodes: int, dw0: float) -> list[Family]:
    """The fits of this module's configs: PiecewiseStep with n_nodes nodes and its dw_min fixed to dw0;
    `tabulated` is fitted without parameters (aimc.calibration.fit_tabulated)."""
    return [_piecewise_family(n_nodes, dw0)]
