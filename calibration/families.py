"""The families a fit can choose from: for every device family (R1's ideal, linear, power and exponential,
[R1] Wu et al., NeurIPS 2025, arXiv:2502.06309; IBM aihwkit 1.1.0's ConstantStep, LinearStep, SoftBounds,
ExpStep, PowStep and PiecewiseStep; the tabulated, non-parametric one), its free parameters, their box and
starting points, the fields held fixed, and how each device-to-device spread is measured."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from aimc.calibration.pulse_data import PulseData
from aimc.devices import (
    DEVICE_KINDS,
    ConstantStep,
    DeviceConfig,
    Exponential,
    ExpStep,
    Ideal,
    Linear,
    LinearStep,
    PiecewiseStep,
    Power,
    PowStep,
    SoftBounds,
)

_PAPER_FIXED = {"dw_min_dtod": 0.0, "c_dtod": 0.0, "tau_dtod": 0.0, "dw_min_std": 0.0}
_AIHW_FIXED = {"dw_min_dtod": 0.0, "up_down_dtod": 0.0, "w_max_dtod": 0.0, "w_min_dtod": 0.0, "dw_min_std": 0.0}


def _by(name: str):
    return lambda p, dw: p[name]


def _steps_at_zero(p: dict) -> tuple[float, float]:
    """An aihwkit element's (up, down) steps at w = 0: dw_min (1 + up_down) up when up_down < 0, dw_min
    (1 - up_down) down when up_down > 0, dw_min otherwise (aihwkit 1.1.0: up_bias = min(up_down, 0),
    down_bias = -max(up_down, 0))."""
    return p["dw_min"] * (1 + min(p["up_down"], 0.0)), p["dw_min"] * (1 - max(p["up_down"], 0.0))


def _gain(p: dict, dw: float) -> float:
    """Mean of an aihwkit element's up and down steps at w = 0, in units of the nominal dw_min."""
    up, down = _steps_at_zero(p)
    return 0.5 * (up + down) / dw


def _split(p: dict, dw: float) -> float:
    """Half difference of an aihwkit element's up and down steps at w = 0, in units of the nominal dw_min."""
    up, down = _steps_at_zero(p)
    return 0.5 * (up - down) / dw


# device-to-device spread: spread field -> (per-device quantity from the fitted parameters and the nominal
# dw_min, how its between-device std becomes the field: "abs" as is, "rel" over |mean|, "rel2" over |mean| times
# sqrt(2) (tau: the simulator draws the two bounds independently, a symmetric fit of one element sees their mean))
_PAPER_SPREAD = {"dw_min_dtod": (_by("dw_min"), "rel"), "c_dtod": (_by("c"), "abs"), "tau_dtod": (_by("tau"), "rel2")}
_AIHW_SPREAD = {"dw_min_dtod": (_gain, "abs"), "up_down_dtod": (_split, "abs"), "w_max_dtod": (_by("w_max"), "rel"),
                "w_min_dtod": (_by("w_min"), "rel")}


@dataclass(frozen=True)
class Family:
    """How one response family is fitted.

    kind: the family's name (that of its device family, unless `fixed` names the device family under "kind",
    as the up/down families power_ud and exponential_ud do); params: the fitted parameters; fixed: the other
    fields of the config during the fit; box: (lower, upper)
    limits from the data; starts: starting points (the best of them wins); spread: field of a
    device-to-device spread -> (per-device quantity, scaling) (see _PAPER_SPREAD); fields: parameter vector
    -> config fields (default: by name).
    """

    kind: str
    cls: type
    params: tuple[str, ...]
    box: Callable[[PulseData], tuple[list[float], list[float]]]
    starts: Callable[[PulseData], list[list[float]]]
    fixed: dict = field(default_factory=dict)
    spread: dict = field(default_factory=dict)
    fields: Callable[[np.ndarray], dict] | None = None

    def config_fields(self, theta: np.ndarray) -> dict:
        out = {"kind": self.kind, **self.fixed}
        out.update(self.fields(theta) if self.fields else {k: float(v) for k, v in zip(self.params, theta)})
        return out

    def fast_config(self, theta: np.ndarray) -> DeviceConfig:
        """Config without validation (inside the optimiser, where the box keeps parameters valid): a copy of
        `_template` with the fields of theta (pydantic's model_copy, a tenth of model_construct's time, which
        resolves every default again)."""
        return self._template.model_copy(update=self.config_fields(theta))

    @functools.cached_property
    def _template(self) -> DeviceConfig:
        """The family's config with every field at its default but the fixed ones, unvalidated."""
        return self.cls.model_construct(**self.config_fields(np.zeros(len(self.params))))


def _span(d: PulseData) -> float:
    return d.hi - d.lo


def _paper_box(d: PulseData, *gammas: tuple[float, float]):
    """Box of (dw_min, c, tau) and of each exponent in `gammas` ((lower, upper) each)."""
    s = _span(d)
    return ([d.dw0 / 20, -0.99, 0.05 * s, *(g[0] for g in gammas)],
            [d.dw0 * 20, 0.99, 5.0 * s, *(g[1] for g in gammas)])


def _paper_start(d: PulseData) -> list[float]:
    return [d.dw0, 0.0, max(abs(d.lo), abs(d.hi))]


_GAMMA_BOX = (0.05, 10.0)
_GAMMA_STARTS = (0.5, 1.0, 2.0, 4.0)
# (gamma, gamma_down) starts of an up/down family: the shared ones, and one exponent four times the other
_UP_DOWN_STARTS = tuple((g, g) for g in _GAMMA_STARTS) + ((1.0, 4.0), (4.0, 1.0))


def _paper_gamma(kind: str, cls: type, up_down: bool) -> Family:
    """R1's power or exponential family: one exponent gamma for both directions (named `kind`), or
    (up_down) gamma for q_plus and gamma_down for q_minus (named `kind`_ud, the device `kind` with
    gamma_down set): one parameter more, which the criterion charges."""
    fixed = {**_PAPER_FIXED, "gamma_dtod": 0.0}
    spread = {**_PAPER_SPREAD, "gamma_dtod": (_by("gamma"), "rel")}
    if not up_down:
        return Family(kind, cls, ("dw_min", "c", "tau", "gamma"), lambda d: _paper_box(d, _GAMMA_BOX),
                      lambda d: [_paper_start(d) + [g] for g in _GAMMA_STARTS], fixed, spread)
    return Family(f"{kind}_ud", cls, ("dw_min", "c", "tau", "gamma", "gamma_down"),
                  lambda d: _paper_box(d, _GAMMA_BOX, _GAMMA_BOX),
                  lambda d: [_paper_start(d) + list(g) for g in _UP_DOWN_STARTS],
                  {**fixed, "kind": kind, "gamma_down_dtod": 0.0},
                  {**spread, "gamma_down_dtod": (_by("gamma_down"), "rel")})


def _aihw_box(d: PulseData, extra_lo=(), extra_hi=()):
    s, eps = _span(d), 1e-3 * _span(d)
    mid = 0.5 * (d.lo + d.hi)
    return ([d.dw0 / 20, -0.99, max(mid, 0.0) + eps, d.lo - 4 * s, *extra_lo],
            [d.dw0 * 20, 0.99, d.hi + 4 * s, min(mid, 0.0) - eps, *extra_hi])


def _aihw_start(d: PulseData, dw: float | None = None) -> list[float]:
    return [d.dw0 if dw is None else dw, 0.0, d.hi, d.lo]


def _wide_start(d: PulseData) -> list[float]:
    """A PowStep start for traces that stop short of the bounds (a steep power law approaches them slowly):
    bounds half the measured range beyond the reads, exponent 2 (at mid range ((b_max - w) / r)^2 = 1/4, so
    dw_min = 4 dw0)."""
    s = _span(d)
    return [4.0 * d.dw0, 0.0, d.hi + 0.5 * s, d.lo - 0.5 * s, 2.0, 0.0]


def _piecewise(n_nodes: int, dw0: float) -> Family:
    def fields(theta):
        return {"piecewise_up": [float(v) for v in theta[:n_nodes]],
                "piecewise_down": [float(v) for v in theta[n_nodes:2 * n_nodes]],
                "w_max": float(theta[-2]), "w_min": float(theta[-1])}

    def box(d):  # the table's ends stay within 5% of the measured range of the plateaus: nodes beyond the
        # reads are not measured, and a free end moves the nodes instead (measured ramps that stop short of
        # saturation: w_max 13% beyond the reads, its down node at 0)
        lo, hi = _aihw_box(d)
        margin = 0.05 * _span(d)
        return ([0.0] * (2 * n_nodes) + [lo[2], d.lo - margin], [1e3] * (2 * n_nodes) + [d.hi + margin, hi[3]])

    names = tuple(f"up_{k}" for k in range(n_nodes)) + tuple(f"down_{k}" for k in range(n_nodes))
    return Family("PiecewiseStep", PiecewiseStep, names + ("w_max", "w_min"), box,
                  lambda d: [[1.0] * (2 * n_nodes) + [d.hi, d.lo]], {**_AIHW_FIXED, "dw_min": dw0, "up_down": 0.0},
                  {"w_max_dtod": (_by("w_max"), "rel"), "w_min_dtod": (_by("w_min"), "rel")}, fields)


def families(n_nodes: int = 6, dw0: float = 1e-3) -> dict[str, Family]:
    """Fit specifications of every parametric family of the device layer; PiecewiseStep with n_nodes nodes
    and its dw_min fixed to dw0 (the nodes carry the step size)."""
    fams = [
        Family("ideal", Ideal, ("dw_min", "c", "tau"), _paper_box, lambda d: [_paper_start(d)], _PAPER_FIXED,
               _PAPER_SPREAD),
        Family("linear", Linear, ("dw_min", "c", "tau"), _paper_box, lambda d: [_paper_start(d)], _PAPER_FIXED,
               _PAPER_SPREAD),
        _paper_gamma("power", Power, False),
        _paper_gamma("exponential", Exponential, False),
        _paper_gamma("power", Power, True),
        _paper_gamma("exponential", Exponential, True),
        Family("ConstantStep", ConstantStep, ("dw_min", "up_down", "w_max", "w_min"), _aihw_box,
               lambda d: [_aihw_start(d)], _AIHW_FIXED, _AIHW_SPREAD),
        Family("LinearStep", LinearStep, ("dw_min", "up_down", "w_max", "w_min", "gamma_up", "gamma_down"),
               lambda d: _aihw_box(d, (0.0, 0.0), (10.0, 10.0)),
               lambda d: [_aihw_start(d) + [g, g] for g in (0.3, 1.0)],
               {**_AIHW_FIXED, "gamma_up_dtod": 0.0, "gamma_down_dtod": 0.0, "mean_bound_reference": True},
               {**_AIHW_SPREAD, "gamma_up_dtod": (_by("gamma_up"), "rel"),
                "gamma_down_dtod": (_by("gamma_down"), "rel")}),
        Family("SoftBounds", SoftBounds, ("dw_min", "up_down", "w_max", "w_min"), _aihw_box,
               lambda d: [_aihw_start(d)], _AIHW_FIXED, _AIHW_SPREAD),
        Family("ExpStep", ExpStep, ("dw_min", "up_down", "w_max", "w_min", "A_up", "A_down", "gamma_up", "gamma_down"),
               lambda d: _aihw_box(d, (-5.0, -5.0, -40.0, -40.0), (5.0, 5.0, 40.0, 40.0)),
               lambda d: [_aihw_start(d, d.dw0 / (1 - a)) + [a, a, g, g] for a, g in ((0.1, 4.0), (-0.1, -4.0))],
               {**_AIHW_FIXED, "a": 0.5, "b": 0.0}, _AIHW_SPREAD),
        Family("PowStep", PowStep, ("dw_min", "up_down", "w_max", "w_min", "pow_gamma", "pow_up_down"),
               lambda d: _aihw_box(d, (0.05, -0.99), (10.0, 0.99)),
               lambda d: [_aihw_start(d, d.dw0 / 0.5 ** g) + [g, 0.0] for g in (0.5, 1.0, 2.0)] + [_wide_start(d)],
               {**_AIHW_FIXED, "pow_gamma_dtod": 0.0, "pow_up_down_dtod": 0.0},
               {**_AIHW_SPREAD, "pow_gamma_dtod": (_by("pow_gamma"), "rel"),
                "pow_up_down_dtod": (_by("pow_up_down"), "abs")}),
    ]
    out = {f.kind: f for f in fams}
    pw = _piecewise(n_nodes, dw0)
    out[pw.kind] = pw
    return out


def with_noise(fam: Family, noise: dict) -> Family:
    """`fam` with the cycle noise of `noise` (`variation.estimate_noise`) held fixed in its configs, so that its
    increment model is the mean of the clipped noisy step (`pulse_data.predict`): the estimated form where the
    family has a choice (`noise` or `mult_noise` field), else multiplicative (aihwkit 1.1.0's other families)."""
    form = noise["form"]
    extra: dict = {}
    if "noise" in fam.cls.model_fields:
        extra["noise"] = form
    elif "mult_noise" in fam.cls.model_fields:
        extra["mult_noise"] = form == "multiplicative"
    else:
        form = "multiplicative"
    extra["dw_min_std"] = float(noise[f"sigma_{form}"])
    return replace(fam, fixed={**fam.fixed, **extra})


def expstep_canonical(fields: dict) -> dict:
    """The fields of an aihwkit ExpStep device (any a != 0, b; aihwkit 1.1.0's ExpStepDevice) rewritten with
    the fitted family's a = 0.5, b = 0 and the same response: with z = 2 a w / span + b, gamma_up z =
    (2 a gamma_up) w / span + gamma_up b, so gamma_up' = 2 a gamma_up, A_up' = A_up e^(gamma_up b),
    gamma_down' = 2 a gamma_down, A_down' = A_down e^(-gamma_down b). Missing fields take the device defaults."""
    f = ExpStep(**fields).model_dump()
    a, b = f["a"], f["b"]
    if a == 0:
        raise ValueError("ExpStep with a = 0 has a constant step: fit ConstantStep instead")
    return {**f, "A_up": f["A_up"] * math.exp(f["gamma_up"] * b),
            "A_down": f["A_down"] * math.exp(-f["gamma_down"] * b), "gamma_up": 2 * a * f["gamma_up"],
            "gamma_down": 2 * a * f["gamma_down"], "a": 0.5, "b": 0.0}


FAMILY_KINDS = tuple(k for d in DEVICE_KINDS if d not in ("SoftBoundsReference", "PowStepReference")
                     for k in ((d, f"{d}_ud") if d in ("power", "exponential") else (d,)))
"""Every family of the device layer, the tabulated (non-parametric) one included, and R1's power and exponential
families with a depression exponent of their own (power_ud, exponential_ud); a reference device is fitted as its
element's family (SoftBounds, PowStep): a reference only shifts the weight that is read."""
