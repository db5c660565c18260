"""Cycle-to-cycle noise and device-to-device spread of a fitted family, estimated from the residuals of the
pooled fit and from per-device fits."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from tqdm import tqdm

from aimc.calibration.censored import clipped_normal_moments
from aimc.calibration.families import Family
from aimc.calibration.family_fit import FamilyFit, fit_family, fit_tabulated
from aimc.calibration.pulse_data import PulseData, mean_step, rooms
from aimc.devices import DeviceConfig
from aimc.devices.response_step import DW_DOWN, DW_UP

KEPT_VARIANCE = 0.99  # second pass of the noise estimate: increments whose bounds leave this share of the variance


def _interior(device: DeviceConfig, data: PulseData) -> tuple[np.ndarray, np.ndarray]:
    """(mean step magnitude per pulse, mask of the increments inside the bounds whose k mean steps the bound does
    not clip)."""
    lo, hi = device.bounds
    s = mean_step(device, data.x, data.up)
    room = rooms(data.x, data.up, lo, hi, data.anchor)[0]
    return s, (data.k * s < room) & (data.x > lo) & (data.x < hi)


def _uncensored(device: DeviceConfig, data: PulseData, s: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Mask of the increments whose noise (mean s, std sd over the increment's k pulses) the bounds leave at least
    KEPT_VARIANCE of its variance (`censored.clipped_normal_moments`, the room seen from the anchor,
    `pulse_data.predict`)."""
    room, back = rooms(data.x, data.up, *device.bounds, data.anchor)
    var = clipped_normal_moments(s, sd, -back, room)[1]
    return var >= KEPT_VARIANCE * sd * sd


def _noise_moments(r: np.ndarray, s: np.ndarray, ref: np.ndarray, follows: np.ndarray) -> dict:
    """Read noise and cycle noise from residuals r of unclipped increments (weight units).

    Read noise e puts e_{k+1} - e_k into each increment, so consecutive residuals have covariance -sigma_r^2:
    sigma_r^2 = -mean(r_k r_{k-1}). What remains of the variance, r_k^2 - 2 sigma_r^2, is the cycle noise,
    fitted as sigma^2 ref_k^2 (additive: ref = the element's step at the reference point) and as
    sigma^2 s_k^2 (multiplicative: s = the mean step at m_k); an increment of n pulses sums n independent
    steps, so the caller passes ref and s times sqrt(n) (`estimate_noise`). The form whose residual variances
    2 sigma_r^2 + sigma^2 x_k^2 give the residuals the larger Gaussian log-likelihood wins (a squared-error
    comparison of r_k^2 is dominated by the largest residuals and picked the additive form for multiplicative
    devices).
    """
    idx = np.flatnonzero(follows)
    sr2 = max(-float(np.mean(r[idx] * r[idx - 1])), 0.0) if len(idx) else 0.0
    z = r**2 - 2.0 * sr2
    out = {"read_noise": math.sqrt(sr2)}
    loglik = {}
    floor = 1e-12 * max(float(np.mean(r**2)), 1e-300)
    for name, x in (("additive", ref), ("multiplicative", s)):
        x2 = x**2
        var = max(float(np.sum(z * x2) / np.sum(x2**2)), 0.0) if np.any(x2 > 0) else 0.0
        out[f"sigma_{name}"] = math.sqrt(var)
        v = np.maximum(2.0 * sr2 + var * x2, floor)
        loglik[name] = float(-0.5 * np.sum(np.log(v) + r**2 / v))
    out["form"] = "additive" if loglik["additive"] >= loglik["multiplicative"] else "multiplicative"
    out["loglik"] = loglik
    return out


def estimate_noise(fit: FamilyFit, data: PulseData, g_scale: float) -> dict:
    """Read noise (weight and conductance units) and cycle-to-cycle noise (relative to the step) from the
    residuals of `fit`, with standard errors from the spread of per-device estimates (NaN for one device).
    Every increment inside the bounds counts: one of k pulses has the cycle noise variance of k steps
    (`_noise_moments`). Without consecutive increments (a read shared by two) the read noise is not identified
    (taken as 0, with a note); without 3 increments inside the bounds neither noise is estimated: zeros, with a
    message."""
    s, ok = _interior(fit.device, data)
    root = np.sqrt(data.k)
    ep = fit.device.nominal().ep[0, 0]
    ref = np.where(data.up, ep[DW_UP], ep[DW_DOWN])
    if ok.sum() >= 3:  # leave out the increments the noise would carry to a bound (their variance is censored)
        first = _noise_moments(fit.residuals[ok], (s * root)[ok], (ref * root)[ok], data.subset(ok).follows)
        sd = np.maximum(first["sigma_additive"] * ref, first["sigma_multiplicative"] * s)
        clear = ok & _uncensored(fit.device, data, s * data.k, sd * root)
        ok = clear if clear.sum() >= 3 else ok
    if ok.sum() < 3:
        nan = float("nan")
        return {
            "read_noise": 0.0,
            "sigma_additive": 0.0,
            "sigma_multiplicative": 0.0,
            "form": "additive",
            "read_noise_se": nan,
            "sigma_additive_se": nan,
            "sigma_multiplicative_se": nan,
            "read_noise_g": 0.0,
            "read_noise_g_se": nan,
            "n_increments": int(ok.sum()),
            "message": f"not estimated: {int(ok.sum())} increments inside the bounds, 3 needed",
        }
    sub = data.subset(ok)
    s, ref = (s * root)[ok], (ref * root)[ok]
    pooled = _noise_moments(fit.residuals[ok], s, ref, sub.follows)
    per = [
        _noise_moments(
            fit.residuals[ok][sub.device == d],
            s[sub.device == d],
            ref[sub.device == d],
            sub.subset(sub.device == d).follows,
        )
        for d in range(data.n_devices)
        if np.sum(sub.device == d) >= 20
    ]
    out = dict(pooled)
    for key in ("read_noise", "sigma_additive", "sigma_multiplicative"):
        vals = np.array([p[key] for p in per])
        out[f"{key}_se"] = float(vals.std(ddof=1) / math.sqrt(len(vals))) if len(vals) > 1 else float("nan")
    out["read_noise_g"] = out["read_noise"] * g_scale
    out["read_noise_g_se"] = out["read_noise_se"] * g_scale
    out["n_increments"] = int(ok.sum())
    out["n_multi_pulse"] = int(np.sum(sub.k > 1))
    if not sub.follows.any():
        out["note"] = "read noise not identified: no two increments share a read (taken as 0)"
    return out


def table_noise(table: FamilyFit, data: PulseData, n_bins: int, g_scale: float) -> dict | None:
    """Cycle and read noise before any family is fitted (`estimate_noise`), from the residuals of each device's
    own table of binned mean steps (`fit_tabulated`; a device whose table cannot be built keeps the residuals
    of the pooled `table`): no family assumed, and the device-to-device spread of the steps and bounds is not
    counted as cycle noise. None where the noise cannot be estimated."""
    r = table.residuals.copy()
    for d in range(data.n_devices):
        sel = data.device == d
        try:
            r[sel] = fit_tabulated(data.subset(sel), n_bins).residuals
        except ValueError:
            continue
    noise = estimate_noise(replace(table, residuals=r), data, g_scale)
    return None if "message" in noise else noise


def _numeric_grad(func: Callable[[np.ndarray], float], theta: np.ndarray) -> np.ndarray:
    h = 1e-6 * np.maximum(np.abs(theta), 1e-12)
    return np.array([(func(theta + e) - func(theta - e)) / (2 * e[k]) for k, e in enumerate(np.diag(h))])


def estimate_spread(
    fam: Family,
    pooled: FamilyFit,
    data: PulseData,
    min_increments: int = 50,
    progress: bool = False,
    per_device: dict[int, FamilyFit] | None = None,
) -> dict:
    """Device-to-device spread: fit `fam` to each device alone (from the pooled solution; or take the fits
    `per_device` already made), then for every spread field of the family the between-device std of its
    per-device quantity, with the estimation noise removed: sqrt(max(var over devices - mean squared
    standard error, 0)) (method of moments)."""
    theta0 = np.array(list(pooled.params.values()))
    dw_nom = pooled.params["dw_min"] if "dw_min" in pooled.params else pooled.device.dw_min
    rows, covs, used = [], [], []
    for d in tqdm(range(data.n_devices), desc="per-device fits", unit="device", disable=not progress, leave=False):
        if per_device is not None:
            if d not in per_device:
                continue
            f = per_device[d]
        else:
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
        out["quantities"][fld] = {
            "mean": mean,
            "std": float(vals.std(ddof=1)),
            "estimation_std": float(math.sqrt(noise.mean())),
            "between_std": between,
            "per_device": vals.tolist(),
        }
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
            y, x = np.abs(data.dw[m]) / data.k[m], s[m]  # step per pulse
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
