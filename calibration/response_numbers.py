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
from functools import cache
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar

from aimc.calibration.protocols import measure_cycles
from aimc.devices import ConductanceArray, DeviceConfig


def _stats(v: np.ndarray) -> dict:
    v = np.asarray(v, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return {"mean": None, "std": None, "p5": None, "p95": None}
    return {
        "mean": float(v.mean()),
        "std": float(v.std()),
        "p5": float(np.percentile(v, 5)),
        "p95": float(np.percentile(v, 95)),
    }


def implicit_penalty(w: np.ndarray, g_over_f: np.ndarray, w_sym: float) -> np.ndarray:
    """R_c(w) = integral of G/F from w_sym to w (trapezoid on the increasing grid w)."""
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (g_over_f[1:] + g_over_f[:-1]) * np.diff(w))])
    return cum - np.interp(w_sym, w, cum)


def neurosim_a(x: np.ndarray, y: np.ndarray) -> float:
    """NeuroSim's normalised non-linearity A / P_max of a normalised curve y(x) (x = P / P_max and y from 0 to
    1): the r of the least-squares fit of y = (1 - e^(-x/r)) / (1 - e^(-1/r)), the curve of G(P) = B (1 -
    e^(-P/A)) + G_min with B = (G_max - G_min) / (1 - e^(-P_max/A)) (DNN+NeuroSim), searched over 1e-3 <=
    r <= 1e3 in log r; 1e3 stands for a straight line."""

    def sse(log_r: float) -> float:
        r = math.exp(log_r)
        return float(np.sum((y - np.expm1(-x / r) / math.expm1(-1.0 / r)) ** 2))

    res = minimize_scalar(sse, bounds=(math.log(1e-3), math.log(1e3)), method="bounded", options={"xatol": 1e-8})
    return float(math.exp(res.x))


NEUROSIM_TABLE = Path(__file__).with_name("data") / "neurosim_nonlinearity.csv"


@cache
def _neurosim_table() -> tuple[np.ndarray, np.ndarray]:
    """(labels 0.01 .. 9.00, A / P_max of each, decreasing) of `NEUROSIM_TABLE`."""
    t = np.loadtxt(NEUROSIM_TABLE, delimiter=",", skiprows=3)
    return t[:, 0], t[:, 1]


def neurosim_label(a_over_pmax: float) -> float:
    """DNN+NeuroSim's nonlinearity label (0.01 to 9, the number its device tables quote, e.g. "2.4/-4.88" for
    LTP/LTD of Ag:a-Si) of a normalised A / P_max (`neurosim_a`): NeuroSim defines the label by its table
    (MLP_NeuroSim V3.0, documents/Nonlinearity-NormA.htm, shipped as `NEUROSIM_TABLE`), so this interpolates
    the table, linearly in log A between its rows 0.01 apart. 0.0 above the table's 126.3 (a straight line
    within 0.01), NaN below its 0.0228 (more non-linear than label 9)."""
    labels, a = _neurosim_table()
    if not a_over_pmax >= a[-1]:
        return math.nan
    if a_over_pmax > a[0]:
        return 0.0
    return float(np.interp(-math.log(a_over_pmax), -np.log(a), labels))


def crossing(device: DeviceConfig, n_grid: int = 4001, measured: tuple[float, float] | None = None) -> dict:
    """Pulses the mean step needs to cross the range, and the non-linearity of the potentiation (LTP) and
    depression (LTD) curves, in the continuum limit: P(w) = integral of dw / step(w) from the starting bound
    to within dw_min / 2 of the other (a soft bound is approached only asymptotically). NL is the largest
    distance of the normalised curve (w - start) / range against P / P_total from the straight line, a
    fraction of the range (0: a constant step); A_over_Pmax is NeuroSim's A / P_max of the same curve
    normalised to end at 1 (`neurosim_a`), neurosim_label its label (`neurosim_label`; NeuroSim writes LTD's
    with a minus sign). measured: the weight range (lo, hi) the reads cover; the curves then
    run between its ends where those lie inside the bounds, as a measured LTP/LTD pair does."""
    b_lo, b_hi = device.bounds
    half = 0.5 * device.dw_min
    lo, hi = (b_lo, b_hi) if measured is None else (max(b_lo, measured[0]), min(b_hi, measured[1]))
    if not lo < hi:
        raise ValueError(f"measured range {measured} does not overlap the bounds ({b_lo}, {b_hi})")
    out = {}
    ends = (("up", device.q_plus, lo, min(hi, b_hi - half)), ("down", device.q_minus, hi, max(lo, b_lo + half)))
    for name, q, a, b in ends:
        w = np.linspace(a, b, n_grid)
        step = np.maximum(q(w) * device.dw_min, 1e-12 * device.dw_min)
        p = np.concatenate([[0.0], np.cumsum(0.5 * (1 / step[1:] + 1 / step[:-1]) * np.abs(np.diff(w)))])
        frac = np.abs(w - a) / (hi - lo)
        out[f"pulses_{name}"] = float(p[-1])
        label = "LTP" if name == "up" else "LTD"
        out[f"NL_{label}"] = float(np.max(np.abs(frac - p / p[-1] * frac[-1])))
        out[f"A_over_Pmax_{label}"] = neurosim_a(p / p[-1], frac / frac[-1])
        out[f"neurosim_label_{label}"] = neurosim_label(out[f"A_over_Pmax_{label}"])
    return out


def _zero(v: float, scale: float) -> float:
    """v, or 0.0 when it is zero within rounding (|v| < 1e-9 scale)."""
    return 0.0 if abs(v) < 1e-9 * scale else float(v)


def device_numbers(
    device: DeviceConfig,
    n_elements: int = 64,
    seed: int = 0,
    n_grid: int = 201,
    max_pulses: int = 2000,
    measured: tuple[float, float] | None = None,
) -> dict:
    """The report numbers of one device (weight units), with the curves behind them; measured: the weight
    range a fit's reads cover, which adds "crossing_measured" (`crossing` between its ends).

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
    if math.isfinite(w_sym_raw):
        w_sym_raw = _zero(w_sym_raw, hi - lo)
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
            bands[key] = {
                "p5": np.nanpercentile(v, 5, axis=0).tolist(),
                "p95": np.nanpercentile(v, 95, axis=0).tolist(),
            }
    sym = arr.symmetric_points()[:, 0]
    sym = np.where(np.abs(sym) < 1e-9 * (hi - lo), 0.0, sym)
    mid = 0.5 * (b_lo + b_hi)
    step_mid = 0.5 * (arr.element_steps(True, mid[:, None]) + arr.element_steps(False, mid[:, None]))[:, 0]
    states = np.divide(b_hi - b_lo, step_mid, out=np.full(n_elements, np.nan), where=step_mid > 0)

    n_pulses = int(min(math.ceil(1.5 * device.n_states), max_pulses))
    tr = measure_cycles(
        device, n_pulses=n_pulses, n_cycles=2, n_devices=n_elements, seed=seed, g_mid=0.0, g_scale=1.0, unit="a.u."
    )
    reads = tr.conductance.reshape(n_elements, -1)
    extra = {} if measured is None else {"crossing_measured": crossing(device, measured=measured)}
    return {
        **extra,
        "kind": device.kind,
        "device": device.model_dump(mode="json"),
        "bounds": [lo, hi],
        "dynamic_range": hi - lo,
        "dw_min": device.dw_min,
        "n_states": device.n_states,
        "crossing": crossing(device),
        "symmetric_point": float(w_sym_raw) if math.isfinite(w_sym_raw) else None,
        "asymmetry": {"max_abs_G": float(np.max(np.abs(G))), "mean_abs_G_over_F": float(np.nanmean(np.abs(gf)))},
        "penalty": {"R_c_at_bounds": [float(rc[0]), float(rc[-1])], "stiffness_at_symmetric_point": stiffness},
        "spread": {
            "symmetric_point": _stats(sym),
            "dynamic_range": _stats(b_hi - b_lo),
            "w_min": _stats(b_lo),
            "w_max": _stats(b_hi),
            "step_at_mid_range": _stats(step_mid),
            "n_states": _stats(states),
        },
        "curves": {
            "w": w.tolist(),
            "q_plus": qp.tolist(),
            "q_minus": qm.tolist(),
            "F": F.tolist(),
            "G": G.tolist(),
            "G_over_F": gf.tolist(),
            "R_c": rc.tolist(),
            "drift": (-G).tolist(),
            "step": (device.dw_min * F).tolist(),
            "bands": bands,
        },
        "traces": {
            "pulse": np.arange(reads.shape[1]).tolist(),
            "mean": reads.mean(0).tolist(),
            "p5": np.percentile(reads, 5, axis=0).tolist(),
            "p95": np.percentile(reads, 95, axis=0).tolist(),
            "n_pulses": n_pulses,
            "n_cycles": 2,
        },
    }
