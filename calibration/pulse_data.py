"""Pulse traces as fit data: the weight map from conductance to weight, the per-pulse increments regressed
on an anchor point between their two reads, and the model of one increment.

The data are the per-pulse increments of every trace, mapped to weights by w = (G - g_mid) / g_scale. Each
increment dw_k = w_{k+1} - w_k is regressed on its anchor x_k = w_k + a dw_k, the point at fraction a of the
way between its two reads. Two noises enter the reads: read noise (std sigma_r, fresh in every read) and the
cycle-to-cycle noise of the pulse itself (variance v of the step). The anchor's error is uncorrelated with the
increment's noise when a (v + 2 sigma_r^2) = sigma_r^2, so a = sigma_r^2 / (v + 2 sigma_r^2) (`increment_noise`,
from moments of consecutive increments before any fit): a = 1/2, the midpoint, where read noise dominates
(regressing on w_k would pull every slope toward -1), a = 0, the start, where cycle noise dominates (the
midpoint carries half of it: where a device rests at a hard bound under cycle noise of several steps, its
pulses that ended at the bound were seen from a midpoint inside it, which biased the fitted family). The model
of an increment is the family's mean step from its start x -+ a s, clipped by the room left to the element's
bound:

    up:   dw = min(dw_min q_plus(start),  (w_max - x)^+ / (1 - a))
    down: dw = -min(dw_min q_minus(start), (x - w_min)^+ / (1 - a))

((w_max - x) / (1 - a) is the step that ends exactly on the bound, seen from its anchor). Parameters come from
scipy's least squares; their covariance from the Jacobian, as the sandwich (J'J)^-1 S (J'J)^-1 with S
summing g_k g_k' and the lag-1 cross terms of consecutive increments (g_k = J_k r_k), which holds for the
heteroscedastic (multiplicative) cycle noise and for the lag-1 correlation that read noise puts into
increments. Families are ranked by AIC and BIC of the Gaussian least-squares likelihood.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from aimc.calibration.censored import clipped_normal_mean
from aimc.calibration.gls import Whitener
from aimc.calibration.increment_kernels import element_args, mean_steps_kernel, noise_form, single_pulse_kernel
from aimc.calibration.quality import outliers, robust_scale, sparse_devices
from aimc.calibration.traces import TraceSet
from aimc.devices import DeviceConfig
from aimc.devices.response_step import DW_DOWN, DW_UP


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
        return {
            "g_mid": self.g_mid,
            "g_scale": self.g_scale,
            "unit": self.unit,
            "origin": self.origin,
            "formula": "w = (G - g_mid) / g_scale",
        }


def _extremes(values: np.ndarray, frac: float = 0.02) -> tuple[float, float]:
    """Median of the lowest and of the highest `frac` of the values (at least 3 each): a plateau estimate
    that a glitch read does not move (a mean of the top 2% would take 1/k of the glitch)."""
    v = np.sort(values)
    k = max(3, int(frac * len(v)))
    return float(np.median(v[:k])), float(np.median(v[-k:]))


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
    anchor: the fraction a of each increment where the model sees it (module docstring; `x`);
    lo, hi: plateau estimates of the bounds (median over devices); dev_lo, dev_hi: per device; dw0: typical
    step (mean step magnitude in the middle half of the range); k: pulses per increment; row: the TraceSet
    row of each increment's second read; quality: what was left out and why (`pulse_data`); scale: the robust
    std of the weighted increments dw / sqrt(k) about their local median (`quality.robust_scale`, weight units),
    the scale of the fits' robust loss (`family_fit`); read_share: the read noise's share of an increment's
    variance that the fits whiten (`gls`; 0: ordinary least squares)."""

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
    k: np.ndarray
    row: np.ndarray
    quality: dict
    anchor: float = 0.5
    scale: float = float("nan")
    read_share: float = 0.0

    @property
    def n(self) -> int:
        return len(self.dw)

    @functools.cached_property
    def weight(self) -> np.ndarray:
        """Least-squares weight of each increment, 1 / sqrt(k): the cycle noise of k steps adds up."""
        return 1.0 / np.sqrt(self.k)

    def subset(self, sel: np.ndarray) -> PulseData:
        """The increments where sel (a mask) is True, or at the indices sel, in that order (follows kept only
        where the predecessor comes right before)."""
        sel = np.asarray(sel)
        idx = np.flatnonzero(sel) if sel.dtype == bool else sel.astype(np.int64)
        follows = self.follows[idx].copy()
        follows[1:] &= idx[1:] == idx[:-1] + 1
        if len(idx):
            follows[0] = False
        return PulseData(
            self.m[idx],
            self.dw[idx],
            self.up[idx],
            self.device[idx],
            follows,
            self.n_devices,
            self.lo,
            self.hi,
            self.dev_lo,
            self.dev_hi,
            self.dw0,
            self.k[idx],
            self.row[idx],
            self.quality,
            self.anchor,
            self.scale,
            self.read_share,
        )

    @functools.cached_property
    def whiten(self) -> Whitener:
        """The whitening of weighted residuals over the read noise consecutive increments share (`gls`)."""
        return Whitener(self.follows, self.k, self.read_share)

    @functools.cached_property
    def x(self) -> np.ndarray:
        """The anchors w_k + a dw_k = m - (1/2 - a) dw of the increments (the model's regressor)."""
        return self.m - (0.5 - self.anchor) * self.dw

    def predict(self, device: DeviceConfig) -> np.ndarray:
        """Mean increments of `device` at these increments (`predict` with their anchors and pulse counts)."""
        return predict(device, self.x, self.up, self.k, self.anchor)


MAX_LISTED = 50  # outliers listed one by one in the quality record


def pulse_data(traces: TraceSet, wmap: WeightMap, anchor: float | None = None, keep: tuple[int, ...] = ()) -> PulseData:
    """Increments of `traces` in weight units, without the outliers (`quality.outliers`), with the bound and
    step-size estimates the fits start from and a record of what was left out (`quality`). anchor: the fraction
    of each increment the model sees it from (module docstring); None: from the data (`increment_noise`), whose
    moments, the estimated anchor and the one used go to quality["anchor"]. keep: TraceSet rows (of the second
    read) of increments kept although the rule flags them (`predicted_outliers`)."""
    inc = traces.increments()
    up = inc.polarity > 0
    ext = np.array([_extremes(wmap.to_w(traces.trace(k)[2])) for k in range(traces.n_devices)])
    lo, hi = float(np.median(ext[:, 0])), float(np.median(ext[:, 1]))
    if not hi > lo:
        raise ValueError("the traces do not span a conductance range (all reads equal)")
    m, dw = wmap.to_w(inc.g), inc.dg / wmap.g_scale
    bad, expected = outliers(m, dw, up, inc.n_pulses)
    kept = bad & np.isin(inc.row, keep)
    bad &= ~kept
    listed = [
        {
            "at": traces.where(int(r)),
            "after": traces.where(int(r) - 1),
            "polarity": "up" if u else "down",
            "pulses": int(k),
            "increment": float(d),
            "expected": float(e * k),
        }
        for r, u, k, d, e in zip(inc.row[bad], up[bad], inc.n_pulses[bad], dw[bad], expected[bad])
    ]
    keep = ~bad
    n_up, n_down = int((up & keep).sum()), int((~up & keep).sum())
    if n_up < 10 or n_down < 10:
        raise ValueError(
            f"need at least 10 up and 10 down increments (found {n_up} up, {n_down} down); "
            "an increment is two reads of a device with pulses of one polarity between them"
        )
    y = dw / inc.n_pulses
    central = keep & (np.abs(m - 0.5 * (lo + hi)) < 0.25 * (hi - lo))
    dw0 = (
        0.5 * (np.mean(y[up & central]) - np.mean(y[~up & central]))
        if (central & up).any() and (central & ~up).any()
        else float("nan")
    )
    if not dw0 > 0:
        dw0 = float(np.median(np.abs(y[keep])))
    if not dw0 > 0:
        raise ValueError("the traces show no change under pulses (all increments zero)")
    quality = {
        "n_pairs_used": int(keep.sum()),
        "skipped": inc.skipped,
        "n_outliers": int(bad.sum()),
        "outlier_rows": inc.row[bad].tolist(),
        "n_kept_predicted": int(kept.sum()),
        "outliers": listed[:MAX_LISTED],
        "n_multi_pulse": int(np.sum(keep & (inc.n_pulses > 1))),
        "sparse_devices": [traces.devices[d] for d in sparse_devices(inc.device[keep], up[keep], traces.n_devices)],
    }
    full = PulseData(
        m,
        dw,
        up,
        inc.device,
        inc.follows,
        traces.n_devices,
        lo,
        hi,
        ext[:, 0],
        ext[:, 1],
        dw0,
        inc.n_pulses,
        inc.row,
        quality,
    )
    data = full if not bad.any() else full.subset(keep)
    noise = increment_noise(data)
    noise["used"] = noise["anchor"] if anchor is None else float(anchor)
    quality["anchor"] = noise
    scale = robust_scale(data.m, data.dw * data.weight, data.up)
    quality["robust_scale"] = scale
    return replace(data, anchor=noise["used"], scale=scale)


K_PREDICTED = 5.0  # an outlier within this many of the fitted model's standard deviations is a real step


def predicted_outliers(traces: TraceSet, wmap: WeightMap, data: PulseData, device: DeviceConfig, read_noise: float):
    """TraceSet rows of the outliers `data` left out that the fitted `device` (with its cycle noise) predicts:
    within K_PREDICTED standard deviations of its mean increment, the variance of k noisy steps plus 2 read
    variances (a first step off a bound of a device whose steps grow steeply there looks like a glitch to the
    model-free rule, not to the model)."""
    rows = np.asarray(data.quality.get("outlier_rows", []), np.int64)
    if not len(rows):
        return []
    inc = traces.increments()
    sel = np.isin(inc.row, rows)
    m, dw, up, k = wmap.to_w(inc.g[sel]), inc.dg[sel] / wmap.g_scale, inc.polarity[sel] > 0, inc.n_pulses[sel]
    x = m - (0.5 - data.anchor) * dw
    mean = predict(device, x, up, k, data.anchor)
    sd = step_sd(device, x, np.abs(mean) / k, up)
    var = k * (0.0 if sd is None else sd) ** 2 + 2.0 * read_noise**2
    return inc.row[sel][np.abs(dw - mean) <= K_PREDICTED * np.sqrt(var)].tolist()


MIN_TRIPLES = 50  # consecutive single-pulse increment triples the anchor's noise moments need


def increment_noise(data: PulseData) -> dict:
    """Read noise sigma_r^2 and the per-pulse increment variance v + 2 sigma_r^2 from triples of consecutive
    single-pulse increments (a, b, c) of one polarity inside the middle 80% of their device's range, before any
    fit: with D1 = b - a and D2 = c - b, E[D1^2] = 2 v + 6 sigma_r^2 and E[D1 D2] = -(v + 4 sigma_r^2) (the mean
    step changes little from one pulse to the next), so sigma_r^2 = -(E[D1^2] + 2 E[D1 D2]) / 2. Returns those
    (weight units^2), the triples used and the anchor sigma_r^2 / (v + 2 sigma_r^2) in [0, 1/2] (module
    docstring; 1/2 with fewer than MIN_TRIPLES triples)."""
    i = np.flatnonzero(data.follows[1:-1] & data.follows[2:]) + 1  # b = i: a = i - 1, c = i + 1 consecutive
    span = data.dev_hi[data.device] - data.dev_lo[data.device]
    inside = (data.k == 1) & (np.abs(data.m - 0.5 * (data.dev_hi + data.dev_lo)[data.device]) < 0.4 * span)
    i = i[inside[i - 1] & inside[i] & inside[i + 1] & (data.up[i - 1] == data.up[i]) & (data.up[i] == data.up[i + 1])]
    out = {"anchor": 0.5, "read_variance": float("nan"), "increment_variance": float("nan"), "n_triples": len(i)}
    if len(i) < MIN_TRIPLES:
        return out
    d1, d2 = data.dw[i] - data.dw[i - 1], data.dw[i + 1] - data.dw[i]
    e11, e12 = float(np.mean(d1 * d1)), float(np.mean(d1 * d2))
    read = max(-(e11 + 2.0 * e12) / 2.0, 0.0)
    total = e11 / 2.0 - read
    out.update(
        read_variance=read, increment_variance=total, anchor=min(max(read / total, 0.0), 0.5) if total > 0 else 0.5
    )
    return out


def mean_step(device: DeviceConfig, m: np.ndarray, up: np.ndarray, element: tuple | None = None) -> np.ndarray:
    """Mean step magnitude dw_min q_plus(m) (up) or dw_min q_minus(m) (down) of the nominal element (element:
    its `increment_kernels.element_args`, when the caller has them)."""
    return mean_steps_kernel(
        np.ascontiguousarray(m, dtype=float), np.ascontiguousarray(up, dtype=bool), *(element or element_args(device))
    )


def step_sd(device: DeviceConfig, w: np.ndarray, s: np.ndarray, up: np.ndarray) -> np.ndarray | None:
    """Std of one pulse's cycle-to-cycle noise at start weight w with mean step magnitude s (weight units), as
    the kernels draw it (devices.pulses.noisy_pulse): sigma s (multiplicative; ExpStep adds sigma (dw_min_std_add
    + dw_min_std_slope |w|)) or sigma times the element's step at its reference point (additive). None
    without noise (dw_min_std 0)."""
    form = noise_form(device)
    if form is None:
        return None
    sigma = float(device.dw_min_std)
    if form == "additive":
        ep = device.nominal().ep[0, 0]
        return sigma * np.where(up, ep[DW_UP], ep[DW_DOWN])
    extra = getattr(device, "dw_min_std_add", 0.0) + getattr(device, "dw_min_std_slope", 0.0) * np.abs(w)
    return sigma * (s + extra)


def rooms(x: np.ndarray, up: np.ndarray, lo: float, hi: float, anchor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(ahead, behind): the largest increment toward the pulse's bound and away from it of pulses seen from
    their anchors x, (w_max - x)^+ / (1 - anchor) and (x - w_min)^+ / (1 - anchor) up, mirrored down (anchor
    0: x is where the pulse started; 1/2: the midpoint, 2 (w_max - x)^+); `increment_kernels._room` is the
    same, element by element, inside the kernels."""
    ahead = np.maximum(np.where(up, hi - x, x - lo), 0.0) / (1.0 - anchor)
    behind = np.maximum(np.where(up, x - lo, hi - x), 0.0) / (1.0 - anchor)
    return ahead, behind


def _noisy_mean(
    device: DeviceConfig, w: np.ndarray, s: np.ndarray, up: np.ndarray, behind: np.ndarray, ahead: np.ndarray
) -> np.ndarray:
    """Mean step magnitude of a pulse from w with mean s whose noisy step is clipped to [-behind, ahead]
    (`censored`); min(s, ahead) without noise, as before the noise was modelled."""
    sd = step_sd(device, w, s, up)
    if sd is None:
        return np.minimum(s, ahead)
    return clipped_normal_mean(s, sd, -behind, ahead)


def compose(device: DeviceConfig, w: np.ndarray, up: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Weight after k mean steps from w (each clipped to the bounds; with cycle noise each the mean of the
    clipped noisy step taken at the mean weight, an approximation that leaves out the spread of the weight
    over the steps), minus w (arrays of one length)."""
    lo, hi = device.bounds
    end = np.array(w, float)
    element = element_args(device)
    for j in range(int(k.max(initial=0))):
        act = k > j
        e, u = end[act], up[act]
        step = mean_step(device, e, u, element)
        if device.dw_min_std > 0:
            ahead, behind = rooms(e, u, lo, hi)
            step = _noisy_mean(device, e, step, u, behind, ahead)
        end[act] = np.clip(e + np.where(u, step, -step), lo, hi)
    return end - w


def predict(
    device: DeviceConfig, x: np.ndarray, up: np.ndarray, k: np.ndarray | None = None, anchor: float = 0.5
) -> np.ndarray:
    """Mean increment of a pulse seen from its anchor x = w_start + anchor dw (module docstring; anchor 1/2:
    the midpoint): the clipped mean step, evaluated where the pulse started, x -+ anchor s (one fixed-point
    step; the error is of order anchor^2 dw_min^3); with cycle noise (dw_min_std > 0) the mean of the noisy
    step clipped to [-(x - w_min)^+, (w_max - x)^+] / (1 - anchor) (up; mirrored down), a censored normal
    (`censored`). k: pulses per increment (default 1); an increment of k > 1 pulses composes k mean steps from
    its start x - anchor D, with D from two fixed-point steps (D_0 from x, D_1 from x - anchor D_0; relative
    error of order (k dw_min q' anchor)^3; with noise see `compose`)."""
    lo, hi = device.bounds
    x, up = np.ascontiguousarray(x, dtype=float), np.ascontiguousarray(up, dtype=bool)
    start, s, out = single_pulse_kernel(x, up, *element_args(device), float(lo), float(hi), float(anchor))
    sd = step_sd(device, start, s, up)
    multi = k is not None and np.any(k > 1)
    if sd is None and not multi:
        return out
    room, back = rooms(x, up, lo, hi, anchor)
    if sd is not None:
        mag = clipped_normal_mean(s, sd, -back, room)
        out = np.where(up, mag, -mag)
    if multi:
        sel = k > 1
        xs, us, ks = x[sel], up[sel], k[sel]
        d = compose(device, xs, us, ks)
        for _ in range(2):
            d = compose(device, xs - anchor * d, us, ks)
        out[sel] = np.where(us, np.minimum(d, room[sel]), np.maximum(d, -room[sel]))
    return out


def model_trace(device: DeviceConfig, traces: TraceSet, wmap: WeightMap, d: int, max_reads: int = 4000) -> dict:
    """Device d's measured reads (weight units) beside the mean trace of `device` under the same pulses:
    from the first read, each read k pulses after the previous one of the same polarity moves the model by
    k mean steps; where the pulses between two reads are unknown (polarity 0, or k > 1 after a read of the
    other polarity) the model restarts at the measured read. At most max_reads reads."""
    pulse, pol, g = (a[:max_reads] for a in traces.trace(d))
    w = wmap.to_w(g)
    model = np.empty(len(w))
    model[0] = w[0]
    for j in range(1, len(w)):
        gap = int(pulse[j] - pulse[j - 1])
        if pol[j] == 0 or (gap > 1 and pol[j - 1] != pol[j]):
            model[j] = w[j]
            continue
        up = np.array([pol[j] > 0])
        model[j] = model[j - 1] + compose(device, model[j - 1 : j], up, np.array([gap]))[0]
    return {"device": traces.devices[d], "pulse": pulse.tolist(), "measured": w.tolist(), "model": model.tolist()}
