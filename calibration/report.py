"""Response-function reports: what a device will do to training, as one HTML page, PNG figures and JSON.

For each device (a preset, a device file, or a fit output): its numbers (`response_numbers`) and figures
(`report_figures`); for a fit also the parameter table with intervals, the family ranking, the residual
diagnostics, noise and device-to-device spread. Several devices side by side get one table and an overlay
figure. The page is the jinja2 template templates/report.html (autoescaped), shipped with the package: this
module computes every value as text, the template lays them out.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2
from tqdm import tqdm

from aimc.calibration.aihwkit_export import aihwkit_snippet
from aimc.calibration.fit import FitResult, fit_warnings
from aimc.calibration.pulse_data import MIN_TRIPLES, WeightMap
from aimc.calibration.report_figures import (
    fig_compare,
    fig_fit_data,
    fig_fit_overlay,
    fig_fit_ranking,
    fig_fit_residuals,
    fig_penalty,
    fig_response,
    fig_steps,
    fig_traces,
    rendered,
)
from aimc.calibration.response_numbers import device_numbers
from aimc.common.files import atomic_write_bytes, atomic_write_text, json_safe
from aimc.devices import PRESETS, DeviceConfig, load_device


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
        return Subject(
            name or _fit_name(spec.source, spec.best.kind), spec.device, spec.weight_map, json_safe(spec.summary())
        )
    if not isinstance(spec, str):
        device = load_device(spec)
        return Subject(name or _cell_name(spec.kind, device), _element(device))
    path = Path(spec)
    if spec not in PRESETS and path.is_dir():
        dev_file, fit_file = path / "device.json", path / "fit.json"
        if not dev_file.is_file():
            raise FileNotFoundError(f"{spec!r} is a folder without device.json (not a fit output)")
        subj = resolve(str(dev_file), name or path.name)
        if fit_file.is_file():
            subj.fit = json.loads(fit_file.read_text())
            subj.name = name or _fit_name(subj.fit.get("source", ""), subj.fit.get("best", subj.device.kind))
        return subj
    device = load_device(spec)
    wmap = None
    if spec not in PRESETS and path.suffix.lower() == ".json":
        data = json.loads(path.read_text())
        if isinstance(data.get("weight_map"), dict):
            m = data["weight_map"]
            wmap = WeightMap(
                float(m["g_mid"]), float(m["g_scale"]), str(m.get("unit", "a.u.")), str(m.get("origin", "file"))
            )
    return Subject(name or _cell_name(spec if spec in PRESETS else path.stem, device), _element(device), wmap)


def _element(device: DeviceConfig) -> DeviceConfig:
    """The device whose response a report shows: a one-sided cell's element (G+ and G- share it)."""
    return device.device if device.kind == "OneSided" else device


def _cell_name(name: str, device: DeviceConfig) -> str:
    return f"{name} (one device of the cell)" if device.kind == "OneSided" else name


def _fit_name(source: str, kind: str) -> str:
    """A fitted device's name: the trace file's stem and the family, e.g. 'cycles (SoftBounds)'; of several
    files (a source listing them, ', '-separated) the first one's stem and how many more ('D1_up +15 files')."""
    files = [f for f in source.split(", ") if f]
    more = f" +{len(files) - 1} files" if len(files) > 1 else ""
    return f"{Path(files[0]).stem if files else 'fit'}{more} ({kind})"


@cache
def _template() -> jinja2.Template:
    """The report page's template; autoescaped, so names and labels from user files stay text."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True, keep_trailing_newline=True
    )
    return env.get_template("report.html")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "device"


def _g(v, spec: str = ".4g") -> str:
    """A number in format `spec`, or "not computed" where it is missing (None: NaN in the fit's JSON)."""
    return format(v, spec) if isinstance(v, (int, float)) and math.isfinite(v) else "not computed"


def _cell(v) -> str:
    """A table cell's text: "-" for a missing value, a float in 4 significant digits."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _cells(rows: list[list]) -> list[list[str]]:
    return [[_cell(c) for c in row] for row in rows]


def _extrapolated(fit: dict | None) -> str:
    """' (from an extrapolated bound: w_max)' where the fit flags a bound as extrapolated beyond the reads, else ''."""
    flags = (fit or {}).get("families", {}).get((fit or {}).get("best"), {}).get("flags", {})
    names = [p for p, why in flags.items() if "extrapolated" in why]
    return f" (from an extrapolated bound: {', '.join(names)})" if names else ""


def _neurosim_labels(c: dict) -> str:
    """NeuroSim's nonlinearity labels of a `crossing` (LTP, LTD), as its device tables write them (LTD
    negative): "2.22/-4.65"; beyond its table, "> 9"."""

    def one(v: float | None) -> str:
        return "> 9" if v is None or not math.isfinite(v) else f"{v:.2f}"

    return f"{one(c.get('neurosim_label_LTP'))}/-{one(c.get('neurosim_label_LTD'))}"


NEUROSIM_LABEL_NOTE = (
    "the label of that A / P_max in DNN+NeuroSim's table (MLP_NeuroSim V3.0, Nonlinearity-NormA), the number "
    "its device tables quote"
)


def _measured_rows(num: dict) -> list[list]:
    """NL and NeuroSim's A / P_max of the fitted curves between the ends of the measured range (LTP, LTD),
    where the numbers come from a fit."""
    c = num.get("crossing_measured")
    if c is None:
        return []
    note = "the fitted curves between the ends of the measured range, as the measured LTP/LTD pair runs"
    return [
        ["NL over the measured range (LTP, LTD)", f"{_g(c['NL_LTP'], '.3g')}, {_g(c['NL_LTD'], '.3g')}", note],
        [
            "NeuroSim A / P_max over the measured range (LTP, LTD)",
            f"{_g(c['A_over_Pmax_LTP'], '.3g')}, {_g(c['A_over_Pmax_LTD'], '.3g')}",
            f"{note}; P_max: {_g(c['pulses_up'], '.4g')}, {_g(c['pulses_down'], '.4g')} pulses",
        ],
        ["NeuroSim nonlinearity over the measured range (LTP/LTD)", _neurosim_labels(c), NEUROSIM_LABEL_NOTE],
    ]


def _key_rows(num: dict, wmap: WeightMap | None, fit: dict | None = None) -> list[list]:
    """The key numbers of a device; beside those that rest on a bound the fit extrapolated, the flag."""
    sp = num["spread"]
    extra = _extrapolated(fit)
    stiff = num["penalty"]["stiffness_at_symmetric_point"]
    drift = (
        "largest drift per step away from the symmetric point, which repels ((G/F)' < 0)"
        if stiff is not None and stiff < 0
        else "largest drift per step toward the symmetric point"
    )
    rows = [
        ["family", num["kind"], ""],
        ["bounds (w)", f"{_g(num['bounds'][0], '.4g')} .. {_g(num['bounds'][1], '.4g')}", ""],
        [
            "dynamic range (w)",
            num["dynamic_range"],
            f"elements {_cell(sp['dynamic_range']['p5'])} .. {_cell(sp['dynamic_range']['p95'])}",
        ],
        [
            "dw_min (w)",
            num["dw_min"],
            f"step at mid range: mean {_cell(sp['step_at_mid_range']['mean'])}, "
            f"std {_cell(sp['step_at_mid_range']['std'])}",
        ],
        [
            "number of states (range / dw_min)",
            f"{_g(num['n_states'])}{extra}",
            f"elements {_cell(sp['n_states']['p5'])} .. {_cell(sp['n_states']['p95'])}",
        ],
        [
            "pulses to cross the range (up, down)",
            f"{_g(num['crossing']['pulses_up'], '.4g')}, {_g(num['crossing']['pulses_down'], '.4g')}{extra}",
            "integral of dw / step from one bound to within dw_min/2 of the other; more than range / dw_min "
            "where the step shrinks toward the bound",
        ],
        [
            "non-linearity NL (LTP, LTD)",
            f"{_g(num['crossing']['NL_LTP'], '.3g')}, {_g(num['crossing']['NL_LTD'], '.3g')}",
            "largest distance of the normalised potentiation (depression) curve from a straight line, in "
            "units of the range (0: linear)",
        ],
        [
            "NeuroSim A / P_max (LTP, LTD)",
            f"{_g(num['crossing']['A_over_Pmax_LTP'], '.3g')}, {_g(num['crossing']['A_over_Pmax_LTD'], '.3g')}",
            "A of G = B (1 - e^(-P/A)) + G_min fitted to the same normalised curves, over their pulse count "
            "(small: saturating; 1000: linear)",
        ],
        ["NeuroSim nonlinearity (LTP/LTD)", _neurosim_labels(num["crossing"]), NEUROSIM_LABEL_NOTE],
        *_measured_rows(num),
        [
            "symmetric point (w)",
            num["symmetric_point"],
            f"elements mean {_cell(sp['symmetric_point']['mean'])}, std {_cell(sp['symmetric_point']['std'])}",
        ],
        [
            "max |G|",
            num["asymmetry"]["max_abs_G"],
            f"{drift}, in units of alpha E|grad| (0 for a symmetric device)",
        ],
        ["mean |G/F|", num["asymmetry"]["mean_abs_G_over_F"], ""],
        [
            "R_c at the bounds",
            f"{_g(num['penalty']['R_c_at_bounds'][0], '.4g')}, {_g(num['penalty']['R_c_at_bounds'][1], '.4g')}",
            "implicit penalty per unit E|grad|",
        ],
        [
            "(G/F)' at the symmetric point",
            num["penalty"]["stiffness_at_symmetric_point"],
            "penalty stiffness: R_c ~ stiffness/2 (w - w_sym)^2",
        ],
    ]
    if wmap:
        rows.append(["conductance map", f"G = {wmap.g_mid:.4g} + {wmap.g_scale:.4g} w ({wmap.unit})", wmap.origin])
        rows.append([f"dynamic range ({wmap.unit})", num["dynamic_range"] * wmap.g_scale, ""])
    return rows


MAX_ELEMENTS = 4096  # simulated elements of a report: their traces take up to 64 kB each (8000 reads)


def fit_flags(fit: dict, num: dict) -> list[str]:
    """Warnings about a fit: a degenerate device (fewer than 2 states), then the fit's own (`fit.fit_warnings`)."""
    out = []
    if num["n_states"] < 2:
        out.append(f"degenerate device: {_g(num['n_states'], '.2g')} states (range / dw_min)")
    return out + fit_warnings(fit["families"][fit["best"]], fit.get("quality") or {}, fit.get("noise") or {})


def _quality(q: dict | None) -> dict | None:
    """The data quality section of a fit: its rows (item, count, note) and the outlier increments (None: no
    quality record)."""
    if not q:
        return None
    rows = [
        ["increments used", q["n_pairs_used"], f"{q['n_multi_pulse']} of them span k > 1 pulses"],
        [
            "outliers left out",
            q["n_outliers"],
            "more than 8 robust std and 2x the largest typical step from the increments at the same weight",
        ],
    ]
    if q.get("kept_predicted"):
        rows.append(["outliers the fitted model predicts", "", q["kept_predicted"]])
    if q.get("n_kept_predicted"):
        rows.append(["outliers kept", q["n_kept_predicted"], "flagged by that rule, predicted by the fitted model"])
    rows += [[f"pairs skipped: {why}", n, ""] for why, n in q["skipped"].items()]
    if "anchor" in q:
        a = q["anchor"]
        moments = (
            f"read variance {_g(a['read_variance'], '.3g')}, increment variance {_g(a['increment_variance'], '.3g')} "
            f"(w^2): anchor {_g(a['anchor'], '.3f')} of the way between the two reads (0.5: midpoint)"
            if a["read_variance"] is not None and a["n_triples"] >= MIN_TRIPLES
            else f"not estimated: {MIN_TRIPLES} triples of consecutive single-pulse increments of one polarity needed, "
            "anchor 0.5 (the midpoint)"
        )
        rows.append(
            ["increment triples for the regression anchor", a["n_triples"], f"{moments}; used {_g(a['used'], '.3f')}"]
        )
    if "gls" in q:
        rows.append(["fit and criterion", "", q["gls"]])
    if "likelihood" in q:
        rows.append(["likelihood refinement", "", q["likelihood"]])
    if "tabulated" in q:
        rows.append(["tabulated family", "", q["tabulated"]])
    if "censored_mean" in q:
        rows.append(
            [
                "increment model",
                "",
                "the mean of the noisy step clipped at the bounds (cycle noise measured first)"
                if q["censored_mean"]
                else "the clipped mean step (cycle noise measured after the fit)",
            ]
        )
    if q["sparse_devices"]:
        rows.append(["devices with too few increments", len(q["sparse_devices"]), ", ".join(q["sparse_devices"])])
    outliers = [[o["at"], o["after"], o["polarity"], o["pulses"], o["increment"], o["expected"]] for o in q["outliers"]]
    return {"rows": _cells(rows), "outliers": _cells(outliers)}


def _fit_section(fit: dict, figures: dict[str, dict], num: dict) -> dict:
    """The fit section of a device: its numbers as text, the `figures` (data, residuals, ranking, overlay:
    `_figure` records) and the warnings of `fit_flags`."""
    best = fit["families"][fit["best"]]
    flags = best.get("flags", {})
    prm = [
        [
            p,
            v,
            best["stderr"][p],
            *best["ci95"][p],
            flags.get(p, "yes"),
        ]
        for p, v in best["params"].items()
    ]
    rank = [
        [r["kind"], r["k"], r["rmse"], r["r2"], r["aic"], r["bic"], r["delta_aic"], r["delta_bic"], r["akaike_weight"]]
        for r in fit["ranking"]
    ]
    n = fit["noise"]
    diag = best["diagnostics"]
    noise_rows = [
        ["read noise (w)", n["read_noise"], n.get("read_noise_se")],
        [f"read noise ({fit['weight_map']['unit']})", n["read_noise_g"], n.get("read_noise_g_se")],
        ["cycle noise, additive (x step at reference)", n["sigma_additive"], n.get("sigma_additive_se")],
        ["cycle noise, multiplicative (x mean step)", n["sigma_multiplicative"], n.get("sigma_multiplicative_se")],
        ["noise form chosen by the data", n["form"], None],
        ["noise form of the exported device", n.get("exported_form", n["form"]), None],
    ]
    noise_rows += [["note", n[key], None] for key in ("message", "note") if n.get(key)]
    diag_rows = [
        [k, diag[k]]
        for k in (
            "rmse",
            "r2",
            "skewness",
            "excess_kurtosis",
            "lag1_autocorr",
            "lack_of_fit_chi2",
            "lack_of_fit_dof",
            "lack_of_fit_p",
        )
    ]
    spread = fit["spread"]
    sp_rows = [[k, v] for k, v in spread.get("dtod", {}).items()]
    return {
        "best": fit["best"],
        "criterion": fit["criterion"].upper(),
        "n_increments": fit["data"]["n_increments"],
        "n_devices": fit["data"]["n_devices"],
        "warnings": fit_flags(fit, num),
        "quality": _quality(fit.get("quality")),
        "figures": figures,
        "ranking": _cells(rank),
        "method": fit.get("method", "pooled"),
        "interval": best.get("interval", "Jacobian sandwich, normal"),
        "params": _cells(prm),
        "diagnostics": _cells(diag_rows),
        "noise": _cells(noise_rows),
        "spread": _cells(sp_rows),
        "spread_message": spread.get("message", ""),
        "aihwkit": aihwkit_snippet(fit["device_file"]["device"]),
    }


def write_report(
    specs: list,
    out_dir: str | os.PathLike,
    n_elements: int = 64,
    seed: int = 0,
    title: str = "aimc device report",
    progress: bool = False,
) -> Path:
    """Write out_dir/report.html (figures embedded as base64), the figures as PNG and PDF beside it and every
    number as out_dir/report.json. specs: preset names, device files, fit folders, configs or FitResults.
    progress: a progress bar over the devices on standard error."""
    if not specs:
        raise ValueError("no device to report")
    check_elements(n_elements)
    out = Path(out_dir)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _write_report(specs, out, n_elements, seed, title, progress)
    except BaseException:
        if made:  # a failed report leaves no folder it made
            shutil.rmtree(out, ignore_errors=True)
        raise


def check_elements(n_elements: int) -> None:
    """Refuse a number of simulated elements outside 1 .. MAX_ELEMENTS (one line, naming --elements)."""
    if not 1 <= n_elements <= MAX_ELEMENTS:
        raise ValueError(f"--elements (n_elements) must be between 1 and {MAX_ELEMENTS}, got {n_elements}")


def _write_report(specs: list, out: Path, n_elements: int, seed: int, title: str, progress: bool) -> Path:
    """`write_report` into the existing folder `out`."""
    subjects = [resolve(os.fspath(s) if isinstance(s, os.PathLike) else s) for s in specs]
    names = [s.name for s in subjects]
    if len(set(names)) < len(names):
        subjects = [Subject(f"{k + 1}. {s.name}", s.device, s.weight_map, s.fit) for k, s in enumerate(subjects)]
    numbers, devices, nums = {}, [], []

    def figure(fig, stem: str) -> dict[str, str]:
        """Write `fig` as out/stem.png and .pdf; its record for the page: the stem and the PNG in base64."""
        files = rendered(fig)
        for fmt, data in files.items():
            atomic_write_bytes(out / f"{stem}.{fmt}", data)
        return {"stem": stem, "data": base64.b64encode(files["png"]).decode()}

    for s in tqdm(subjects, desc="report", unit="device", disable=not progress, file=sys.stderr):
        measured = (s.fit or {}).get("data", {}).get("bounds_plateau")
        num = device_numbers(s.device, n_elements=n_elements, seed=seed, measured=measured)
        slug = _slug(s.name)
        nums.append((s.name, num))
        numbers[s.name] = {"numbers": num, "weight_map": s.weight_map.as_dict() if s.weight_map else None, "fit": s.fit}
        device = {
            "name": s.name,
            "key_rows": _cells(_key_rows(num, s.weight_map, s.fit)),
            "figures": [
                figure(fig_traces(num, s.weight_map), f"{slug}_traces"),
                figure(fig_response(num), f"{slug}_response"),
                figure(fig_steps(num), f"{slug}_steps"),
                figure(fig_penalty(num), f"{slug}_penalty"),
            ],
            "fit": None,
            "config": json.dumps(num["device"], indent=1),
        }
        if s.fit:
            figs = {
                "data": figure(fig_fit_data(s.fit), f"{slug}_fit_data"),
                "residuals": figure(fig_fit_residuals(s.fit), f"{slug}_fit_residuals"),
                "ranking": figure(fig_fit_ranking(s.fit), f"{slug}_fit_ranking"),
            }
            if s.fit.get("overlay"):
                figs["overlay"] = figure(fig_fit_overlay(s.fit, s.weight_map), f"{slug}_fit_overlay")
            device["fit"] = _fit_section(s.fit, figs, num)
        devices.append(device)
    compare = None
    if len(subjects) > 1:
        keys = ["kind", "dynamic_range", "dw_min", "n_states", "symmetric_point"]
        rows = [[k] + [n[k] for _, n in nums] for k in keys]
        rows.append(["max |G|"] + [n["asymmetry"]["max_abs_G"] for _, n in nums])
        rows.append(["(G/F)' at w_sym"] + [n["penalty"]["stiffness_at_symmetric_point"] for _, n in nums])
        rows.append(["std of symmetric point"] + [n["spread"]["symmetric_point"]["std"] for _, n in nums])
        names = [s.name for s in subjects]
        compare = {"names": names, "rows": _cells(rows), "figure": figure(fig_compare(nums), "compare")}
    page = _template().render(title=title, compare=compare, devices=devices)
    atomic_write_text(out / "report.json", json.dumps(json_safe(numbers), indent=1) + "\n")
    return atomic_write_text(out / "report.html", page)
