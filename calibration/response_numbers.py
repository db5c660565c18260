"""The numbers a report gives for one device, in weight units: bounds, dynamic range, dw_min, number of
states, symmetric point, asymmetry, the implicit penalty, their spread over drawn elements, the response
curves with their bands and up/down cycle traces.

With the response functions q_plus (up) and q_minus (down), F = (q_minus + q_plus) / 2 is the symmetric and
G = (q_minus - q_plus) / 2 the asymmetric part. Analog SGD drifts by -alpha E|grad| G(w) per step and
minimises f + <E|grad|, R_c>, with the implicit penalty R_c(w) the antiderivative of G/F from the symmetric
point ([R1] Wu et al., NeurIPS 2025, arXiv:2502.06309, Theorem 1).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from aimc.calibration.protocols import measure_cycles
from aimc.devices import ConductanceArray, DeviceConfig


def _stats(v: np.ndarray) -> dict:
    v = np.asarray(v, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return {"mean": None, "std": None, "p5": None, "p95": None}
    return {"mean": float(v.mean()), "std": float(v.std()), "p5": float(np.percentile(v, 5)),
            "p95": float(np.percentile(v, 95))}


def implicit_penalty(w: np.ndarray, g_over_f: np.ndarray, w_sym: float) -> np.ndarray:
    """R_c(w) = integral of G/F from w_sym to w (trapezoid on the increasing grid w)."""
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (g_over_f[1:] + g_over_f[:-1]) * np.diff(w))])
    return cum - np.interp(w_sym, w, cum)


def device_numbers(device: DeviceConfig, n_elements: int = 64, seed: int = 0, n_grid: int = 201,
                   max_pulses: int = 2000) -> dict:
    """The report numbers of one device (weight units), with the curves behind them.

    n_elements elements drawn with the device's spread give the bands (5th to 95th percentile); the traces
    are n_cycles = 2 cycles of min(1.5 n_states, max_pulses) up then down pulses from the low state, read
    without read noise.
    """
    lo, hi = device.bounds
    w = np.linspace(lo, hi, n_grid)
    qp, qm = device.q_plus(w), device.q_minus(w)
    F, G = 0.5 * (qm + qp), 0.5 * (qm - qp)
    gf = np.divide(G, F, out=np.full_like(G, np.nan), where=F > 0)
    w_sym_raw = device.symmetric_point()
    w_sym = float(w_sym_raw) if math.isfinite(w_sym_raw) else 0.5 * (lo + hi)
    gf0 = np.nan_to_num(gf)
    rc = implicit_penalty(w, gf0, w_sym)
    stiffness = float(np.interp(w_sym, w, np.gradient(gf0, w)))

    arr = ConductanceArray(n_elements, 1, device, seed=seed)
    el_qp = np.stack([arr.element_steps(True, np.full(arr.shape, v))[:, 0] for v in w], axis=1) / device.dw_min
    el_qm = np.stack([arr.element_steps(False, np.full(arr.shape, v))[:, 0] for v in w], axis=1) / device.dw_min
    b_lo, b_hi = (b[:, 0] for b in arr.bounds)
    inside = (w[None, :] >= b_lo[:, None]) & (w[None, :] <= b_hi[:, None])
    el = {"q_plus": el_qp, "q_minus": el_qm, "F": 0.5 * (el_qp + el_qm), "G": 0.5 * (el_qm - el_qp)}
    bands = {}
    for key, val in el.items():
        v = np.where(inside, val, np.nan)
        with warnings.catch_warnings():  # weights outside every element's bounds: an all-NaN column, band NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            bands[key] = {"p5": np.nanpercentile(v, 5, axis=0).tolist(),
                          "p95": np.nanpercentile(v, 95, axis=0).tolist()}
    sym = arr.symmetric_points()[:, 0]
    mid = 0.5 * (b_lo + b_hi)
    step_mid = 0.5 * (arr.element_steps(True, mid[:, None]) + arr.element_steps(False, mid[:, None]))[:, 0]
    states = np.divide(b_hi - b_lo, step_mid, out=np.full(n_elements, np.nan), where=step_mid > 0)

    n_pulses = int(min(math.ceil(1.5 * device.n_states), max_pulses))
    tr = measure_cycles(device, n_pulses=n_pulses, n_cycles=2, n_devices=n_elements, seed=seed, g_mid=0.0,
                        g_scale=1.0, unit="a.u.")
    reads = tr.conductance.reshape(n_elements, -1)
    return {
        "kind": device.kind, "device": device.model_dump(mode="json"),
        "bounds": [lo, hi], "dynamic_range": hi - lo, "dw_min": device.dw_min, "n_states": device.n_states,
        "symmetric_point": float(w_sym_raw) if math.isfinite(w_sym_raw) else None,
        "asymmetry": {"max_abs_G": float(np.max(np.abs(G))), "mean_abs_G_over_F": float(np.nanmean(np.abs(gf)))},
        "penalty": {"R_c_at_bounds": [float(rc[0]), float(rc[-1])], "stiffness_at_symmetric_point": stiffness},
        "spread": {"symmetric_point": _stats(sym), "dynamic_range": _stats(b_hi - b_lo), "w_min": _stats(b_lo),
                   "w_max": _stats(b_hi), "step_at_mid_range": _stats(step_mid), "n_states": _stats(states)},
        "curves": {"w": w.tolist(), "q_plus": qp.tolist(), "q_minus": qm.tolist(), "F": F.tolist(), "G": G.tolist(),
                   "G_over_F": gf.tolist(), "R_c": rc.tolist(), "drift": (-G).tolist(),
                   "step": (device.dw_min * F).tolist(), "bands": bands},
        "traces": {"pulse": np.arange(reads.shape[1]).tolist(), "mean": reads.mean(0).tolist(),
                   "p5": np.percentile(reads, 5, axis=0).tolist(), "p95": np.percentile(reads, 95, axis=0).tolist(),
                   "n_pulses": n_pulses, "n_cycles": 2},
    }
