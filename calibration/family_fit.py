"""Fitting one family to the increments: scipy's least squares from several starts, the sandwich covariance
of the parameters, residual diagnostics, and the non-parametric (tabulated) fit."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit
from scipy import optimize, stats

from aimc.calibration.families import Family
from aimc.calibration.increment_kernels import noise_form, single_pulse_jacobian
from aimc.calibration.pulse_data import PulseData
from aimc.devices import DeviceConfig, Tabulated, limit_blas_threads, parse_device

# scipy's own OpenBLAS, loaded by the import above, would run the least squares' SVDs on spinning threads (4-5x the
# CPU time of one thread for the 9000 x 6 Jacobian of one device: docs/performance.md)
limit_blas_threads()

Z95 = 1.959963984540054  # two-sided 95% normal quantile
MAX_NFEV = 60  # least-squares iterations per starting point
SEARCH_SAMPLE = 20000  # with more increments, the starting points are compared on a subsample of this many
JACOBIAN_STEP = 1e-7  # central-difference step of the parameter-to-element map, in units of the parameter's box
OVERFLOW = 1e10  # the residual (in steps) of an increment the model overflows on
NOISE_FREE = 1e-3  # a robust std of the increments below this fraction of the typical step: noise-free data
HUBER_K = 3.0  # the fits' loss is quadratic within this many robust std of the increments (`PulseData.scale`)


def huber_width(data: PulseData) -> float:
    """Where the fits' loss turns from quadratic to linear, for residuals weighted by `PulseData.weight` (weight
    units): HUBER_K x data.scale; inf (plain least squares) where the scale is unknown or below NOISE_FREE x the
    typical step (noise-free data)."""
    c = HUBER_K * data.scale
    return c if math.isfinite(c) and c > NOISE_FREE * data.dw0 else math.inf


def robust_squares(u: np.ndarray, c: float) -> np.ndarray:
    """Huber's loss of weighted residuals u at width c: u^2 within c, 2 c |u| - c^2 beyond; their sum is the
    robust rss that every family's fit minimises and the criteria rank (a glitch adds in proportion to its size,
    not its square)."""
    if not math.isfinite(c):
        return u * u
    a = np.abs(u)
    return np.where(a <= c, u * u, 2.0 * c * a - c * c)


def criterion_squares(r: np.ndarray, data: PulseData) -> np.ndarray:
    """Per-increment terms of the robust rss of residuals r (weight units) that the criteria rank: Huber's loss
    (`robust_squares`) of the weighted residuals, whitened where the fit is a generalised least squares (`gls`)."""
    return robust_squares(data.whiten(r * data.weight), huber_width(data))


@njit(cache=True)
def huber_rho(z: np.ndarray) -> np.ndarray:
    """Huber's loss as scipy's least_squares takes a callable loss: rows rho(z), rho'(z), rho''(z) of z = (u /
    width)^2, rho = z within 1 and 2 sqrt(z) - 1 beyond: scipy's own "huber" (rho(z) bit for bit, the
    derivatives within a unit in the last place) in one compiled pass (scipy's took 9% of a fit's time in
    numpy's masked assignments)."""
    rho = np.empty((3, len(z)))
    for i in range(len(z)):
        v = z[i]
        if v <= 1.0:
            rho[0, i], rho[1, i], rho[2, i] = v, 1.0, 0.0
        else:
            r = math.sqrt(v)
            rho[0, i], rho[1, i], rho[2, i] = 2.0 * r - 1.0, 1.0 / r, -0.5 / (r * v)
    return rho


@dataclass
class FamilyFit:
    """Fit of one family: parameters with standard errors and 95% intervals, the nominal device (no noise,
    no spread), goodness of fit (rss in weight units^2, n increments, k parameters, aic, bic) and residual
    diagnostics (see `diagnostics`).

    A population fit (`population.fit_population`) also has parts: (rss, n, k) of each device's own fit,
    whose criteria are summed; ci: its intervals (over devices); interval: how the intervals were made;
    flags: parameter -> why the data do not identify it (`population.identification`). shared: where one
    parameter set serves every device, the test that kept it (`population.shared_or_own`; parts then hold each
    device's residuals under that set, and its k parameters are charged once, over all increments)."""

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
    parts: tuple[tuple[float, int, int], ...] = ()
    ci: dict[str, tuple[float, float]] | None = None
    interval: str = "Jacobian sandwich, normal"
    flags: dict[str, str] = field(default_factory=dict)
    shared: str = ""

    @property
    def interval_text(self) -> str:
        """How the intervals were made, after the test that kept the shared model where it did."""
        return f"{self.shared}; {self.interval}" if self.shared else self.interval

    @property
    def ci95(self) -> dict[str, tuple[float, float]]:
        if self.ci is not None:
            return self.ci
        return {p: (v - Z95 * self.stderr[p], v + Z95 * self.stderr[p]) for p, v in self.params.items()}

    def _criterion(self, penalty) -> float:
        parts = self.parts or ((self.rss, self.n, self.k),)
        fit = sum(n * math.log(max(rss, 1e-300) / n) for rss, n, _ in parts)
        if self.shared:
            return fit + penalty(self.k, sum(n for _, n, _ in parts))
        return fit + sum(penalty(k, n) for _, n, k in parts)

    @property
    def aic(self) -> float:
        """n ln(RSS/n) + 2k; a population fit sums n ln(RSS/n) over its devices, and the penalty over their own
        fits (or once, shared)."""
        return self._criterion(lambda k, n: 2 * k)

    @property
    def bic(self) -> float:
        """n ln(RSS/n) + k ln n; a population fit sums n ln(RSS/n) over its devices, and the penalty over their
        own fits (or once, over all increments, shared)."""
        return self._criterion(lambda k, n: k * math.log(n))

    def summary(self) -> dict:
        return {
            "kind": self.kind,
            "params": self.params,
            "stderr": self.stderr,
            "ci95": {p: list(v) for p, v in self.ci95.items()},
            "at_bound": self.at_bound,
            "device": self.device.model_dump(mode="json"),
            "rss": self.rss,
            "n": self.n,
            "k": self.k,
            "aic": self.aic,
            "bic": self.bic,
            "diagnostics": self.diagnostics,
            "message": self.message,
            "interval": self.interval_text,
            "flags": self.flags,
            "n_devices_fitted": len(self.parts) or None,
            "shared": self.shared,
        }


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
    rss = float(np.sum(r**2))
    idx = np.flatnonzero(data.follows)
    lag1 = float(np.mean(r[idx] * r[idx - 1]) / np.mean(r**2)) if len(idx) else float("nan")
    edges = np.linspace(data.lo, data.hi, n_bins + 1)
    binned: dict[str, dict] = {}
    chi2, dof = 0.0, 0
    for name, sel in (("up", data.up), ("down", ~data.up)):
        k = np.clip(np.digitize(data.x[sel], edges) - 1, 0, n_bins - 1)
        cnt = np.bincount(k, minlength=n_bins)
        mean = np.bincount(k, r[sel], n_bins) / np.maximum(cnt, 1)
        var = np.bincount(k, r[sel] ** 2, n_bins) / np.maximum(cnt, 1) - mean**2
        se = np.sqrt(np.maximum(var, 1e-300) / np.maximum(cnt - 1, 1))
        ok = cnt >= 5
        chi2 += float(np.sum((mean[ok] / se[ok]) ** 2))
        dof += int(ok.sum())
        binned[name] = {
            "w": (0.5 * (edges[:-1] + edges[1:])).tolist(),
            "mean": mean.tolist(),
            "se": se.tolist(),
            "count": cnt.tolist(),
        }
    return {
        "rmse": math.sqrt(rss / len(r)),
        "r2": 1.0 - rss / tss if tss > 0 else float("nan"),
        "skewness": float(stats.skew(r)),
        "excess_kurtosis": float(stats.kurtosis(r)),
        "lag1_autocorr": lag1,
        "lack_of_fit_chi2": chi2,
        "lack_of_fit_dof": dof,
        "lack_of_fit_p": float(stats.chi2.sf(chi2, dof)) if dof else float("nan"),
        "binned_residuals": binned,
    }


def _jacobian(fam: Family, on: PulseData, x0: np.ndarray, width: np.ndarray):
    """The residuals' Jacobian: analytic (`increment_kernels.single_pulse_jacobian`, steps of 1e-7 of the box
    for the map from parameters to the element) where every increment is a single pulse and the family's
    cycle noise, if any, is additive or multiplicative; else "2-point" (scipy's forward differences, one model
    evaluation per parameter)."""
    device = fam.fast_config(x0)
    if np.any(on.k != 1) or noise_form(device) == "other":
        return "2-point"
    h, x, up = JACOBIAN_STEP * width, np.ascontiguousarray(on.x), np.ascontiguousarray(on.up)
    scale, work = -(on.weight / on.dw0)[:, None], {}
    return lambda theta: on.whiten(single_pulse_jacobian(fam.fast_config, theta, h, x, up, on.anchor, work) * scale)


def _least_squares(fam: Family, data: PulseData, starts: list[list[float]], differences: bool = False):
    """Least squares from each start (on a subsample when there are several and more than SEARCH_SAMPLE
    increments; the best refined on all). differences: the starts are compared with scipy's forward-difference
    Jacobian, and only the refinement uses the analytic one (`_jacobian`; why: `fit_family`)."""
    lo, hi = (np.array(v, float) for v in fam.box(data))
    width = huber_width(data) / data.dw0  # the residuals below are in units of dw0
    loss = {"loss": huber_rho, "f_scale": width} if math.isfinite(width) else {}

    search = data
    if len(starts) > 1 and data.n > SEARCH_SAMPLE:  # compare the starts on a subsample, refine the best on all
        keep = np.zeros(data.n, bool)
        keep[np.random.default_rng(0).choice(data.n, SEARCH_SAMPLE, replace=False)] = True
        search = data.subset(keep)

    def run(on: PulseData, x0, jac=None) -> optimize.OptimizeResult:
        def resid(theta):
            r = on.whiten((on.dw - on.predict(fam.fast_config(theta))) * on.weight / on.dw0)
            # an overflowing trial (a steep exponential) gets a huge finite residual: least_squares rejects the
            # trial either way, and a forward-difference Jacobian stays finite
            return np.nan_to_num(r, nan=OVERFLOW, posinf=OVERFLOW, neginf=-OVERFLOW)

        x0 = np.clip(np.array(x0, float), lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
        # a trial step into extreme parameters (a steep exponential) can overflow the residuals: least_squares
        # rejects a non-finite trial and shrinks its step, so numpy's overflow warnings there say nothing
        with np.errstate(over="ignore", invalid="ignore"):
            return optimize.least_squares(
                resid,
                x0,
                jac=jac or _jacobian(fam, on, x0, hi - lo),
                bounds=(lo, hi),
                x_scale="jac",
                method="trf",
                max_nfev=MAX_NFEV,
                **loss,
            )

    best = min((run(search, x0, "2-point" if differences else None) for x0 in starts), key=lambda res: res.cost)
    return (best if search is data else run(data, best.x)), lo, hi


def refit(fam: Family, data: PulseData, theta0: np.ndarray) -> np.ndarray:
    """Least-squares parameters of `fam` on `data` from the one start theta0 (no intervals or diagnostics)."""
    return _least_squares(fam, data, [theta0])[0].x


def fit_family(fam: Family, data: PulseData, starts: list[list[float]] | None = None) -> FamilyFit:
    """Least-squares fit of one parametric family to the increments, from `starts` (default: the family's own
    starting points). The family's own starting points are compared with scipy's forward-difference Jacobian,
    as before the analytic one existed: which start wins decides the local minimum of a multi-modal family, and
    the analytic path, which differs from it at the 1e-8 level, ended elsewhere (power_ud on the EcRAM traces:
    a BIC 373 higher; docs/calibration.md). Given starts (per-device fits) and the refinement on all increments
    use the analytic Jacobian where it applies (`_jacobian`)."""
    res, lo, hi = _least_squares(fam, data, starts or fam.starts(data), differences=starts is None)
    theta = res.x
    width = huber_width(data) / data.dw0  # the robust loss's Jacobian with its bounded residuals (psi)
    cov = sandwich_cov(res.jac, np.clip(res.fun, -width, width), data.follows)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    device = parse_device(fam.config_fields(theta), where=fam.kind)
    fitted = data.predict(device)
    r = data.dw - fitted
    tol = 1e-6 * (hi - lo)
    at_bound = [p for p, v, a, b, t in zip(fam.params, theta, lo, hi, tol) if v - a < t or b - v < t]
    return FamilyFit(
        fam.kind,
        {p: float(v) for p, v in zip(fam.params, theta)},
        {p: float(s) for p, s in zip(fam.params, se)},
        at_bound,
        device,
        float(np.sum(criterion_squares(r, data))),
        data.n,
        len(theta),
        r,
        diagnostics(r, data, fitted),
        cov,
        f"{res.message} ({res.nfev} evaluations)",
    )


def _table_steps(data: PulseData, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(where, step, anchor) of the increments a table is made of, NaN where one is not used: the single-pulse
    increments at their anchors where both polarities have 2 bins of 5 or more of them; else (reads k > 1
    pulses apart) every increment as k steps of dw / k, at the middle of its two reads (the mean step over
    the k pulses, exact where the step changes linearly over them), seen from their midpoints (anchor 1/2)."""
    one = data.k == 1
    enough = True
    for sel in (data.up & one, ~data.up & one):
        cnt = np.bincount(np.clip(np.digitize(data.x[sel], edges) - 1, 0, len(edges) - 2), minlength=len(edges) - 1)
        enough &= int(np.sum(cnt >= 5)) >= 2
    if enough:
        return np.where(one, data.x, np.nan), data.dw, data.anchor
    return data.m, data.dw / data.k, 0.5


def fit_tabulated(data: PulseData, n_bins: int = 20) -> FamilyFit:
    """The `tabulated` family from binned increments: mean up and down step in n_bins equal bins of the
    anchor weight (`PulseData.x`) over the plateau range [lo, hi] (bins with fewer than 5 increments of a polarity are
    filled by interpolation; reads k > 1 pulses apart: `_table_steps`). dw_min is the mean step F at the symmetric
    point of the table (where the binned up and down steps cross; the middle of the range if they do not).
    Standard errors: those of the bin means."""
    if n_bins < 2:
        raise ValueError(f"n_bins must be >= 2, got {n_bins}")
    edges = np.linspace(data.lo, data.hi, n_bins + 1)
    centers = 0.5 * (edges[:-1] + edges[1:])
    mag, se, used = {}, {}, np.zeros(n_bins, bool)
    at, step, anchor = _table_steps(data, edges)
    for name, sel, sign in (("up", data.up & np.isfinite(at), 1.0), ("down", ~data.up & np.isfinite(at), -1.0)):
        k = np.clip(np.digitize(at[sel], edges) - 1, 0, n_bins - 1)
        cnt = np.bincount(k, minlength=n_bins)
        mean = sign * np.bincount(k, step[sel], n_bins) / np.maximum(cnt, 1)
        var = np.bincount(k, step[sel] ** 2, n_bins) / np.maximum(cnt, 1) - mean**2
        ok = cnt >= 5
        if ok.sum() < 2:
            raise ValueError(
                f"too few {name} increments for a table of {n_bins} bins ({int(ok.sum())} bins with 5 or more)"
            )
        used |= ok
        # a step seen at anchor x started at x -+ anchor step: move each bin's mean there before tabulating
        start = centers[ok] - sign * anchor * mean[ok]
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
    device = Tabulated(
        w=grid.tolist(),
        q_plus_values=(up / dw_min).tolist(),
        q_minus_values=(dn / dw_min).tolist(),
        w_min=data.lo,
        w_max=data.hi,
        dw_min=dw_min,
    )
    fitted = data.predict(device)
    r = data.dw - fitted
    params = {"dw_min": dw_min, "w_min": data.lo, "w_max": data.hi}
    stderr = {"dw_min": float("nan"), "w_min": float("nan"), "w_max": float("nan")}
    for k, w in enumerate(grid):
        params[f"q_plus[{w:.4g}]"] = float(up[k] / dw_min)
        stderr[f"q_plus[{w:.4g}]"] = float(se["up"][used][k] / dw_min)
        params[f"q_minus[{w:.4g}]"] = float(dn[k] / dw_min)
        stderr[f"q_minus[{w:.4g}]"] = float(se["down"][used][k] / dw_min)
    n_par = 2 * len(grid) + 2  # table values and the two bounds (dw_min only normalises the table)
    rss = float(np.sum(criterion_squares(r, data)))
    return FamilyFit(
        "tabulated",
        params,
        stderr,
        [],
        device,
        rss,
        data.n,
        n_par,
        r,
        diagnostics(r, data, fitted),
        np.full((0, 0), np.nan),
        "binned means",
    )
