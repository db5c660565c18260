"""Fit the response families of the device layer to pulse traces (docs/calibration.md).

The data are the per-pulse increments of every trace, mapped to weights by w = (G - g_mid) / g_scale. Each
increment dw_k = w_{k+1} - w_k is regressed on the midpoint m_k = (w_k + w_{k+1}) / 2 of its two reads: the
read noise of the midpoint, (e_k + e_{k+1}) / 2, is uncorrelated with that of the increment, e_{k+1} - e_k,
so read noise does not bias the fit (regressing on w_k would: its noise enters the increment with a minus
sign and pulls every slope toward -1). The model of an increment is the family's mean step, clipped by the
room left to the element's bound:

    up:   dw = min(dw_min q_plus(m),  2 (w_max - m)^+)       down:  dw = -min(dw_min q_minus(m), 2 (m - w_min)^+)

(2 (w_max - m) is the step that ends exactly on the bound, seen from its midpoint). Parameters come from
scipy's least squares; their covariance from the Jacobian, as the sandwich (J'J)^-1 S (J'J)^-1 with S
summing g_k g_k' and the lag-1 cross terms of consecutive increments (g_k = J_k r_k), which holds for the
heteroscedastic (multiplicative) cycle noise and for the lag-1 correlation that read noise puts into
increments. Families are ranked by AIC and BIC of the Gaussian least-squares likelihood.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from aimc.calibration.traces import TraceSet
from aimc.common.files import atomic_write_text
from aimc.common.version import VERSION
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
    Tabulated,
    parse_device,
)
from aimc.devices.response_step import DW_DOWN, DW_UP

Z95 = 1.959963984540054  # two-sided 95% normal quantile
MAX_NFEV = 60  # least-squares iterations per starting point


# ---------------------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeightMap:
    """Linear map between conductance and weight: w = (G - g_mid) / g_scale (g_mid, g_scale in `unit`)."""

    g_mid: float
    g_scale: float
    unit: str
    origin: str = "data"

    def to_w(self, g):
        return (np.asarray(g, float) - self.g_mid) / self.g_scale

    def to_g(self, w):
        return self.g_mid + self.g_scale * np.asarray(w, float)

    def as_dict(self) -> dict:
        return {"g_mid": self.g_mid, "g_scale": self.g_scale, "unit": self.unit, "origin": self.origin,
                "formula": "w = (G - g_mid) / g_scale"}


def _extremes(values: np.ndarray, frac: float = 0.02) -> tuple[float, float]:
    """Mean of the lowest and of the highest `frac` of the values (at least 3 each): a plateau estimate."""
    v = np.sort(values)
    k = max(3, int(frac * len(v)))
    return float(v[:k].mean()), float(v[-k:].mean())


def weight_map_for(traces: TraceSet, g_mid: float | None = None, g_scale: float | None = None) -> WeightMap:
    """The map to use: explicit arguments, else `g_mid`/`g_scale` of the file's metadata, else from the data
    (the median over devices of each trace's low and high plateaus go to w = -1 and w = +1)."""
    origin = "argument"
    if g_mid is None or g_scale is None:
        if "g_mid" in traces.meta and "g_scale" in traces.meta:
            try:
                meta_mid, meta_scale = float(traces.meta["g_mid"]), float(traces.meta["g_scale"])
            except ValueError:
                raise ValueError("trace metadata g_mid / g_scale are not numbers") from None
            origin = "metadata" if g_mid is None and g_scale is None else "argument+metadata"
        else:
            ext = np.array([_extremes(traces.trace(k)[2]) for k in range(traces.n_devices)])
            lo, hi = np.median(ext[:, 0]), np.median(ext[:, 1])
            if not hi > lo:
                raise ValueError("the traces do not span a conductance range (all reads equal)")
            meta_mid, meta_scale = 0.5 * (lo + hi), 0.5 * (hi - lo)
            origin = "data" if g_mid is None and g_scale is None else "argument+data"
        g_mid = meta_mid if g_mid is None else g_mid
        g_scale = meta_scale if g_scale is None else g_scale
    if not (math.isfinite(g_mid) and math.isfinite(g_scale) and g_scale > 0):
        raise ValueError(f"weight map needs finite g_mid and g_scale > 0 (got {g_mid}, {g_scale})")
    return WeightMap(float(g_mid), float(g_scale), traces.unit, origin)


@dataclass(frozen=True)
class PulseData:
    """Increments in weight units: m (midpoint), dw, up (bool), device (index), follows (see Increments);
    lo, hi: plateau estimates of the bounds (median over devices); dev_lo, dev_hi: per device; dw0: typical
    step (mean step magnitude in the middle half of the range)."""

    m: np.ndarray
    dw: np.ndarray
    up: np.ndarray
    device: np.ndarray
    follows: np.ndarray
    n_devices: int
    lo: float
    hi: float
    dev_lo: np.ndarray
    dev_hi: np.ndarray
    dw0: float

    @property
    def n(self) -> int:
        return len(self.dw)

    def subset(self, sel: np.ndarray) -> PulseData:
        """The increments where sel is True (follows kept only where the predecessor is kept too)."""
        idx = np.flatnonzero(sel)
        follows = self.follows[idx].copy()
        follows[1:] &= idx[1:] == idx[:-1] + 1
        if len(idx):
            follows[0] = False
        return PulseData(self.m[idx], self.dw[idx], self.up[idx], self.device[idx], follows, self.n_devices,
                         self.lo, self.hi, self.dev_lo, self.dev_hi, self.dw0)


def pulse_data(traces: TraceSet, wmap: WeightMap) -> PulseData:
    """Increments of `traces` in weight units, with the bound and step-size estimates the fits start from."""
    inc = traces.increments()
    up = inc.polarity > 0
    if up.sum() < 10 or (~up).sum() < 10:
        raise ValueError(f"need at least 10 up and 10 down increments (found {up.sum()} up, {(~up).sum()} down); "
                         "an increment is two consecutive reads with one pulse between them")
    ext = np.array([_extremes(wmap.to_w(traces.trace(k)[2])) for k in range(traces.n_devices)])
    lo, hi = float(np.median(ext[:, 0])), float(np.median(ext[:, 1]))
    if not hi > lo:
        raise ValueError("the traces do not span a conductance range (all reads equal)")
    m, dw = wmap.to_w(inc.g), inc.dg / wmap.g_scale
    central = np.abs(m - 0.5 * (lo + hi)) < 0.25 * (hi - lo)
    dw0 = 0.5 * (np.mean(dw[up & central]) - np.mean(dw[~up & central])) if (central & up).any() and \
        (central & ~up).any() else float("nan")
    if not dw0 > 0:
        dw0 = float(np.median(np.abs(dw)))
    if not dw0 > 0:
        raise ValueError("the traces show no change under pulses (all increments zero)")
    return PulseData(m, dw, up, inc.device, inc.follows, traces.n_devices, lo, hi, ext[:, 0], ext[:, 1], dw0)


def mean_step(device: DeviceConfig, m: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Mean step magnitude dw_min q_plus(m) (up) or dw_min q_minus(m) (down) of the nominal element."""
    s = np.empty(len(m))
    if up.any():
        s[up] = device.q_plus(m[up])
    if (~up).any():
        s[~up] = device.q_minus(m[~up])
    return s * device.dw_min


def predict(device: DeviceConfig, m: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Mean increment of a pulse seen from midpoint weight m: the clipped mean step (module docstring),
    evaluated where the pulse started, m -+ s/2 (one fixed-point step; the error is of order dw_min^3)."""
    lo, hi = device.bounds
    s = mean_step(device, m - np.where(up, 0.5, -0.5) * mean_step(device, m, up), up)
    room = np.maximum(np.where(up, hi - m, m - lo), 0.0) * 2.0
    mag = np.minimum(s, room)
    return np.where(up, mag, -mag)


# ---------------------------------------------------------------------------------------------------------
# families
# ---------------------------------------------------------------------------------------------------------

_PAPER_FIXED = {"dw_min_dtod": 0.0, "c_dtod": 0.0, "tau_dtod": 0.0, "dw_min_std": 0.0}
_AIHW_FIXED = {"dw_min_dtod": 0.0, "up_down_dtod": 0.0, "w_max_dtod": 0.0, "w_min_dtod": 0.0, "dw_min_std": 0.0}


def _by(name: str):
    return lambda p, dw: p[name]


def _gain(p: dict, dw: float) -> float:
    """Mean of an aihwkit element's up and down steps at w = 0, in units of the nominal dw_min."""
    up = p["dw_min"] * (1 + min(p["up_down"], 0.0))
    down = p["dw_min"] * (1 - max(p["up_down"], 0.0))
    return 0.5 * (up + down) / dw


def _split(p: dict, dw: float) -> float:
    """Half difference of an aihwkit element's up and down steps at w = 0, in units of the nominal dw_min."""
    up = p["dw_min"] * (1 + min(p["up_down"], 0.0))
    down = p["dw_min"] * (1 - max(p["up_down"], 0.0))
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

    params: the fitted parameters; fixed: the other fields of the config during the fit; box: (lower, upper)
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
        """Config without validation (inside the optimiser, where the box keeps parameters valid)."""
        return self.cls.model_construct(**self.config_fields(theta))


def _span(d: PulseData) -> float:
    return d.hi - d.lo


def _paper_box(d: PulseData, gamma: tuple[float, float] | None = None):
    s = _span(d)
    lo = [d.dw0 / 20, -0.99, 0.05 * s]
    hi = [d.dw0 * 20, 0.99, 5.0 * s]
    if gamma:
        lo.append(gamma[0])
        hi.append(gamma[1])
    return lo, hi


def _paper_start(d: PulseData) -> list[float]:
    return [d.dw0, 0.0, max(abs(d.lo), abs(d.hi))]


def _aihw_box(d: PulseData, extra_lo=(), extra_hi=()):
    s, eps = _span(d), 1e-3 * _span(d)
    mid = 0.5 * (d.lo + d.hi)
    return ([d.dw0 / 20, -0.99, max(mid, 0.0) + eps, d.lo - 4 * s, *extra_lo],
            [d.dw0 * 20, 0.99, d.hi + 4 * s, min(mid, 0.0) - eps, *extra_hi])


def _aihw_start(d: PulseData, dw: float | None = None) -> list[float]:
    return [d.dw0 if dw is None else dw, 0.0, d.hi, d.lo]


def _piecewise(n_nodes: int, dw0: float) -> Family:
    def fields(theta):
        return {"piecewise_up": [float(v) for v in theta[:n_nodes]],
                "piecewise_down": [float(v) for v in theta[n_nodes:2 * n_nodes]],
                "w_max": float(theta[-2]), "w_min": float(theta[-1])}

    def box(d):
        lo, hi = _aihw_box(d)
        return [0.0] * (2 * n_nodes) + lo[2:4], [1e3] * (2 * n_nodes) + hi[2:4]

    names = tuple(f"up_{k}" for k in range(n_nodes)) + tuple(f"down_{k}" for k in range(n_nodes))
    return Family("PiecewiseStep", PiecewiseStep, names + ("w_max", "w_min"), box,
                  lambda d: [[1.0] * (2 * n_nodes) + [d.hi, d.lo]], {**_AIHW_FIXED, "dw_min": dw0, "up_down": 0.0},
                  {"w_max_dtod": (_by("w_max"), "rel"), "w_min_dtod": (_by("w_min"), "rel")}, fields)


def families(n_nodes: int = 6, dw0: float = 1e-3) -> dict[str, Family]:
    """Fit specifications of every parametric family of the device layer; PiecewiseStep with n_nodes nodes
    and its dw_min fixed to dw0 (the nodes carry the step size)."""
    gp = (0.05, 10.0)
    fams = [
        Family("ideal", Ideal, ("dw_min", "c", "tau"), _paper_box, lambda d: [_paper_start(d)], _PAPER_FIXED,
               _PAPER_SPREAD),
        Family("linear", Linear, ("dw_min", "c", "tau"), _paper_box, lambda d: [_paper_start(d)], _PAPER_FIXED,
               _PAPER_SPREAD),
        Family("power", Power, ("dw_min", "c", "tau", "gamma"), lambda d: _paper_box(d, gp),
               lambda d: [_paper_start(d) + [g] for g in (0.5, 1.0, 2.0, 4.0)], {**_PAPER_FIXED, "gamma_dtod": 0.0},
               {**_PAPER_SPREAD, "gamma_dtod": (_by("gamma"), "rel")}),
        Family("exponential", Exponential, ("dw_min", "c", "tau", "gamma"), lambda d: _paper_box(d, gp),
               lambda d: [_paper_start(d) + [g] for g in (0.5, 1.0, 2.0, 4.0)], {**_PAPER_FIXED, "gamma_dtod": 0.0},
               {**_PAPER_SPREAD, "gamma_dtod": (_by("gamma"), "rel")}),
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
               lambda d: [_aihw_start(d, d.dw0 / 0.5 ** g) + [g, 0.0] for g in (0.5, 1.0, 2.0)],
               {**_AIHW_FIXED, "pow_gamma_dtod": 0.0, "pow_up_down_dtod": 0.0},
               {**_AIHW_SPREAD, "pow_gamma_dtod": (_by("pow_gamma"), "rel"),
                "pow_up_down_dtod": (_by("pow_up_down"), "abs")}),
    ]
    out = {f.kind: f for f in fams}
    pw = _piecewise(n_nodes, dw0)
    out[pw.kind] = pw
    return out


FAMILY_KINDS = DEVICE_KINDS  # every family of the device layer, the tabulated (non-parametric) one included


# ---------------------------------------------------------------------------------------------------------
# one family
# ---------------------------------------------------------------------------------------------------------


@dataclass
class FamilyFit:
    """Fit of one family: parameters with standard errors and 95% intervals, the nominal device (no noise,
    no spread), goodness of fit (rss in weight units^2, n increments, k parameters, aic, bic) and residual
    diagnostics (see `diagnostics`)."""

    kind: str
    params: dict[str, float]
    stderr: dict[str, float]
    at_bound: list[str]
    device: DeviceConfig
    rss: float
    n: int
    k: int
    residuals: np.ndarray
    diagnostics: dict
    cov: np.ndarray
    message: str = ""

    @property
    def ci95(self) -> dict[str, tuple[float, float]]:
        return {p: (v - Z95 * self.stderr[p], v + Z95 * self.stderr[p]) for p, v in self.params.items()}

    @property
    def aic(self) -> float:
        return self.n * math.log(self.rss / self.n) + 2 * self.k

    @property
    def bic(self) -> float:
        return self.n * math.log(self.rss / self.n) + self.k * math.log(self.n)

    def summary(self) -> dict:
        return {"kind": self.kind, "params": self.params, "stderr": self.stderr,
                "ci95": {p: list(v) for p, v in self.ci95.items()}, "at_bound": self.at_bound,
                "device": self.device.model_dump(mode="json"), "rss": self.rss, "n": self.n, "k": self.k,
                "aic": self.aic, "bic": self.bic, "diagnostics": self.diagnostics, "message": self.message}


def sandwich_cov(jac: np.ndarray, r: np.ndarray, follows: np.ndarray) -> np.ndarray:
    """(J'J)^-1 S (J'J)^-1 with S = sum g_k g_k' + sum over consecutive pairs (g_k g_{k-1}' + g_{k-1} g_k'),
    g_k = J_k r_k; negative eigenvalues of S (finite-sample noise) are set to 0."""
    g = jac * r[:, None]
    s = g.T @ g
    idx = np.flatnonzero(follows)
    if len(idx):
        cross = g[idx].T @ g[idx - 1]
        s += cross + cross.T
    vals, vecs = np.linalg.eigh(0.5 * (s + s.T))
    s = (vecs * np.maximum(vals, 0.0)) @ vecs.T
    bread = np.linalg.pinv(jac.T @ jac)
    return bread @ s @ bread


def diagnostics(r: np.ndarray, data: PulseData, fitted: np.ndarray, n_bins: int = 12) -> dict:
    """Residual checks: rmse; r2 (share of the increment variance beyond a constant step per polarity that
    the model explains); skewness, excess kurtosis; lag-1 autocorrelation of consecutive increments (read
    noise alone gives about -0.5 times its share of the variance); per polarity, residual means in bins of
    weight and the lack-of-fit chi2 of those means against 0 with its p-value (small p: systematic misfit)."""
    base = np.where(data.up, data.dw[data.up].mean(), data.dw[~data.up].mean())
    tss = float(np.sum((data.dw - base) ** 2))
    rss = float(np.sum(r ** 2))
    idx = np.flatnonzero(data.follows)
    lag1 = float(np.mean(r[idx] * r[idx - 1]) / np.mean(r ** 2)) if len(idx) else float("nan")
    edges = np.linspace(data.lo, data.hi, n_bins + 1)
    binned: dict[str, dict] = {}
    chi2, dof = 0.0, 0
    for name, sel in (("up", data.up), ("down", ~data.up)):
        k = np.clip(np.digitize(data.m[sel], edges) - 1, 0, n_bins - 1)
        cnt = np.bincount(k, minlength=n_bins)
        mean = np.bincount(k, r[sel], n_bins) / np.maximum(cnt, 1)
        var = np.bincount(k, r[sel] ** 2, n_bins) / np.maximum(cnt, 1) - mean ** 2
        se = np.sqrt(np.maximum(var, 1e-300) / np.maximum(cnt - 1, 1))
        ok = cnt >= 5
        chi2 += float(np.sum((mean[ok] / se[ok]) ** 2))
        dof += int(ok.sum())
        binned[name] = {"w": (0.5 * (edges[:-1] + edges[1:])).tolist(), "mean": mean.tolist(), "se": se.tolist(),
                        "count": cnt.tolist()}
    return {"rmse": math.sqrt(rss / len(r)), "r2": 1.0 - rss / tss if tss > 0 else float("nan"),
            "skewness": float(stats.skew(r)), "excess_kurtosis": float(stats.kurtosis(r)), "lag1_autocorr": lag1,
            "lack_of_fit_chi2": chi2, "lack_of_fit_dof": dof,
            "lack_of_fit_p": float(stats.chi2.sf(chi2, dof)) if dof else float("nan"), "binned_residuals": binned}


def _least_squares(fam: Family, data: PulseData, starts: list[list[float]]):
    lo, hi = (np.array(v, float) for v in fam.box(data))

    def resid(theta):
        return (data.dw - predict(fam.fast_config(theta), data.m, data.up)) / data.dw0

    best = None
    for x0 in starts:
        x0 = np.clip(np.array(x0, float), lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
        res = optimize.least_squares(resid, x0, bounds=(lo, hi), x_scale="jac", method="trf", max_nfev=MAX_NFEV)
        if best is None or res.cost < best.cost:
            best = res
    return best, lo, hi


def fit_family(fam: Family, data: PulseData, starts: list[list[float]] | None = None) -> FamilyFit:
    """Least-squares fit of one parametric family to the increments."""
    res, lo, hi = _least_squares(fam, data, starts or fam.starts(data))
    theta = res.x
    cov = sandwich_cov(res.jac, res.fun, data.follows)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    device = parse_device(fam.config_fields(theta), where=fam.kind)
    fitted = predict(device, data.m, data.up)
    r = data.dw - fitted
    tol = 1e-6 * (hi - lo)
    at_bound = [p for p, v, a, b, t in zip(fam.params, theta, lo, hi, tol) if v - a < t or b - v < t]
    return FamilyFit(fam.kind, {p: float(v) for p, v in zip(fam.params, theta)},
                     {p: float(s) for p, s in zip(fam.params, se)}, at_bound, device,
                     float(np.sum(r ** 2)), data.n, len(theta), r, diagnostics(r, data, fitted), cov,
                     f"{res.message} ({res.nfev} evaluations)")


# ---------------------------------------------------------------------------------------------------------
# non-parametric fit
# ---------------------------------------------------------------------------------------------------------


def fit_tabulated(data: PulseData, n_bins: int = 20) -> FamilyFit:
    """The `tabulated` family from binned increments: mean up and down step in n_bins equal bins of the
    midpoint weight over the plateau range [lo, hi] (bins with fewer than 5 increments of a polarity are
    filled by interpolation). dw_min is the mean step F at the symmetric point of the table (where the binned
    up and down steps cross; the middle of the range if they do not). Standard errors: those of the bin means."""
    if n_bins < 2:
        raise ValueError(f"n_bins must be >= 2, got {n_bins}")
    edges = np.linspace(data.lo, data.hi, n_bins + 1)
    centers = 0.5 * (edges[:-1] + edges[1:])
    mag, se, used = {}, {}, np.zeros(n_bins, bool)
    for name, sel, sign in (("up", data.up, 1.0), ("down", ~data.up, -1.0)):
        k = np.clip(np.digitize(data.m[sel], edges) - 1, 0, n_bins - 1)
        cnt = np.bincount(k, minlength=n_bins)
        mean = sign * np.bincount(k, data.dw[sel], n_bins) / np.maximum(cnt, 1)
        var = np.bincount(k, data.dw[sel] ** 2, n_bins) / np.maximum(cnt, 1) - mean ** 2
        ok = cnt >= 5
        if ok.sum() < 2:
            raise ValueError(f"too few {name} increments for a table of {n_bins} bins")
        used |= ok
        # a step seen at midpoint m started at m -+ step/2: move each bin's mean there before tabulating
        start = centers[ok] - sign * 0.5 * mean[ok]
        order = np.argsort(start)
        mag[name] = np.interp(centers, start[order], mean[ok][order])
        se[name] = np.interp(centers, centers[ok], np.sqrt(np.maximum(var, 0) / np.maximum(cnt - 1, 1))[ok])
    grid = centers[used]
    up, dn = np.maximum(mag["up"][used], 0.0), np.maximum(mag["down"][used], 0.0)
    h = up - dn
    cross = np.flatnonzero(np.sign(h[:-1]) * np.sign(h[1:]) < 0)
    if len(cross):
        j = cross[len(cross) // 2]
        w_sym = grid[j] - h[j] * (grid[j + 1] - grid[j]) / (h[j + 1] - h[j])
    else:
        w_sym = 0.5 * (data.lo + data.hi)
    dw_min = float(0.5 * (np.interp(w_sym, grid, up) + np.interp(w_sym, grid, dn)))
    if not dw_min > 0:
        raise ValueError("binned steps are zero at the symmetric point; cannot normalise the table")
    device = Tabulated(w=grid.tolist(), q_plus_values=(up / dw_min).tolist(), q_minus_values=(dn / dw_min).tolist(),
                       w_min=data.lo, w_max=data.hi, dw_min=dw_min)
    fitted = predict(device, data.m, data.up)
    r = data.dw - fitted
    params = {"dw_min": dw_min, "w_min": data.lo, "w_max": data.hi}
    stderr = {"dw_min": float("nan"), "w_min": float("nan"), "w_max": float("nan")}
    for k, w in enumerate(grid):
        params[f"q_plus[{w:.4g}]"] = float(up[k] / dw_min)
        stderr[f"q_plus[{w:.4g}]"] = float(se["up"][used][k] / dw_min)
        params[f"q_minus[{w:.4g}]"] = float(dn[k] / dw_min)
        stderr[f"q_minus[{w:.4g}]"] = float(se["down"][used][k] / dw_min)
    n_par = 2 * len(grid) + 2  # table values and the two bounds (dw_min only normalises the table)
    return FamilyFit("tabulated", params, stderr, [], device, float(np.sum(r ** 2)), data.n, n_par, r,
                     diagnostics(r, data, fitted), np.full((0, 0), np.nan), "binned means")


# ---------------------------------------------------------------------------------------------------------
# noise and spread
# ---------------------------------------------------------------------------------------------------------


def _interior(device: DeviceConfig, data: PulseData) -> tuple[np.ndarray, np.ndarray]:
    """(mean step magnitude, mask of the increments inside the bounds whose step the bound does not clip)."""
    lo, hi = device.bounds
    s = mean_step(device, data.m, data.up)
    room = 2.0 * np.where(data.up, hi - data.m, data.m - lo)
    return s, (s < room) & (data.m > lo) & (data.m < hi)


def _noise_moments(r: np.ndarray, s: np.ndarray, ref: np.ndarray, follows: np.ndarray) -> dict:
    """Read noise and cycle noise from residuals r of unclipped increments (weight units).

    Read noise e puts e_{k+1} - e_k into each increment, so consecutive residuals have covariance -sigma_r^2:
    sigma_r^2 = -mean(r_k r_{k-1}). What remains of the variance, r_k^2 - 2 sigma_r^2, is the cycle noise,
    fitted as sigma^2 ref_k^2 (additive: ref = the element's step at the reference point) and as
    sigma^2 s_k^2 (multiplicative: s = the mean step at m_k); the form with the smaller squared error wins.
    """
    idx = np.flatnonzero(follows)
    sr2 = max(-float(np.mean(r[idx] * r[idx - 1])), 0.0) if len(idx) else 0.0
    z = r ** 2 - 2.0 * sr2
    out = {"read_noise": math.sqrt(sr2)}
    sse = {}
    for name, x in (("additive", ref), ("multiplicative", s)):
        x2 = x ** 2
        var = max(float(np.sum(z * x2) / np.sum(x2 ** 2)), 0.0) if np.any(x2 > 0) else 0.0
        out[f"sigma_{name}"] = math.sqrt(var)
        sse[name] = float(np.sum((z - var * x2) ** 2))
    out["form"] = "additive" if sse["additive"] < sse["multiplicative"] else "multiplicative"
    return out


def estimate_noise(fit: FamilyFit, data: PulseData, g_scale: float) -> dict:
    """Read noise (weight and conductance units) and cycle-to-cycle noise (relative to the step) from the
    residuals of `fit`, with standard errors from the spread of per-device estimates (NaN for one device)."""
    s, ok = _interior(fit.device, data)
    ep = fit.device.nominal().ep[0, 0]
    ref = np.where(data.up, ep[DW_UP], ep[DW_DOWN])
    sub = data.subset(ok)
    pooled = _noise_moments(fit.residuals[ok], s[ok], ref[ok], sub.follows)
    per = [_noise_moments(fit.residuals[ok][sub.device == d], s[ok][sub.device == d], ref[ok][sub.device == d],
                          sub.subset(sub.device == d).follows)
           for d in range(data.n_devices) if np.sum(sub.device == d) >= 20]
    out = dict(pooled)
    for key in ("read_noise", "sigma_additive", "sigma_multiplicative"):
        vals = np.array([p[key] for p in per])
        out[f"{key}_se"] = float(vals.std(ddof=1) / math.sqrt(len(vals))) if len(vals) > 1 else float("nan")
    out["read_noise_g"] = out["read_noise"] * g_scale
    out["read_noise_g_se"] = out["read_noise_se"] * g_scale
    out["n_increments"] = int(ok.sum())
    return out


def _numeric_grad(func: Callable[[np.ndarray], float], theta: np.ndarray) -> np.ndarray:
    h = 1e-6 * np.maximum(np.abs(theta), 1e-12)
    return np.array([(func(theta + e) - func(theta - e)) / (2 * e[k]) for k, e in enumerate(np.diag(h))])


def estimate_spread(fam: Family, pooled: FamilyFit, data: PulseData, min_increments: int = 50) -> dict:
    """Device-to-device spread: fit `fam` to each device alone (from the pooled solution), then for every
    spread field of the family the between-device std of its per-device quantity, with the estimation noise
    removed: sqrt(max(var over devices - mean squared standard error, 0)) (method of moments)."""
    theta0 = np.array(list(pooled.params.values()))
    dw_nom = pooled.params["dw_min"] if "dw_min" in pooled.params else pooled.device.dw_min
    rows, covs, used = [], [], []
    for d in range(data.n_devices):
        sub = data.subset(data.device == d)
        if sub.n < max(min_increments, 5 * len(theta0)) or sub.up.sum() < 5 or (~sub.up).sum() < 5:
            continue
        f = fit_family(fam, sub, starts=[theta0])
        rows.append(np.array(list(f.params.values())))
        covs.append(f.cov)
        used.append(d)
    out: dict = {"family": fam.kind, "devices": used, "per_device": {}, "dtod": {}, "quantities": {}}
    if len(rows) < 3:
        out["message"] = f"{len(rows)} devices with enough increments; need 3 for a spread"
        return out
    theta = np.array(rows)
    for k, p in enumerate(fam.params):
        out["per_device"][p] = theta[:, k].tolist()
    for fld, (func, how) in fam.spread.items():
        def q(t, func=func):
            return func(dict(zip(fam.params, t)), dw_nom)
        vals = np.array([q(t) for t in theta])
        noise = np.array([_numeric_grad(q, t) @ c @ _numeric_grad(q, t) for t, c in zip(theta, covs)])
        between = math.sqrt(max(float(vals.var(ddof=1) - noise.mean()), 0.0))
        mean = float(vals.mean())
        value = between if how == "abs" else between / abs(mean) * (math.sqrt(2.0) if how == "rel2" else 1.0)
        out["quantities"][fld] = {"mean": mean, "std": float(vals.std(ddof=1)), "estimation_std": float(
            math.sqrt(noise.mean())), "between_std": between, "per_device": vals.tolist()}
        out["dtod"][fld] = value
    return out


def spread_tabulated(fit: FamilyFit, data: PulseData) -> dict:
    """Spread for the tabulated family: per device, least-squares gains a_up, a_down of the table's steps;
    dw_min_dtod = std of (a_up + a_down)/2, up_down_dtod = std of (a_up - a_down)/2 (both over their mean,
    estimation noise removed); w_bound_dtod = mean relative std of the devices' plateau bounds."""
    s, ok = _interior(fit.device, data)
    gains, splits, noise_g = [], [], []
    for d in range(data.n_devices):
        a, v = {}, {}
        for name, sel in (("up", data.up), ("down", ~data.up)):
            m = ok & sel & (data.device == d)
            if m.sum() < 10:
                break
            y, x = np.abs(data.dw[m]), s[m]
            a[name] = float(np.sum(x * y) / np.sum(x * x))
            v[name] = float(np.var(y - a[name] * x) / np.sum(x * x))
        if len(a) == 2:
            gains.append(0.5 * (a["up"] + a["down"]))
            splits.append(0.5 * (a["up"] - a["down"]))
            noise_g.append(0.25 * (v["up"] + v["down"]))
    out: dict = {"family": "tabulated", "devices": list(range(data.n_devices)), "dtod": {}, "quantities": {}}
    if len(gains) < 3:
        out["message"] = f"{len(gains)} devices with enough increments; need 3 for a spread"
        return out
    gains, splits, noise = np.array(gains), np.array(splits), float(np.mean(noise_g))
    g_mean = float(gains.mean())
    out["dtod"]["dw_min_dtod"] = math.sqrt(max(gains.var(ddof=1) - noise, 0.0)) / g_mean
    out["dtod"]["up_down_dtod"] = math.sqrt(max(splits.var(ddof=1) - noise, 0.0)) / g_mean
    rel = [np.std(v, ddof=1) / abs(np.mean(v)) for v in (data.dev_lo, data.dev_hi) if abs(np.mean(v)) > 0]
    out["dtod"]["w_bound_dtod"] = float(np.mean(rel)) if rel else 0.0
    out["quantities"] = {"gain": gains.tolist(), "split": splits.tolist()}
    return out


# ---------------------------------------------------------------------------------------------------------
# the whole fit
# ---------------------------------------------------------------------------------------------------------


@dataclass
class FitResult:
    """Everything `fit` found: the weight map, every family's fit, the ranking (best first, by `criterion`),
    the noise and spread estimates of the best family, and `device`, the exported config (best family,
    its pooled parameters, cycle noise and device-to-device spread)."""

    weight_map: WeightMap
    fits: dict[str, FamilyFit]
    criterion: str
    noise: dict
    spread: dict
    device: DeviceConfig
    data: PulseData
    source: str = ""

    @property
    def ranking(self) -> list[str]:
        return sorted(self.fits, key=lambda k: getattr(self.fits[k], self.criterion))

    @property
    def best(self) -> FamilyFit:
        return self.fits[self.ranking[0]]

    def ranking_table(self) -> list[dict]:
        """Per family, best first: k, rss, aic, bic, their differences to the best and Akaike weights."""
        rank = self.ranking
        aic0 = min(f.aic for f in self.fits.values())
        bic0 = min(f.bic for f in self.fits.values())
        wts = np.array([math.exp(-0.5 * (self.fits[k].aic - aic0)) for k in rank])
        wts /= wts.sum()
        return [{"kind": k, "k": self.fits[k].k, "rss": self.fits[k].rss, "rmse": self.fits[k].diagnostics["rmse"],
                 "r2": self.fits[k].diagnostics["r2"], "aic": self.fits[k].aic, "bic": self.fits[k].bic,
                 "delta_aic": self.fits[k].aic - aic0, "delta_bic": self.fits[k].bic - bic0,
                 "akaike_weight": float(w)} for k, w in zip(rank, wts)]

    def device_file(self) -> dict:
        """The exported device file: the config under "device" (what `devices.load_device` reads), the
        weight map and the provenance."""
        return {"device": self.device.model_dump(mode="json"), "weight_map": self.weight_map.as_dict(),
                "fit": {"family": self.best.kind, "criterion": self.criterion, "traces": self.source,
                        "aimc_version": VERSION}}

    def summary(self) -> dict:
        """All numbers of the fit (JSON-ready), with the data the fit figures need."""
        d = self.data
        rng = np.random.default_rng(0)
        keep = np.sort(rng.choice(d.n, size=min(d.n, 3000), replace=False))
        grid = np.linspace(d.lo, d.hi, 101)
        curves = {}
        for k in self.ranking:
            dev = self.fits[k].device
            curves[k] = {"up": predict(dev, grid, np.ones(len(grid), bool)).tolist(),
                         "down": predict(dev, grid, np.zeros(len(grid), bool)).tolist()}
        edges = np.linspace(d.lo, d.hi, 31)
        binned = {}
        for name, sel in (("up", d.up), ("down", ~d.up)):
            j = np.clip(np.digitize(d.m[sel], edges) - 1, 0, 29)
            cnt = np.bincount(j, minlength=30)
            mean = np.bincount(j, d.dw[sel], 30) / np.maximum(cnt, 1)
            var = np.bincount(j, d.dw[sel] ** 2, 30) / np.maximum(cnt, 1) - mean ** 2
            binned[name] = {"w": (0.5 * (edges[:-1] + edges[1:])).tolist(), "mean": mean.tolist(),
                            "se": np.sqrt(np.maximum(var, 0) / np.maximum(cnt - 1, 1)).tolist(), "count": cnt.tolist()}
        return {"weight_map": self.weight_map.as_dict(), "criterion": self.criterion, "best": self.best.kind,
                "ranking": self.ranking_table(), "families": {k: f.summary() for k, f in self.fits.items()},
                "noise": self.noise, "spread": self.spread, "device_file": self.device_file(),
                "model_curves": {"w": grid.tolist(), **curves},
                "data": {"n_increments": d.n, "n_devices": d.n_devices, "bounds_plateau": [d.lo, d.hi],
                         "binned": binned,
                         "typical_step": d.dw0, "sample": {"m": d.m[keep].tolist(), "dw": d.dw[keep].tolist(),
                                                           "up": d.up[keep].astype(int).tolist(),
                                                           "residual": self.best.residuals[keep].tolist()}},
                "source": self.source}

    def export(self, path: str | os.PathLike) -> None:
        """Write the device file (JSON) atomically."""
        atomic_write_text(path, json.dumps(self.device_file(), indent=2) + "\n")

    def save(self, out_dir: str | os.PathLike) -> None:
        """Write DIR/device.json (the exported device) and DIR/fit.json (all numbers), atomically."""
        out = os.fspath(out_dir)
        os.makedirs(out, exist_ok=True)
        self.export(os.path.join(out, "device.json"))
        atomic_write_text(os.path.join(out, "fit.json"), json.dumps(_finite(self.summary()), indent=1) + "\n")


def _finite(obj):
    """Replace NaN and infinities (not JSON) by None, recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _export_device(best: FamilyFit, noise: dict, spread: dict) -> DeviceConfig:
    """The best family's config with the measured cycle noise and device-to-device spread filled in."""
    fields = best.device.model_dump()
    form = noise["form"]
    if "noise" in fields:  # paper families and tabulated: the noise form is a field
        fields["noise"] = form
    elif "mult_noise" in fields:  # LinearStep, SoftBounds
        fields["mult_noise"] = form == "multiplicative"
    else:  # the other aihwkit families have multiplicative noise only
        form = "multiplicative"
    fields["dw_min_std"] = noise[f"sigma_{form}"]
    for fld, value in spread.get("dtod", {}).items():
        fields[fld] = min(float(value), 0.95)
    return parse_device(fields, where="exported device")


def fit(traces: TraceSet, kinds: list[str] | None = None, criterion: str = "bic", g_mid: float | None = None,
        g_scale: float | None = None, n_bins: int = 20, n_nodes: int = 6, spread: bool = True,
        source: str = "") -> FitResult:
    """Fit every family in `kinds` (default: all of the device layer) to the increments of `traces`, rank
    them by `criterion` ("bic" or "aic"), estimate noise and device-to-device spread for the best one and
    build the exported device. g_mid, g_scale: the weight map (default: `weight_map_for`); n_bins: bins of
    the tabulated fit; n_nodes: nodes of the PiecewiseStep fit; spread: fit each device for the spread."""
    if criterion not in ("aic", "bic"):
        raise ValueError(f"criterion must be 'aic' or 'bic', got {criterion!r}")
    kinds = list(FAMILY_KINDS if kinds is None else kinds)
    unknown = [k for k in kinds if k not in FAMILY_KINDS]
    if unknown or not kinds:
        raise ValueError(f"unknown families {unknown}; known: {', '.join(FAMILY_KINDS)}")
    wmap = weight_map_for(traces, g_mid, g_scale)
    data = pulse_data(traces, wmap)
    specs = families(n_nodes, data.dw0)
    fits = {k: fit_tabulated(data, n_bins) if k == "tabulated" else fit_family(specs[k], data) for k in kinds}
    best = min(fits.values(), key=lambda f: getattr(f, criterion))
    noise = estimate_noise(best, data, wmap.g_scale)
    if not spread or data.n_devices < 3:
        spread_info = {"family": best.kind, "dtod": {}, "message": "not estimated"}
    elif best.kind == "tabulated":
        spread_info = spread_tabulated(best, data)
    else:
        spread_info = estimate_spread(specs[best.kind], best, data)
    device = _export_device(best, noise, spread_info)
    return FitResult(wmap, fits, criterion, noise, spread_info, device, data, source)
