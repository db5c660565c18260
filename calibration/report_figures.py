"""The figures of a device report: cycle traces, response functions, steps and states, implicit penalty and
drift, a fit's data, residuals and ranking, and several devices overlaid. Each takes the numbers of
`device_numbers` (or a fit's `FitResult.summary()`) and returns a matplotlib figure (Agg backend, no
display needed); `rendered` turns one into PNG and PDF bytes and closes it."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from aimc.calibration.pulse_data import WeightMap

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PDF_FONTTYPE = 42  # TrueType fonts embedded in the PDFs (matplotlib's default, Type 3, is refused by many journals)


def rendered(fig: Figure) -> dict[str, bytes]:
    """The figure as PNG (110 dpi) and as PDF (vector, TrueType fonts, no creation date: the same figure gives
    the same bytes), both cut to one tight bounding box (measured once, not by a trial draw per format); closes
    it."""
    out = {}
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(plt.rcParams["savefig.pad_inches"])
    for fmt, kwargs in (("png", {"dpi": 110}), ("pdf", {"metadata": {"CreationDate": None}})):
        buf = io.BytesIO()
        with matplotlib.rc_context({"pdf.fonttype": PDF_FONTTYPE}):
            fig.savefig(buf, format=fmt, bbox_inches=box, **kwargs)
        out[fmt] = buf.getvalue()
    plt.close(fig)
    return out


def _mark_sym(ax, num: dict) -> None:
    if num["symmetric_point"] is not None:
        ax.axvline(num["symmetric_point"], color="0.5", ls=":", lw=1, label="symmetric point")


def fig_traces(num: dict, wmap: WeightMap | None) -> Figure:
    """Conductance (or weight without a map) against pulse number over the up/down cycles: mean and 5-95% band."""
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


def fig_response(num: dict) -> Figure:
    """q_plus and q_minus, F and G with their element bands, and G/F, against the weight."""
    c = num["curves"]
    w = np.asarray(c["w"])
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for ax, key, lab in (
        (axes[0], "q_plus", "q+ (up)"),
        (axes[0], "q_minus", "q- (down)"),
        (axes[1], "F", "F"),
        (axes[1], "G", "G"),
    ):
        ax.plot(w, c[key], label=lab)
        ax.fill_between(w, c["bands"][key]["p5"], c["bands"][key]["p95"], alpha=0.2)
    axes[2].plot(w, c["G_over_F"], label="G/F")
    axes[2].axhline(0, color="0.7", lw=0.8)
    ylabels = ("step / dw_min", "F, G (step / dw_min)", "G/F")
    for ax, title, ylabel in zip(axes, ("response", "symmetric / asymmetric part", "R(w) = G/F"), ylabels):
        _mark_sym(ax, num)
        ax.set_xlabel("weight w")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=8)
    return fig


def fig_steps(num: dict) -> Figure:
    """Up and down steps per pulse against the weight, and the number of states: nominal and over elements."""
    c = num["curves"]
    w = np.asarray(c["w"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.3))
    dw = num["dw_min"]
    axes[0].plot(w, np.asarray(c["q_plus"]) * dw, label="up step")
    axes[0].plot(w, np.asarray(c["q_minus"]) * dw, label="down step")
    axes[0].plot(w, np.asarray(c["step"]), "k--", lw=1, label="dw_min F(w)")
    axes[0].fill_between(
        w,
        np.asarray(c["bands"]["F"]["p5"]) * dw,
        np.asarray(c["bands"]["F"]["p95"]) * dw,
        color="k",
        alpha=0.1,
        label="5-95% of elements",
    )
    axes[0].set_xlabel("weight w")
    axes[0].set_ylabel("step per pulse (weight units)")
    axes[0].legend(fontsize=8)
    c2, s = num["crossing"], num["spread"]["n_states"]
    labels = ["range / dw_min", "pulses up", "pulses down"]
    vals = [num["n_states"], c2["pulses_up"], c2["pulses_down"]]
    axes[1].bar(labels, vals, color=["C2", "C0", "C1"])
    if s["p5"] is not None and s["p95"] is not None and s["p95"] > s["p5"]:
        lo, hi = max(num["n_states"] - s["p5"], 0), max(s["p95"] - num["n_states"], 0)
        axes[1].errorbar([0], [num["n_states"]], [[lo], [hi]], color="k", capsize=4, label="elements 5-95%")
        axes[1].legend(fontsize=8)
    axes[1].set_title("states: granularity and pulses to cross the range")
    axes[1].set_ylabel("number")
    return fig


def fig_penalty(num: dict) -> Figure:
    """The implicit penalty R_c(w) and the drift per step -G(w) of Analog SGD."""
    c = num["curves"]
    w = np.asarray(c["w"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.3))
    axes[0].plot(w, c["R_c"])
    axes[0].set_title("implicit penalty R_c(w) (per unit of E|grad|)")
    axes[1].plot(w, c["drift"])
    axes[1].axhline(0, color="0.7", lw=0.8)
    axes[1].set_title("drift per step, -G(w) (units of alpha E|grad|)")
    axes[0].set_ylabel("R_c (per unit E|grad|)")
    axes[1].set_ylabel("-G (alpha E|grad|)")
    for ax in axes:
        _mark_sym(ax, num)
        ax.set_xlabel("weight w")
    return fig


def fig_fit_data(fit: dict) -> Figure:
    """A fit's increments (sample and binned means) against the weight, over the best three families."""
    d, mc = fit["data"], fit["model_curves"]
    fig, ax = plt.subplots(figsize=(7, 4))
    s = d["sample"]
    x, dw, up = np.asarray(s["x"]), np.asarray(s["dw"]), np.asarray(s["up"], bool)
    ax.scatter(x[up], dw[up], s=2, alpha=0.15, color="C0")
    ax.scatter(x[~up], dw[~up], s=2, alpha=0.15, color="C1")
    for name, col in (("up", "C0"), ("down", "C1")):
        b = d["binned"][name]
        ok = np.asarray(b["count"]) > 0
        ax.errorbar(
            np.asarray(b["w"])[ok],
            np.asarray(b["mean"])[ok],
            np.asarray(b["se"])[ok],
            fmt="o",
            ms=3,
            color=col,
            label=f"{name}: binned data",
        )
    for k, ls in zip([r["kind"] for r in fit["ranking"][:3]], ("-", "--", ":")):
        ax.plot(mc["w"], mc[k]["up"], color="k", ls=ls, lw=1, label=k)
        ax.plot(mc["w"], mc[k]["down"], color="k", ls=ls, lw=1)
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xlabel(f"weight at the pulse (anchor: {d.get('anchor', 0.5):.2f} of the way between the two reads)")
    ax.set_ylabel("increment per pulse")
    ax.set_title("data over the best three models")
    ax.legend(fontsize=7)
    return fig


def fig_fit_overlay(fit: dict, wmap: WeightMap | None) -> Figure:
    """Measured reads of the first devices against pulse number, over the fitted device's mean trace under
    the same pulses (restarted at the measured read where the pulses between reads are unknown)."""
    tr = fit["overlay"]
    fig, axes = plt.subplots(len(tr), 1, figsize=(9, 2.8 * len(tr)), squeeze=False)
    tf = (lambda v: wmap.to_g(np.asarray(v))) if wmap else (lambda v: np.asarray(v))
    for ax, t in zip(axes[:, 0], tr):
        ax.plot(t["pulse"], tf(t["measured"]), ".", ms=2, color="0.4", label="measured")
        ax.plot(t["pulse"], tf(t["model"]), lw=1, color="C3", label=f"fitted {fit['best']}, same pulses")
        ax.set_title(f"device {t['device']}", fontsize=9)
        ax.set_ylabel(f"conductance ({wmap.unit})" if wmap else "weight")
        ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel("pulse number")
    fig.tight_layout()
    return fig


def fig_fit_residuals(fit: dict) -> Figure:
    """The best family's binned residual means against the weight and the histogram of its residuals."""
    best = fit["families"][fit["best"]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.3))
    for name, col in (("up", "C0"), ("down", "C1")):
        b = best["diagnostics"]["binned_residuals"][name]
        ok = np.asarray(b["count"]) >= 5
        axes[0].errorbar(
            np.asarray(b["w"])[ok],
            np.asarray(b["mean"])[ok],
            np.asarray(b["se"])[ok],
            fmt="o",
            ms=3,
            color=col,
            label=name,
        )
    axes[0].axhline(0, color="0.7", lw=0.8)
    axes[0].set_title(f"binned residual means ({fit['best']})")
    axes[0].set_xlabel("weight")
    axes[0].set_ylabel("mean residual (weight)")
    axes[0].legend(fontsize=8)
    axes[1].hist(fit["data"]["sample"]["residual"], bins=60)
    axes[1].set_title("residuals (sample)")
    axes[1].set_xlabel("residual (weight)")
    axes[1].set_ylabel("increments")
    return fig


def fig_fit_ranking(fit: dict) -> Figure:
    """Every family's AIC or BIC difference to the best (log scale)."""
    rows = fit["ranking"]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    key = "delta_" + fit["criterion"]
    ax.barh([r["kind"] for r in rows][::-1], [r[key] + 1.0 for r in rows][::-1])
    ax.set_xscale("log")
    ax.set_xlabel(f"{key} + 1 (lower is better)")
    return fig


def fig_compare(nums: list[tuple[str, dict]]) -> Figure:
    """Several devices overlaid: responses, G/F, implicit penalty and normalised cycle traces."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for name, num in nums:
        c = num["curves"]
        (line,) = axes[0, 0].plot(c["w"], c["q_plus"], label=f"{name} q+")
        axes[0, 0].plot(c["w"], c["q_minus"], ls="--", color=line.get_color())
        axes[0, 1].plot(c["w"], c["G_over_F"], label=name)
        axes[1, 0].plot(c["w"], c["R_c"], label=name)
        t = num["traces"]
        x = np.asarray(t["pulse"]) / max(t["pulse"][-1], 1)
        lo, hi = num["bounds"]
        axes[1, 1].plot(x, (np.asarray(t["mean"]) - lo) / (hi - lo), label=name)
    for ax, title, xl, yl in (
        (axes[0, 0], "q+ (solid), q- (dashed)", "weight", "step / dw_min"),
        (axes[0, 1], "G/F", "weight", "G/F"),
        (axes[1, 0], "implicit penalty R_c", "weight", "R_c (per unit E|grad|)"),
        (axes[1, 1], "cycles, normalised (range and pulse count)", "fraction of the sequence", "fraction of the range"),
    ):
        ax.set_title(title)
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
