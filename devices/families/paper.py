"""What R1's response families over [-tau, tau] share ([R1] Wu et al., NeurIPS 2025, arXiv:2502.06309,
Table 1): the fields and draws of `ideal`, `linear`, `power` and `exponential`, and how they are fitted.

The families are written with the up/down asymmetry `c` (q_plus scaled by 1 + c, q_minus by 1 - c) and R1's
additive cycle noise `dw_min * sigma_c * xi` (xi a fresh standard normal per pulse). `power` and `exponential`
take an optional exponent of their own for depression, `gamma_down` (q_minus with gamma_down, q_plus with
gamma): measured devices are often far more non-linear one way.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numba import njit
from pydantic import Field, model_serializer, model_validator

from aimc.devices.device_base import (
    DW_DOWN,
    DW_UP,
    GAMMA_DOWN,
    GAMMA_UP,
    U_DW_UP,
    U_W_MAX,
    U_W_MIN,
    W_MAX,
    W_MIN,
    DeviceBase,
)
from aimc.devices.families.fitting import Family, MeasuredRange, by_field, span


class PaperDevice(DeviceBase):
    """The fields and draws every R1 family shares."""

    tau: float = Field(0.6, gt=0, description="weight bound: the element lives in [-tau, tau] (weight units)")
    c: float = Field(
        0.0,
        gt=-1,
        lt=1,
        description="up/down asymmetry: q_plus scaled by (1 + c), q_minus by "
        "(1 - c); shifts the symmetric point (R1's c_Lin)",
    )
    c_dtod: float = Field(0.0, ge=0, description="device-to-device std of c")
    tau_dtod: float = Field(0.0, ge=0, lt=1, description="device-to-device relative std of each bound")
    noise: Literal["additive", "multiplicative"] = Field(
        "additive", description="cycle noise: additive dw_min * sigma * xi (R1), or multiplicative"
    )

    def _additive(self) -> bool:
        return self.noise == "additive"

    @property
    def bounds(self) -> tuple[float, float]:
        return (-self.tau, self.tau)

    def _draw_common(self, ep, rng) -> None:
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = np.maximum(1.0 + self.dw_min_dtod * z(), 0.0)
        c = np.clip(self.c + self.c_dtod * z(), -1.0, 1.0)
        ep[..., DW_UP] = self.dw_min * gain * (1.0 + c)
        ep[..., DW_DOWN] = self.dw_min * gain * (1.0 - c)
        ep[..., W_MAX] = self.tau * (1.0 + self.tau_dtod * z())
        ep[..., W_MIN] = -self.tau * (1.0 + self.tau_dtod * z())


def _drawn_exponent(shape: tuple[int, ...], rng, gamma: float, dtod: float) -> np.ndarray:
    """An exponent per element, gamma (1 + dtod z) clipped at 0, z standard normal from rng (0 where rng is
    None: the nominal element)."""
    spread = rng.standard_normal(shape) if rng is not None else np.zeros(shape)
    return np.maximum(gamma * (1.0 + dtod * spread), 0.0)


class UpDownGamma(PaperDevice):
    """A paper family with an exponent `gamma` (q_plus) and an optional one of its own for q_minus,
    `gamma_down`, with spreads `gamma_dtod` and `gamma_down_dtod`: fields of each family (declared there, after
    `kind`, so that a dump keeps the field order it had before gamma_down)."""

    @model_validator(mode="after")
    def _down_spread_needs_down_gamma(self):
        if self.gamma_down is None and self.gamma_down_dtod is not None:
            raise ValueError("gamma_down_dtod needs gamma_down (without it q_minus shares gamma and its spread)")
        return self

    @model_serializer(mode="wrap")
    def _without_unset_down(self, handler):
        """The dump leaves gamma_down and gamma_down_dtod out while they are None: configs written before
        they existed keep their JSON, so their hash (aimc.config.canonical_json) and their run folders."""
        out = handler(self)
        for key in ("gamma_down", "gamma_down_dtod"):
            if out.get(key, 0) is None:
                del out[key]
        return out

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)
        shape = ep.shape[:-1]
        ep[..., GAMMA_UP] = _drawn_exponent(shape, rng, self.gamma, self.gamma_dtod)
        if self.gamma_down is None:
            ep[..., GAMMA_DOWN] = ep[..., GAMMA_UP]
        else:  # an independent draw for the down exponent
            d = self.gamma_dtod if self.gamma_down_dtod is None else self.gamma_down_dtod
            ep[..., GAMMA_DOWN] = _drawn_exponent(shape, rng, self.gamma_down, d)

    @property
    def gamma_minus(self) -> float:
        """The exponent of q_minus: gamma_down, or gamma where it is None."""
        return self.gamma if self.gamma_down is None else self.gamma_down


# -- fitting ---------------------------------------------------------------------------------------------------
PAPER_FIXED = {"dw_min_dtod": 0.0, "c_dtod": 0.0, "tau_dtod": 0.0, "dw_min_std": 0.0}
"""The fields an R1 family's fit holds fixed: no spread, no cycle noise."""
PAPER_SPREAD = {
    "dw_min_dtod": (by_field("dw_min"), "rel"),
    "c_dtod": (by_field("c"), "abs"),
    "tau_dtod": (by_field("tau"), "rel2"),
}
"""How an R1 family's device-to-device spreads are measured (`Family.spread`)."""
_GAMMA_BOX = (0.05, 10.0)
_GAMMA_STARTS = (0.5, 1.0, 2.0, 4.0)
# (gamma, gamma_down) starts of an up/down family: the shared ones, and one exponent four times the other
_UP_DOWN_STARTS = tuple((g, g) for g in _GAMMA_STARTS) + ((1.0, 4.0), (4.0, 1.0))


def paper_box(d: MeasuredRange, *gammas: tuple[float, float]):
    """Box of (dw_min, c, tau) and of each exponent in `gammas` ((lower, upper) each)."""
    s = span(d)
    return (
        [d.dw0 / 20, -0.99, 0.05 * s, *(g[0] for g in gammas)],
        [d.dw0 * 20, 0.99, 5.0 * s, *(g[1] for g in gammas)],
    )


def paper_start(d: MeasuredRange) -> list[float]:
    """The start of (dw_min, c, tau): the typical step, no asymmetry, the larger measured bound."""
    return [d.dw0, 0.0, max(abs(d.lo), abs(d.hi))]


def paper_family(kind: str, cls: type) -> Family:
    """The fit of an R1 family without exponent (ideal, linear): (dw_min, c, tau)."""
    return Family(kind, cls, ("dw_min", "c", "tau"), paper_box, lambda d: [paper_start(d)], PAPER_FIXED, PAPER_SPREAD)


def gamma_families(kind: str, cls: type) -> list[Family]:
    """R1's power or exponential family: one exponent gamma for both directions (named `kind`), and gamma for
    q_plus with gamma_down for q_minus (named `kind`_ud, the device `kind` with gamma_down set): one parameter
    more, which the criterion charges."""
    fixed = {**PAPER_FIXED, "gamma_dtod": 0.0}
    spread = {**PAPER_SPREAD, "gamma_dtod": (by_field("gamma"), "rel")}
    shared = Family(
        kind,
        cls,
        ("dw_min", "c", "tau", "gamma"),
        lambda d: paper_box(d, _GAMMA_BOX),
        lambda d: [paper_start(d) + [g] for g in _GAMMA_STARTS],
        fixed,
        spread,
    )
    up_down = Family(
        f"{kind}_ud",
        cls,
        ("dw_min", "c", "tau", "gamma", "gamma_down"),
        lambda d: paper_box(d, _GAMMA_BOX, _GAMMA_BOX),
        lambda d: [paper_start(d) + list(g) for g in _UP_DOWN_STARTS],
        {**fixed, "kind": kind, "gamma_down_dtod": 0.0},
        {**spread, "gamma_down_dtod": (by_field("gamma_down"), "rel")},
    )
    return [shared, up_down]


@njit(cache=True, inline="always")
def step_distance(k, w, er, j, F):
    """What the mean step of a bounded family starts from, in the float type F, for element j of the row er at
    w (k, j unsigned offsets, as `response_step.element_step` gives them): (dw, span, dist) with dw the
    element's step of direction k, span = b_max - b_min (the step is 0 where span <= 0) and dist >= 0 the
    distance to the bound of direction k (0 up: W_MAX, 1 down: W_MIN)."""
    dw = F(er[j, U_DW_UP + k])
    span = F(er[j, U_W_MAX]) - F(er[j, U_W_MIN])
    sg = F(1.0) - F(2.0) * F(k)
    return dw, span, max(sg * (F(er[j, U_W_MAX + k]) - w), F(0.0))


@njit(cache=True, inline="always")
def scaled_distance(up, w, er, consts):
    """Where a derivative of a bounded step starts, for the nominal element er (shape (1, 6)) at w: (k, dw,
    span, sg, dist, v) with k = 0 up / 1 down, dw the element's step, span = b_max - b_min, sg = +1 up / -1
    down, dist the distance to the bound the pulse moves toward, v = dist * consts[0] / span (the scaled
    distance of R1's families). dist is 0 where the span is empty; dist <= 0 means a zero step."""
    k = 0 if up else 1
    dw = er[0, k]
    span = er[0, W_MAX] - er[0, W_MIN]
    sg = 1.0 - 2.0 * k
    if span <= 0.0:
        return k, dw, span, sg, 0.0, 0.0
    dist = sg * (er[0, W_MAX + k] - w)
    return k, dw, span, sg, dist, dist * consts[0] / span


@njit(cache=True, inline="always")
def add_distance_terms(g, i, c0, k, sg, dist, span, v, dv, consts):
    """The chain rule through v = dist * consts[0] / span for a step s(v) with ds/dv = dv: adds ds/dp into row
    i of g for p = consts[0] (at c0), the bound moved toward and both bounds; returns ds/dw."""
    g[i, c0] += dv * dist / span
    g[i, W_MAX + k] += dv * consts[0] / span * sg
    g[i, W_MAX] -= dv * v / span
    g[i, W_MIN] += dv * v / span
    return -dv * consts[0] / span * sg
