"""Response-function reports: what a device will do to training, as one HTML page, PNG figures and JSON.

For each device (a preset, a device file, or a fit): conductance against pulse number over up/down cycles
with the device-to-device band; q_plus, q_minus, F, G, G/F over the weight range with their spread across
elements; the symmetric point, dynamic range, number of states, the step dw_min F(w) at each w; the implicit
penalty R_c(w) of Analog SGD (antiderivative of G/F from the symmetric point, R1 Theorem 1) and its predicted
drift per step, -G(w) in units of alpha E|grad| (R1 Theorem 1; R1 = Wu et al., NeurIPS 2025,
arXiv:2502.06309). For a fit also: the data over the
models, residuals, the parameter table with intervals and the family ranking. Several devices side by side
get overlay figures and one table.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from aimc.calibration.fit import FitResult, WeightMap  # noqa: E402
from aimc.calibration.protocols import measure_cycles  # noqa: E402
from aimc.common.files import (  # noqa: E402
    atomic_write_bytes,
    atomic_write_text,
    json_safe,  # noqa: E402
)
from aimc.devices import PRESETS, ConductanceArray, DeviceConfig, load_device  # noqa: E402


@dataclass
class Subject:
    """One device of a report: its name, config, weight map (None: weight units only) and fit numbers
    (the `fit.json` summary, None when the device was not fitted)."""

    name: str
    device: DeviceConfig
    weight_map: WeightMap | None = None
    fit: dict | None = None


def resolve(spec: str | DeviceConfig | FitResult, name: str | None = None) -> Subject:
    """A report subject from a preset name, a device file (JSON/TOML), a fit output folder (device.json and
    fit.json), a device config or a FitResult."""
    if isinstance(spec, FitResult):
        return Subject(name or f"fit ({spec.best.kind})", spec.device, spec.weight_map, json_safe(spec.summary()))
    if not isinstance(spec, str):
        return Subject(name or spec.kind, load_device(spec))
    path = Path(spec)
    if spec not in PRESETS and path.is_dir():
        dev_file, fit_file = path / "device.json", path / "fit.json"
        if not dev_file.is_file():
            raise FileNotFoundError(f"{spec!r} is a folder without device.json (not a fit output)")
        subj = resolve(str(dev_file), name or path.name)
        if fit_file.is_file():
            subj.fit = json.loads(fit_file.read_text())
        return subj
    device = load_device(spec)
    wmap = None
    if spec not in PRESETS and path.suffix.lower() == ".json":
        data = json.loads(path.read_text())
        if isinstance(data.get("weight_map"), dict):
            m = data["weight_map"]
            wmap = WeightMap(float(m["g_mid"]), float(m["g_scale"]), str(m.get("unit", "a.u.")),
                             str(m.get("origin", "file")))
    return Subject(name or (spec if spec in PRESETS else path.stem), device, wmap)


# ---------------------------------------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------------------------------------


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
    """The report numbers of one device (weight units; see docs/calibration.md), with the curves behind them.

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
        with np.errstate(all="ignore"):
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


# ---------------------------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------------------------


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _mark_sym(ax, num: dict) -> None:
    if num["symmetric_point"] is not None:
        ax.axvline(num["symmetric_point"], color="0.5", ls=":", lw=1, label="symmetric point")


def fig_traces(num: dict, wmap: WeightMap | None):
    t = num["traces"]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    tf = (lambda v: wmap.to_g(np.asarray(v))) if wmap else (lambda v: np.asarray(v))
    ax.fill_between(t["pulse"], tf(t["p5"]), tf(t["p95"]), alpha=0.3, label="5-95% of elements")
    ax.plot(t["pulse"], tf(t["mean"]), lw=1, label="mean")
    ax.set_xlabel("pulse number")
    ax.set_ylabel(f"conductance ({wmap.unit})" if wmap else "weight")
    ax.set_title(f"{t['n_cycles']} cycles of {t['n_pulses']} up then {t['n_pulses']} down pulses")
    ax.legend(fontsize=8)
    return fig


def fig_response(num: dict):
    c = num["curves"]
    w = np.asarray(c["w"])
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for key, lab in (("q_plus", "q+ (up)"), ("q_minus", "q- (down)")):
        axes[0].plot(w, c[key], label=lab)
        axes[0].fill_between(w, c["bands"][key]["p5"], c["bands"][key]["p95"], alpha=0.2)
    for key in ("F", "G"):
        axes[1].plot(w, c[key], label=key)
        axes[1].fill_between(w, c["bands"][key]["p5"], c["bands"][key]["p95"], alpha=0.2)
    axes[2].plot(w, c["G_over_F"], label="G/F")
    axes[2].axhline(0, color="0.7", lw=0.8)
    for ax, title in zip(axes, ("response", "symmetric / asymmetric part", "R(w) = G/F")):
        _mark_sym(ax, num)
        ax.set_xlabel("weight w")
        ax.set_title(title)
        ax.legend(fontsize=8)
    return fig


def fig_steps(num: dict):
    c = num["curves"]
    w = np.asarray(c["w"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.3))
    dw = num["dw_min"]
    axes[0].plot(w, np.asarray(c["q_plus"]) * dw, label="up step")
    axes[0].plot(w, np.asarray(c["q_minus"]) * dw, label="down step")
    axes[0].plot(w, np.asarray(c["step"]), "k--", lw=1, label="dw_min F(w)")
    axes[0].fill_between(w, np.asarray(c["bands"]["F"]["p5"]) * dw, np.asarray(c["bands"]["F"]["p95"]) * dw,
                         color="k", alpha=0.1, label="5-95% of elements")
    axes[0].set_xlabel("weight w")
    axes[0].set_ylabel("step per pulse (weight units)")
    axes[0].legend(fontsize=8)
    s = num["spread"]["n_states"]
    axes[1].set_title(f"states: nominal {num['n_states']:.0f}, elements {s['p5'] or 0:.0f} to {s['p95'] or 0:.0f}")
    axes[1].bar(["nominal", "mean", "p5", "p95"], [num["n_states"], s["mean"] or 0, s["p5"] or 0, s["p95"] or 0])
    axes[1].set_ylabel("number of states")
    return fig


def fig_penalty(num: dict):
    c = num["curves"]
    w = np.asarray(c["w"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.3))
    axes[0].plot(w, c["R_c"])
    axes[0].set_title("implicit penalty R_c(w) (per unit of E|grad|)")
    axes[1].plot(w, c["drift"])
    axes[1].axhline(0, color="0.7", lw=0.8)
    axes[1].set_title("drift per step, -G(w) (units of alpha E|grad|)")
    for ax in axes:
        _mark_sym(ax, num)
        ax.set_xlabel("weight w")
    return fig


def fig_fit_data(fit: dict):
    d, mc = fit["data"], fit["model_curves"]
    fig, ax = plt.subplots(figsize=(7, 4))
    s = d["sample"]
    m, dw, up = np.asarray(s["m"]), np.asarray(s["dw"]), np.asarray(s["up"], bool)
    ax.scatter(m[up], dw[up], s=2, alpha=0.15, color="C0")
    ax.scatter(m[~up], dw[~up], s=2, alpha=0.15, color="C1")
    for name, col in (("up", "C0"), ("down", "C1")):
        b = d["binned"][name]
        ok = np.asarray(b["count"]) > 0
        ax.errorbar(np.asarray(b["w"])[ok], np.asarray(b["mean"])[ok], np.asarray(b["se"])[ok], fmt="o", ms=3,
                    color=col, label=f"{name}: binned data")
    for k, ls in zip([r["kind"] for r in fit["ranking"][:3]], ("-", "--", ":")):
        ax.plot(mc["w"], mc[k]["up"], color="k", ls=ls, lw=1, label=k)
        ax.plot(mc["w"], mc[k]["down"], color="k", ls=ls, lw=1)
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xlabel("weight at the pulse (midpoint of the two reads)")
    ax.set_ylabel("increment per pulse")
    ax.set_title("data over the best three models")
    ax.legend(fontsize=7)
    return fig


def fig_fit_residuals(fit: dict):
    best = fit["families"][fit["best"]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.3))
    for name, col in (("up", "C0"), ("down", "C1")):
        b = best["diagnostics"]["binned_residuals"][name]
        ok = np.asarray(b["count"]) >= 5
        axes[0].errorbar(np.asarray(b["w"])[ok], np.asarray(b["mean"])[ok], np.asarray(b["se"])[ok], fmt="o", ms=3,
                         color=col, label=name)
    axes[0].axhline(0, color="0.7", lw=0.8)
    axes[0].set_title(f"binned residual means ({fit['best']})")
    axes[0].set_xlabel("weight")
    axes[0].legend(fontsize=8)
    axes[1].hist(fit["data"]["sample"]["residual"], bins=60)
    axes[1].set_title("residuals (sample)")
    return fig


def fig_fit_ranking(fit: dict):
    rows = fit["ranking"]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    key = "delta_" + fit["criterion"]
    ax.barh([r["kind"] for r in rows][::-1], [r[key] + 1.0 for r in rows][::-1])
    ax.set_xscale("log")
    ax.set_xlabel(f"{key} + 1 (lower is better)")
    return fig


def fig_compare(nums: list[tuple[str, dict]]):
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for name, num in nums:
        c = num["curves"]
        line, = axes[0, 0].plot(c["w"], c["q_plus"], label=f"{name} q+")
        axes[0, 0].plot(c["w"], c["q_minus"], ls="--", color=line.get_color())
        axes[0, 1].plot(c["w"], c["G_over_F"], label=name)
        axes[1, 0].plot(c["w"], c["R_c"], label=name)
        t = num["traces"]
        x = np.asarray(t["pulse"]) / max(t["pulse"][-1], 1)
        lo, hi = num["bounds"]
        axes[1, 1].plot(x, (np.asarray(t["mean"]) - lo) / (hi - lo), label=name)
    for ax, title, xl in ((axes[0, 0], "q+ (solid), q- (dashed)", "weight"), (axes[0, 1], "G/F", "weight"),
                          (axes[1, 0], "implicit penalty R_c", "weight"),
                          (axes[1, 1], "cycles, normalised (range and pulse count)", "fraction of the sequence")):
        ax.set_title(title)
        ax.set_xlabel(xl)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------------------
# page
# ---------------------------------------------------------------------------------------------------------


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "device"


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def _table(rows: list[list], head: list[str]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows]
    return "\n".join(out) + "</table>"


def _key_rows(num: dict, wmap: WeightMap | None) -> list[list]:
    sp = num["spread"]
    rows = [["family", num["kind"], ""], ["bounds (w)", f"{num['bounds'][0]:.4g} .. {num['bounds'][1]:.4g}", ""],
            ["dynamic range (w)", num["dynamic_range"], f"elements {_fmt(sp['dynamic_range']['p5'])} .. "
                                                        f"{_fmt(sp['dynamic_range']['p95'])}"],
            ["dw_min (w)", num["dw_min"], f"step at mid range: mean {_fmt(sp['step_at_mid_range']['mean'])}, "
                                          f"std {_fmt(sp['step_at_mid_range']['std'])}"],
            ["number of states", num["n_states"], f"elements {_fmt(sp['n_states']['p5'])} .. "
                                                  f"{_fmt(sp['n_states']['p95'])}"],
            ["symmetric point (w)", num["symmetric_point"], f"elements mean {_fmt(sp['symmetric_point']['mean'])}, "
                                                            f"std {_fmt(sp['symmetric_point']['std'])}"],
            ["max |G|", num["asymmetry"]["max_abs_G"], "largest drift per step toward the symmetric point, in units "
                                                       "of alpha E|grad| (0 for a symmetric device)"],
            ["mean |G/F|", num["asymmetry"]["mean_abs_G_over_F"], ""],
            ["R_c at the bounds", f"{num['penalty']['R_c_at_bounds'][0]:.4g}, {num['penalty']['R_c_at_bounds'][1]:.4g}",
             "implicit penalty per unit E|grad|"],
            ["(G/F)' at the symmetric point", num["penalty"]["stiffness_at_symmetric_point"],
             "penalty stiffness: R_c ~ stiffness/2 (w - w_sym)^2"]]
    if wmap:
        rows.append(["conductance map", f"G = {wmap.g_mid:.4g} + {wmap.g_scale:.4g} w ({wmap.unit})", wmap.origin])
        rows.append([f"dynamic range ({wmap.unit})", num["dynamic_range"] * wmap.g_scale, ""])
    return rows


def _fit_html(fit: dict, imgs: list[str]) -> str:
    best = fit["families"][fit["best"]]
    prm = [[p, v, best["stderr"][p], best["ci95"][p][0] if best["ci95"][p][0] is not None else None,
            best["ci95"][p][1] if best["ci95"][p][1] is not None else None, "yes" if p in best["at_bound"] else ""]
           for p, v in best["params"].items()]
    rank = [[r["kind"], r["k"], r["rmse"], r["r2"], r["aic"], r["bic"], r["delta_aic"], r["delta_bic"],
             r["akaike_weight"]] for r in fit["ranking"]]
    n = fit["noise"]
    diag = best["diagnostics"]
    noise_rows = [["read noise (w)", n["read_noise"], n.get("read_noise_se")],
                  [f"read noise ({fit['weight_map']['unit']})", n["read_noise_g"], n.get("read_noise_g_se")],
                  ["cycle noise, additive (x step at reference)", n["sigma_additive"], n.get("sigma_additive_se")],
                  ["cycle noise, multiplicative (x mean step)", n["sigma_multiplicative"],
                   n.get("sigma_multiplicative_se")], ["noise form chosen", n["form"], None]]
    diag_rows = [[k, diag[k]] for k in ("rmse", "r2", "skewness", "excess_kurtosis", "lag1_autocorr",
                                        "lack_of_fit_chi2", "lack_of_fit_dof", "lack_of_fit_p")]
    spread = fit["spread"]
    sp_rows = [[k, v] for k, v in spread.get("dtod", {}).items()]
    parts = [f"<h3>Fit: best family {html.escape(fit['best'])} (by {fit['criterion'].upper()}), "
             f"{fit['data']['n_increments']} increments from {fit['data']['n_devices']} devices</h3>",
             imgs[0], "<h4>Family ranking</h4>",
             _table(rank, ["family", "k", "rmse", "r2", "AIC", "BIC", "dAIC", "dBIC", "Akaike weight"]), imgs[2],
             "<h4>Parameters (pooled fit, 95% intervals from the Jacobian sandwich)</h4>",
             _table(prm, ["parameter", "value", "std error", "95% low", "95% high", "at limit"]),
             "<h4>Residual diagnostics</h4>", _table(diag_rows, ["diagnostic", "value"]), imgs[1],
             "<h4>Noise</h4>", _table(noise_rows, ["quantity", "value", "std error"]),
             "<h4>Device-to-device spread</h4>",
             _table(sp_rows, ["field", "value"]) if sp_rows else f"<p>{html.escape(spread.get('message', ''))}</p>"]
    return "\n".join(parts)


_CSS = ("body{font-family:sans-serif;max-width:1250px;margin:auto;padding:1em}table{border-collapse:collapse;"
        "margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px;text-align:left}"
        "img{max-width:100%}h2{border-bottom:2px solid #444}")


def write_report(specs: list, out_dir: str | os.PathLike, n_elements: int = 64, seed: int = 0,
                 title: str = "aimc device report") -> Path:
    """Write out_dir/report.html (figures embedded as base64), the figures as PNG beside it and every number
    as out_dir/report.json. specs: preset names, device files, fit folders, configs or FitResults."""
    if not specs:
        raise ValueError("no device to report")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    subjects = [resolve(os.fspath(s) if isinstance(s, os.PathLike) else s) for s in specs]
    names = [s.name for s in subjects]
    if len(set(names)) < len(names):
        subjects = [Subject(f"{k + 1}. {s.name}", s.device, s.weight_map, s.fit) for k, s in enumerate(subjects)]
    numbers, sections, nums = {}, [], []

    def img(fig, stem: str) -> str:
        data = _png(fig)
        atomic_write_bytes(out / f"{stem}.png", data)
        return (f'<p><img alt="{html.escape(stem)}" src="data:image/png;base64,'
                f'{base64.b64encode(data).decode()}"></p>')

    for s in subjects:
        num = device_numbers(s.device, n_elements=n_elements, seed=seed)
        slug = _slug(s.name)
        nums.append((s.name, num))
        numbers[s.name] = {"numbers": num, "weight_map": s.weight_map.as_dict() if s.weight_map else None,
                           "fit": s.fit}
        part = [f"<h2>{html.escape(s.name)}</h2>", _table(_key_rows(num, s.weight_map), ["quantity", "value", "note"]),
                img(fig_traces(num, s.weight_map), f"{slug}_traces"), img(fig_response(num), f"{slug}_response"),
                img(fig_steps(num), f"{slug}_steps"), img(fig_penalty(num), f"{slug}_penalty")]
        if s.fit:
            part.append(_fit_html(s.fit, [img(fig_fit_data(s.fit), f"{slug}_fit_data"),
                                          img(fig_fit_residuals(s.fit), f"{slug}_fit_residuals"),
                                          img(fig_fit_ranking(s.fit), f"{slug}_fit_ranking")]))
        part.append(f"<details><summary>device config</summary><pre>"
                    f"{html.escape(json.dumps(num['device'], indent=1))}</pre></details>")
        sections.append("\n".join(part))
    head = ""
    if len(subjects) > 1:
        keys = ["kind", "dynamic_range", "dw_min", "n_states", "symmetric_point"]
        rows = [[k] + [n[k] for _, n in nums] for k in keys]
        rows.append(["max |G|"] + [n["asymmetry"]["max_abs_G"] for _, n in nums])
        rows.append(["(G/F)' at w_sym"] + [n["penalty"]["stiffness_at_symmetric_point"] for _, n in nums])
        rows.append(["std of symmetric point"] + [n["spread"]["symmetric_point"]["std"] for _, n in nums])
        head = ("<h2>Side by side</h2>" + _table(rows, ["quantity"] + [s.name for s in subjects])
                + img(fig_compare(nums), "compare"))
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"
            "<p>Weights in weight units unless a conductance map is given. Drift and penalty follow R1 "
            "(Wu et al., NeurIPS 2025, arXiv:2502.06309, Theorem 1): Analog SGD drifts by -alpha E|grad| G(w) "
            "per step and minimises "
            "f + &lt;E|grad|, R_c&gt;. Bands: 5th to 95th percentile over the drawn elements.</p>"
            f"{head}{''.join(sections)}</body></html>")
    atomic_write_text(out / "report.json", json.dumps(json_safe(numbers), indent=1) + "\n")
    return atomic_write_text(out / "report.html", page)
