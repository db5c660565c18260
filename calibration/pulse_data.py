"""Pulse traces as fit data: the weight map from conductance to weight, the per-pulse increments regressed
on their midpoints, and the model of one increment.

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

import functools
import math
from dataclasses import dataclass

import numpy as np

from aimc.calibration.censored import clipped_normal_mean
from aimc.calibration.increment_kernels import element_args, mean_steps_kernel, single_pulse_kernel
from aimc.calibration.quality import outliers, sparse_devices
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
        return {"g_mid": self.g_mid, "g_scale": self.g_scale, "unit": self.unit, "origin": self.origin,
                "formula": "w = (G - g_mid) / g_scale"}


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
    lo, hi: plateau estimates of the bounds (median over devices); dev_lo, dev_hi: per device; dw0: typical
    step (mean step magnitude in the middle half of the range); k: pulses per increment; row: the TraceSet
    row of each increment's second read; quality: what was left out and why (`pulse_data`)."""

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
        return PulseData(self.m[idx], self.dw[idx], self.up[idx], self.device[idx], follows, self.n_devices,
                         self.lo, self.hi, self.dev_lo, self.dev_hi, self.dw0, self.k[idx], self.row[idx],
                         self.quality)

    def predict(self, device: DeviceConfig) -> np.ndarray:
        """Mean increments of `device` at these increments (`predict` with their pulse counts)."""
        return predict(device, self.m, self.up, self.k)


MAX_LISTED = 50  # outliers listed one by one in the quality record


def pulse_data(traces: TraceSet, wmap: WeightMap) -> PulseData:
    """Increments of `traces` in weight units, without the outliers (`quality.outliers`), with the bound and
    step-size estimates the fits start from and a record of what was left out (`quality`)."""
    inc = traces.increments()
    up = inc.polarity > 0
    ext = np.array([_extremes(wmap.to_w(traces.trace(k)[2])) for k in range(traces.n_devices)])
    lo, hi = float(np.median(ext[:, 0])), float(np.median(ext[:, 1]))
    if not hi > lo:
        raise ValueError("the traces do not span a conductance range (all reads equal)")
    m, dw = wmap.to_w(inc.g), inc.dg / wmap.g_scale
    bad, expected = outliers(m, dw, up, inc.n_pulses)
    listed = [{"at": traces.where(int(r)), "after": traces.where(int(r) - 1), "polarity": "up" if u else "down",
               "pulses": int(k), "increment": float(d), "expected": float(e * k)}
              for r, u, k, d, e in zip(inc.row[bad], up[bad], inc.n_pulses[bad], dw[bad], expected[bad])]
    keep = ~bad
    n_up, n_down = int((up & keep).sum()), int((~up & keep).sum())
    if n_up < 10 or n_down < 10:
        raise ValueError(f"need at least 10 up and 10 down increments (found {n_up} up, {n_down} down); "
                         "an increment is two reads of a device with pulses of one polarity between them")
    y = dw / inc.n_pulses
    central = keep & (np.abs(m - 0.5 * (lo + hi)) < 0.25 * (hi - lo))
    dw0 = 0.5 * (np.mean(y[up & central]) - np.mean(y[~up & central])) if (central & up).any() and \
        (central & ~up).any() else float("nan")
    if not dw0 > 0:
        dw0 = float(np.median(np.abs(y[keep])))
    if not dw0 > 0:
        raise ValueError("the traces show no change under pulses (all increments zero)")
    quality = {"n_pairs_used": int(keep.sum()), "skipped": inc.skipped, "n_outliers": int(bad.sum()),
               "outliers": listed[:MAX_LISTED], "n_multi_pulse": int(np.sum(keep & (inc.n_pulses > 1))),
               "sparse_devices": [traces.devices[d] for d in sparse_devices(inc.device[keep], up[keep],
                                                                             traces.n_devices)]}
    full = PulseData(m, dw, up, inc.device, inc.follows, traces.n_devices, lo, hi, ext[:, 0], ext[:, 1], dw0,
                     inc.n_pulses, inc.row, quality)
    return full if not bad.any() else full.subset(keep)


def mean_step(device: DeviceConfig, m: np.ndarray, up: np.ndarray, element: tuple | None = None) -> np.ndarray:
    """Mean step magnitude dw_min q_plus(m) (up) or dw_min q_minus(m) (down) of the nominal element (element:
    its `increment_kernels.element_args`, when the caller has them)."""
    return mean_steps_kernel(np.ascontiguousarray(m, dtype=float), np.ascontiguousarray(up, dtype=bool),
                             *(element or element_args(device)))


def step_sd(device: DeviceConfig, w: np.ndarray, s: np.ndarray, up: np.ndarray) -> np.ndarray | None:
    """Std of one pulse's cycle-to-cycle noise at start weight w with mean step magnitude s (weight units), as
    the kernels draw it (devices.pulses.noisy_pulse): sigma s (multiplicative; ExpStep adds sigma (dw_min_std_add
    + dw_min_std_slope |w|)) or sigma times the element's step at its reference point (additive). None
    without noise (dw_min_std 0)."""
    sigma = float(device.dw_min_std)
    if sigma == 0.0:
        return None
    if getattr(device, "noise", "") == "additive" or getattr(device, "mult_noise", True) is False:
        ep = device.nominal().ep[0, 0]
        return sigma * np.where(up, ep[DW_UP], ep[DW_DOWN])
    extra = getattr(device, "dw_min_std_add", 0.0) + getattr(device, "dw_min_std_slope", 0.0) * np.abs(w)
    return sigma * (s + extra)


def _noisy_mean(device: DeviceConfig, w: np.ndarray, s: np.ndarray, up: np.ndarray, behind: np.ndarray,
                ahead: np.ndarray) -> np.ndarray:
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
            ahead, behind = np.where(u, hi - e, e - lo), np.where(u, e - lo, hi - e)
            step = _noisy_mean(device, e, step, u, np.maximum(behind, 0.0), np.maximum(ahead, 0.0))
        end[act] = np.clip(e + np.where(u, step, -step), lo, hi)
    return end - w


def predict(device: DeviceConfig, m: np.ndarray, up: np.ndarray, k: np.ndarray | None = None) -> np.ndarray:
    """Mean increment of a pulse seen from midpoint weight m: the clipped mean step (module docstring),
    evaluated where the pulse started, m -+ s/2 (one fixed-point step; the error is of order dw_min^3); with
    cycle noise (dw_min_std > 0) the mean of the noisy step clipped to [-2 (m - w_min)^+, 2 (w_max - m)^+]
    (up; mirrored down), a censored normal (`censored`; the room is seen from the midpoint, an approximation
    whose limits docs/calibration.md gives). k: pulses per increment (default
    1); an increment of k > 1 pulses composes k mean steps from its start m - D/2, with D from two fixed-point
    steps (D_0 from m, D_1 from m - D_0/2; relative error of order (k dw_min q' / 2)^3; with noise see
    `compose`)."""
    lo, hi = device.bounds
    m, up = np.ascontiguousarray(m, dtype=float), np.ascontiguousarray(up, dtype=bool)
    start, s, out = single_pulse_kernel(m, up, *element_args(device), float(lo), float(hi))
    sd = step_sd(device, start, s, up)
    multi = k is not None and np.any(k > 1)
    if sd is None and not multi:
        return out
    room = np.maximum(np.where(up, hi - m, m - lo), 0.0) * 2.0
    if sd is not None:
        back = np.maximum(np.where(up, m - lo, hi - m), 0.0) * 2.0
        mag = clipped_normal_mean(s, sd, -back, room)
        out = np.where(up, mag, -mag)
    if multi:
        sel = k > 1
        ms, us, ks = m[sel], up[sel], k[sel]
        d = compose(device, ms, us, ks)
        for _ in range(2):
            d = compose(device, ms - 0.5 * d, us, ks)
        out[sel] = np.where(us, np.minimum(d, room[sel]), np.maximum(d, -room[sel]))
    return out


def model_trace(device: DeviceConfig, traces: TraceSet, wmap: WeightMap, d: int,
                max_reads: int = 4000) -> dict:
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
        model[j] = model[j - 1] + compose(device, model[j - 1:j], up, np.array([gap]))[0]
    return {"device": traces.devices[d], "pulse": pulse.tolist(), "measured": w.tolist(), "model": model.tolist()}
