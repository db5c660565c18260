"""The exact likelihood of single-pulse increments under cycle noise and read noise, and the maximum-likelihood
refinement of a device's least-squares fit.

A pulse from weight w draws its step X ~ N(s, sd^2), s the element's mean step magnitude at w and sd its
cycle-to-cycle noise (`pulse_data.step_sd`, linear in the noise factor sigma), and the device clips the weight
to its bounds: the change is Y = clip(X, a, b), a = -(room behind) <= 0 <= b = room ahead (`censored`). Every
read adds N(0, sigma_r^2). The increment y (toward the pulse's bound) is seen from its start read x, so the
start read's error moves the room with x: a clipped pulse gives y = b + e (or a + e), e ~ N(0, sigma_r^2), and
an unclipped one y = X + e1 - e0 with X in [a, b]. The density of y is

    f(y) = Phi(alpha) phi(y - a; sigma_r^2) + Phi(-beta) phi(y - b; sigma_r^2)
           + phi(y - s; v) [Phi((b - m) / c) - Phi((a - m) / c)]

with alpha = (a - s) / sd, beta = (b - s) / sd, v = sd^2 + 2 sigma_r^2, and m, c^2 the mean and variance of
X given y (m = (s 2 sigma_r^2 + y sd^2) / v, c^2 = sd^2 2 sigma_r^2 / v).

Least squares on the mean increment weighs every increment alike; where the cycle noise is several steps
(aihwkit's ReRamES preset: 5) the variance of an increment ranges over four decades along the range (large
steps near one bound, clipped ones at the other), and the few hundred noisiest increments decide the
least-squares exponents. The likelihood weighs each increment by its own distribution, clipped mass included,
and estimates sigma and sigma_r with the family's parameters (docs/calibration.md: the five ReRamES
populations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numba import njit, prange
from scipy import optimize
from tqdm import tqdm

from aimc.calibration.families import Family
from aimc.calibration.family_fit import FamilyFit
from aimc.calibration.population import device_data
from aimc.calibration.pulse_data import PulseData, mean_step, rooms, step_sd
from aimc.devices import DeviceConfig, parse_device

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
SIGMA_BOX = (0.01, 30.0)  # cycle-noise factor: the family's dw_min_std
LOG_READ_BOX = (-14.0, 0.0)  # natural log of the read-noise std, weight units
MAX_ITER = 1000
DIFF_STEP = 1e-7  # forward-difference step of the moments, in units of the parameter's least-squares standard error
STRAY = 1e-4  # weight of the uniform density over the range mixed into every increment's (`total_nll`)
TAIL = -30.0  # below this, log Phi(x) by its asymptotic series (erfc underflows near -38)


@njit(cache=True, inline="always")
def _log_ndtr(x: float) -> float:
    """log Phi(x), Phi the standard normal cdf; for x < TAIL the series -x^2/2 - log(-x) - log(2 pi)/2
    + log(1 - 1/x^2 + 3/x^4) (relative error below 1e-9 there)."""
    if x > TAIL:
        return math.log(0.5 * math.erfc(-x * _SQRT_HALF))
    z = 1.0 / (x * x)
    return -0.5 * x * x - math.log(-x) - _HALF_LOG_2PI + math.log(1.0 - z + 3.0 * z * z)


@njit(cache=True, inline="always")
def _log_normal(r: float, var: float) -> float:
    return -_HALF_LOG_2PI - 0.5 * (math.log(var) + r * r / var)


@njit(cache=True, inline="always")
def _log_add(p: float, q: float) -> float:
    m = max(p, q)
    return m + math.log(math.exp(p - m) + math.exp(q - m)) if m > -math.inf else m


@njit(cache=True, inline="always")
def _log_mass(za: float, zb: float) -> float:
    """log(Phi(zb) - Phi(za)) for za <= zb, the difference taken in the tail that keeps its digits (floored at
    1e-300)."""
    ua, ub = za * _SQRT_HALF, zb * _SQRT_HALF
    mass = 0.5 * (math.erfc(ua) - math.erfc(ub)) if ua > 0 else 0.5 * (math.erfc(-ub) - math.erfc(-ua))
    return math.log(max(mass, 1e-300))


@njit(cache=True, inline="always")
def _nll(s: float, sd: float, a: float, b: float, y: float, read_sd: float) -> float:
    """Negative log-density of one increment y (module docstring), weight units."""
    sd = max(sd, 1e-12)
    r2 = read_sd * read_sd
    t2 = 2.0 * r2
    sd2 = sd * sd
    low = _log_ndtr((a - s) / sd) + _log_normal(y - a, r2)
    high = _log_ndtr((s - b) / sd) + _log_normal(y - b, r2)
    v = sd2 + t2
    m = (s * t2 + y * sd2) / v
    c = math.sqrt(sd2 * t2 / v)
    inside = _log_normal(y - s, v) + _log_mass((a - m) / c, (b - m) / c)
    return -_log_add(_log_add(low, high), inside)


@njit(cache=True, inline="always")
def _mills(x: float) -> float:
    """phi(x) / Phi(x), the derivative of log Phi(x)."""
    return math.exp(-0.5 * x * x - _HALF_LOG_2PI - _log_ndtr(x))


@njit(cache=True, nogil=True)
def _nll_grad(s: float, sd: float, a: float, b: float, y: float, read_sd: float, g: np.ndarray) -> float:
    """`_nll` and, into g, its derivatives with respect to (s, sd, a, b, log read_sd)."""
    sd = max(sd, 1e-12)
    r2 = read_sd * read_sd
    t2 = 2.0 * r2
    u = sd * sd
    v = u + t2
    al, ga = (a - s) / sd, (s - b) / sd
    low = _log_ndtr(al) + _log_normal(y - a, r2)
    high = _log_ndtr(ga) + _log_normal(y - b, r2)
    m = (s * t2 + y * u) / v
    c = math.sqrt(u * t2 / v)
    za, zb = (a - m) / c, (b - m) / c
    log_mass = _log_mass(za, zb)
    inside = _log_normal(y - s, v) + log_mass
    top = max(low, high, inside)
    if top == -math.inf:
        for k in range(5):
            g[k] = 0.0
        return math.inf
    pl, ph, pi = math.exp(low - top), math.exp(high - top), math.exp(inside - top)
    total = pl + ph + pi
    pl, ph, pi = pl / total, ph / total, pi / total
    # the clipped terms
    la, lg = _mills(al), _mills(ga)
    dlow = (-la / sd, -la * al / sd, la / sd + (y - a) / r2, 0.0, -1.0 + (y - a) ** 2 / r2)
    dhigh = (lg / sd, -lg * ga / sd, 0.0, -lg / sd + (y - b) / r2, -1.0 + (y - b) ** 2 / r2)
    # the unclipped term: log N(y - s; v) + log M, M = Phi(zb) - Phi(za), z = (bound - m) / c
    fa = math.exp(-0.5 * za * za - _HALF_LOG_2PI - log_mass)  # phi(za) / M
    fb = math.exp(-0.5 * zb * zb - _HALF_LOG_2PI - log_mass)
    dlv = -0.5 / v + 0.5 * (y - s) ** 2 / (v * v)  # d log N / dv
    # (dm, dc) per variable: s; u = sd^2; t2 = 2 read_sd^2
    dm_s = t2 / v
    dm_u, dc_u = (y - m) / v, t2 * t2 / (2.0 * c * v * v)
    dm_t, dc_t = (s - m) / v, u * u / (2.0 * c * v * v)
    d_s = (y - s) / v + (fb * (-dm_s / c) - fa * (-dm_s / c))
    d_u = dlv + (fb * (-dm_u - zb * dc_u) - fa * (-dm_u - za * dc_u)) / c
    d_t = dlv + (fb * (-dm_t - zb * dc_t) - fa * (-dm_t - za * dc_t)) / c
    din = (d_s, 2.0 * sd * d_u, -fa / c, fb / c, 2.0 * t2 * d_t)
    for k in range(5):
        g[k] = -(pl * dlow[k] + ph * dhigh[k] + pi * din[k])
    return -(top + math.log(total))


@njit(cache=True, nogil=True)
def increment_nll(s, sd, a, b, y, read_sd):
    """Negative log-density of each increment y (module docstring); s, sd, a, b, y arrays of one length."""
    out = np.empty(len(y))
    for i in range(len(y)):
        out[i] = _nll(s[i], sd[i], a[i], b[i], y[i], read_sd)
    return out


@njit(cache=True, parallel=True)
def increment_costs(s, unit, sigma, a, b, y, read_sd, log_stray):
    """-log((1 - STRAY) f(y) + exp(log_stray)) of each increment, in parallel over the increments."""
    keep = math.log(1.0 - STRAY)
    out = np.empty(len(y))
    for i in prange(len(y)):
        v = _nll(s[i], sigma * unit[i], a[i], b[i], y[i], read_sd)
        out[i] = -_log_add(keep - v, log_stray) if math.isfinite(v) else -log_stray
    return out


@njit(cache=True, parallel=True)
def increment_cost_grads(s, unit, sigma, a, b, y, read_sd, log_stray):
    """`increment_costs` and their derivatives with respect to (s, sd, a, b, log read_sd), each increment's
    own, in parallel over the increments."""
    keep = math.log(1.0 - STRAY)
    out = np.empty(len(y))
    grad = np.zeros((len(y), 5))
    for i in prange(len(y)):
        v = _nll_grad(s[i], sigma * unit[i], a[i], b[i], y[i], read_sd, grad[i])
        if math.isfinite(v):
            c = -_log_add(keep - v, log_stray)
            w = math.exp(keep - v + c)  # the model's share of the mixture
            for k in range(5):
                grad[i, k] *= w
            out[i] = c
        else:
            out[i] = -log_stray
            for k in range(5):
                grad[i, k] = 0.0
    return out, grad


def total_nll(
    s: np.ndarray,
    unit: np.ndarray,
    sigma: float,
    a: np.ndarray,
    b: np.ndarray,
    y: np.ndarray,
    read_sd: float,
    log_stray: float,
) -> float:
    """Sum over the increments of -log((1 - STRAY) f(y) + exp(log_stray)), f the density of `increment_nll` with
    sd = sigma unit and log_stray = log(STRAY / span): an increment the model cannot produce costs at most
    -log_stray instead of deciding the fit (a bad read, a bound the device does not have). The terms are
    computed in parallel and summed in one fixed order, so the total does not depend on the thread count."""
    return float(np.sum(increment_costs(s, unit, float(sigma), a, b, y, float(read_sd), float(log_stray))))


@dataclass(frozen=True)
class Increments:
    """A device's single-pulse increments as the likelihood sees them: start reads x, up (bool), and y, the
    increment toward the pulse's bound (dw up, -dw down), weight units."""

    x: np.ndarray
    up: np.ndarray
    y: np.ndarray

    @classmethod
    def of(cls, data: PulseData) -> Increments:
        one = data.k == 1
        x = replace(data, anchor=0.0).x[one]  # the start reads
        up = np.ascontiguousarray(data.up[one])
        return cls(np.ascontiguousarray(x), up, np.where(up, data.dw[one], -data.dw[one]))


def step_moments(device: DeviceConfig, inc: Increments) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(s, unit sd, a, b) of every increment: mean step magnitude at its start read, the cycle-noise std per unit
    of the noise factor (`step_sd` / dw_min_std), and the room behind (negative) and ahead."""
    lo, hi = device.bounds
    s = mean_step(device, inc.x, inc.up)
    unit = step_sd(device, inc.x, s, inc.up) / float(device.dw_min_std)
    ahead, behind = rooms(inc.x, inc.up, lo, hi, 0.0)
    return s, unit, -behind, ahead


@dataclass
class DeviceLikelihood:
    """One device's maximum-likelihood fit: the family's parameters, the cycle-noise factor sigma (the family's
    dw_min_std), the read-noise std (weight units), the negative log-likelihood, the increments used, the
    parameters' covariance (L-BFGS-B's inverse Hessian, family parameters only) and the optimiser's message."""

    theta: np.ndarray
    sigma: float
    read_sd: float
    nll: float
    n: int
    cov: np.ndarray
    message: str


def refine(
    fam: Family, start: FamilyFit, data: PulseData, read_sd0: float, theta0: np.ndarray | None = None
) -> DeviceLikelihood:
    """Maximum likelihood of `fam` on one device's increments `data` from its least-squares fit `start` (or from
    theta0): the noise factor and the read noise first (one at a time, the family held at the start), then
    everything with L-BFGS-B in coordinates scaled by the least-squares standard errors."""
    inc = Increments.of(data)
    theta0 = np.array(list(start.params.values()) if theta0 is None else theta0, float)
    lo, hi = (np.array(v, float) for v in fam.box(data))
    s, unit, a, b = step_moments(fam.fast_config(theta0), inc)
    sigma = float(np.clip(fam.fixed.get("dw_min_std", 1.0), *SIGMA_BOX))
    stray = math.log(STRAY / (data.hi - data.lo))
    log_r = float(np.clip(math.log(max(read_sd0, 1e-12)), *LOG_READ_BOX))
    for _ in range(2):  # the two noise levels alone: a good start for the joint fit
        log_r = optimize.minimize_scalar(
            lambda q: total_nll(s, unit, sigma, a, b, inc.y, math.exp(q), stray), bounds=LOG_READ_BOX, method="bounded"
        ).x
        sigma = optimize.minimize_scalar(
            lambda g: total_nll(s, unit, g, a, b, inc.y, math.exp(log_r), stray), bounds=SIGMA_BOX, method="bounded"
        ).x
    x0 = np.r_[np.clip(theta0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo)), sigma, log_r]
    lo_all, hi_all = np.r_[lo, SIGMA_BOX[0], LOG_READ_BOX[0]], np.r_[hi, SIGMA_BOX[1], LOG_READ_BOX[1]]
    se = np.r_[np.array(list(start.stderr.values()), float), 0.3, 0.3]
    scale = np.where(np.isfinite(se) & (se > 0), se, 1e-2 * (hi_all - lo_all))
    scale = np.minimum(scale, 0.1 * (hi_all - lo_all))

    def moments(theta: np.ndarray) -> tuple[np.ndarray, ...] | None:
        try:
            return step_moments(fam.fast_config(theta), inc)
        except ValueError:  # a parameter vector the device family rejects
            return None

    def nll_and_grad(u: np.ndarray) -> tuple[float, np.ndarray]:
        """The negative log-likelihood at x0 + u scale and its gradient in u: exact in sigma and the read noise;
        in the family's parameters, the exact derivatives with respect to each increment's moments times the
        moments' forward differences (one step_moments call per parameter instead of one likelihood)."""
        p = x0 + u * scale
        k = len(theta0)
        base = moments(p[:k])
        if base is None:
            return 1e30, np.zeros_like(u)
        sm, un, am, bm = base
        costs, g = increment_cost_grads(sm, un, float(p[-2]), am, bm, inc.y, math.exp(p[-1]), stray)
        grad = np.empty(len(p))
        for j in range(k):
            h = DIFF_STEP * scale[j] * (1.0 if p[j] + DIFF_STEP * scale[j] <= hi[j] else -1.0)
            q = p[:k].copy()
            q[j] += h
            moved = moments(q)
            if moved is None:
                return 1e30, np.zeros_like(u)
            ds, du, da, db = ((m1 - m0) / h for m1, m0 in zip(moved, base))
            grad[j] = g[:, 0] @ ds + p[-2] * (g[:, 1] @ du) + g[:, 2] @ da + g[:, 3] @ db
        grad[-2] = g[:, 1] @ un
        grad[-1] = g[:, 4].sum()
        return float(np.sum(costs)), grad * scale

    res = optimize.minimize(
        nll_and_grad,
        np.zeros(len(x0)),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip((lo_all - x0) / scale, (hi_all - x0) / scale)),
        options={"maxiter": MAX_ITER, "ftol": 1e-13, "gtol": 1e-8},
    )
    p = x0 + res.x * scale
    k = len(theta0)
    cov = (res.hess_inv.todense() * np.outer(scale, scale))[:k, :k]
    return DeviceLikelihood(p[:k], float(p[-2]), math.exp(p[-1]), float(res.fun), inc.x.size, cov, str(res.message))


def refined_fit(fam: Family, start: FamilyFit, ml: DeviceLikelihood) -> FamilyFit:
    """`start` with the parameters, standard errors and covariance of the maximum-likelihood fit `ml` (the
    residuals and criterion stay those of the least-squares fit)."""
    se = np.sqrt(np.maximum(np.diag(ml.cov), 0.0))
    device = parse_device(fam.config_fields(ml.theta), where=fam.kind)
    return replace(
        start,
        params={p: float(v) for p, v in zip(fam.params, ml.theta)},
        stderr={p: float(v) for p, v in zip(fam.params, se)},
        device=device,
        cov=ml.cov,
        message=f"maximum likelihood: {ml.message}",
    )


OUTLYING = 5.0  # a device whose parameter lies further than this many MADs (x 1.4826) from the median is refitted


def outlying(ml: dict[int, DeviceLikelihood]) -> list[int]:
    """Devices with a parameter (the family's, the noise factor or the log read noise) more than OUTLYING robust
    standard deviations (1.4826 MAD over the devices) from the devices' median."""
    if len(ml) < 3:
        return []
    theta = np.array([np.r_[m.theta, m.sigma, math.log(m.read_sd)] for m in ml.values()])
    med = np.median(theta, axis=0)
    mad = 1.4826 * np.median(np.abs(theta - med), axis=0)
    far = np.any(np.abs(theta - med) > OUTLYING * np.maximum(mad, 1e-12 * np.abs(med) + 1e-300), axis=1)
    return [d for d, f in zip(ml, far) if f]


def refine_population(
    fam: Family, per: dict[int, FamilyFit], data: PulseData, progress: bool = False
) -> tuple[dict[int, FamilyFit], dict]:
    """Every device's least-squares fit `per` refined by maximum likelihood (`refine`; an `outlying` device is
    refined once more from the other devices' median solution, and the likelier fit kept), and a summary: the median
    and per-device noise factor and read noise (weight units), the summed negative log-likelihood, and the
    devices whose optimiser stopped without converging. The noises summarised are the medians over the devices:
    a device whose fit ran into a degenerate solution (all noise, no response) does not move them."""
    read0 = data.quality.get("anchor", {}).get("read_variance", float("nan"))
    read0 = math.sqrt(read0) if read0 > 0 else 0.1 * data.dw0
    ml = {
        d: refine(fam, f, device_data(data, d), read0)
        for d, f in tqdm(per.items(), desc=f"{fam.kind} likelihood", unit="device", disable=not progress, leave=False)
    }
    for d in outlying(ml):  # another basin than the other devices': try theirs, keep the likelier
        others = np.median([m.theta for e, m in ml.items() if e != d], axis=0)
        again = refine(fam, per[d], device_data(data, d), read0, others)
        if again.nll < ml[d].nll:
            ml[d] = again
    sig, read = [m.sigma for m in ml.values()], [m.read_sd for m in ml.values()]
    summary = {
        "sigma": float(np.median(sig)),
        "sigma_per_device": sig,
        "read_noise": float(np.median(read)),
        "read_noise_per_device": read,
        "nll": float(sum(m.nll for m in ml.values())),
        "n_increments": int(sum(m.n for m in ml.values())),
        "not_converged": [d for d, m in ml.items() if not m.message.startswith("CONVERGENCE")],
    }
    return {d: refined_fit(fam, per[d], m) for d, m in ml.items()}, summary
