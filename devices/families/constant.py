"""The constant step: every pulse moves the weight by the same step, dw_up up and dw_down down.

Configs: R1's `ideal` (q_plus = 1 + c, q_minus = 1 - c) and aihwkit 1.1.0's ConstantStep.
"""

from __future__ import annotations

from typing import Literal

from numba import njit

from aimc.devices.device_base import CONST, U_DW_UP
from aimc.devices.families.fitting import Family
from aimc.devices.families.paper import PaperDevice, paper_family
from aimc.devices.families.pulsed import AIHW_FIXED, AIHW_SPREAD, PulsedDevice, aihw_box, aihw_start

CODE = CONST


class Ideal(PaperDevice):
    """Constant step: q_plus = 1 + c, q_minus = 1 - c (c = 0: the ideal symmetric device)."""

    kind: Literal["ideal"] = "ideal"

    def _code(self) -> int:
        return CODE

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)


class ConstantStep(PulsedDevice):
    """aihwkit ConstantStep: up + dw_up (1 + sigma xi), down - dw_down (1 + sigma xi)."""

    kind: Literal["ConstantStep"] = "ConstantStep"

    def _code(self) -> int:
        return CODE


@njit(cache=True, inline="always")
def step(up, k, w, er, j, consts, grid, tab_up, tab_dn, F):
    """Mean step magnitude dw_up (k = 0, up) or dw_down (k = 1) of element j of the row er (as
    `response_step.element_step`, which gives k and j as unsigned offsets and w in the float type F)."""
    return F(er[j, U_DW_UP + k])


@njit(cache=True, inline="always")
def step_derivative(up, w, er, consts, grid, tab_up, tab_dn, g, i, c0, t_up, t_dn):
    """(s, ds/dw) of the nominal element er (shape (1, 6)) at w, in float64, adding ds/dp into row i of g
    (p: the 6 element columns, then consts from offset c0, tab_up from t_up, tab_dn from t_dn)."""
    k = 0 if up else 1
    dw = er[0, k]
    g[i, k] += 1.0
    return dw, 0.0


def fit_families(n_nodes: int, dw0: float) -> list[Family]:
    """The fits of this module's configs (n_nodes, dw0: PiecewiseStep's, unused here)."""
    return [
        paper_family("ideal", Ideal),
        Family(
            "ConstantStep",
            ConstantStep,
            ("dw_min", "up_down", "w_max", "w_min"),
            aihw_box,
            lambda d: [aihw_start(d)],
            AIHW_FIXED,
            AIHW_SPREAD,
        ),
    ]
