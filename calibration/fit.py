"""Fit the response families of the device layer to pulse traces (docs/calibration.md): every family's
least-squares fit, the ranking by AIC or BIC, the noise and spread of the best one, and the exported device.
The data and the increment model are in `pulse_data`, the families in `families`, one family's fit in
`family_fit`, noise and spread in `variation`."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace

import numpy as np

from aimc.calibration.bootstrap import N_BOOT_POOLED, N_BOOT_POPULATION, bootstrap_pooled, bootstrap_population
from aimc.calibration.families import FAMILY_KINDS, Family
from aimc.calibration.family_fit import FamilyFit, fit_tabulated
from aimc.calibration.family_pool import FamilyJob, fit_each_family
from aimc.calibration.gls import read_share
from aimc.calibration.increment_kernels import noise_form
from aimc.calibration.likelihood import refine_population
from aimc.calibration.population import (
    MIN_DEVICES,
    fitted_devices,
    identification,
    refit_shared,
    summarize,
)
from aimc.calibration.pulse_data import (
    MIN_TRIPLES,
    PulseData,
    WeightMap,
    model_trace,
    predict,
    predicted_outliers,
    pulse_data,
    weight_map_for,
)
from aimc.calibration.traces import TraceSet
from aimc.calibration.variation import estimate_noise, estimate_spread, spread_tabulated, table_noise
from aimc.common.files import atomic_write_text, json_safe
from aimc.common.version import VERSION
from aimc.devices import DeviceConfig, parse_device

NOISE_DOMINATED_R2 = 0.1  # below this share of the increment variance explained, a fit is flagged noise-dominated
READ_DOMINATED = 0.4  # a read-noise share (1/2: read noise alone) from which a fit without gls is flagged
START_SAMPLE = 20000  # increments of the pooled fit that starts the per-device fits
CENSORED_ANCHOR = 0.05  # below this anchor (cycle noise variance > 18 read variances) the default increment model
# is the censored mean of the noisy step: on five aihwkit ReRamES populations it held the truth in 33 of 40
# intervals against 27 of 40 for the clipped mean step (docs/calibration.md)


@dataclass
class FitResult:
    """Everything `fit` found: the weight map, every family's fit, the ranking (best first, by `criterion`),
    the noise and spread estimates of the best family, and `device`, the exported config (best family,
    its population parameters, cycle noise and device-to-device spread)."""

    weight_map: WeightMap
    fits: dict[str, FamilyFit]
    criterion: str
    noise: dict
    spread: dict
    device: DeviceConfig
    data: PulseData
    source: str = ""
    method: str = "per-device"
    overlay: list = field(default_factory=list)

    @property
    def ranking(self) -> list[str]:
        return sorted(self.fits, key=lambda k: getattr(self.fits[k], self.criterion))

    @property
    def best(self) -> FamilyFit:
        return self.fits[self.ranking[0]]

    @property
    def warnings(self) -> list[str]:
        """What the exported device should not be trusted for, one line each (`fit_warnings`): the report lists
        them, the device file carries them, `aimc fit` prints them."""
        return fit_warnings(self.best.summary(), self.data.quality, self.noise)

    def ranking_table(self) -> list[dict]:
        """Per family, best first: k, rss, aic, bic, their differences to the best and Akaike weights."""
        rank = self.ranking
        aic0 = min(f.aic for f in self.fits.values())
        bic0 = min(f.bic for f in self.fits.values())
        wts = np.array([math.exp(-0.5 * (self.fits[k].aic - aic0)) for k in rank])
        wts /= wts.sum()
        return [
            {
                "kind": k,
                "k": self.fits[k].k,
                "rss": self.fits[k].rss,
                "rmse": self.fits[k].diagnostics["rmse"],
                "r2": self.fits[k].diagnostics["r2"],
                "aic": self.fits[k].aic,
                "bic": self.fits[k].bic,
                "delta_aic": self.fits[k].aic - aic0,
                "delta_bic": self.fits[k].bic - bic0,
                "akaike_weight": float(w),
            }
            for k, w in zip(rank, wts)
        ]

    def device_file(self) -> dict:
        """The exported device file: the config under "device" (what `devices.load_device` reads), the
        weight map and the provenance."""
        return {
            "device": self.device.model_dump(mode="json"),
            "weight_map": self.weight_map.as_dict(),
            "fit": {
                "family": self.best.kind,
                "criterion": self.criterion,
                "traces": self.source,
                "aimc_version": VERSION,
                "warnings": self.warnings,
            },
        }

    def summary(self) -> dict:
        """All numbers of the fit (JSON-ready), with the data the fit figures need."""
        d = self.data
        rng = np.random.default_rng(0)
        keep = np.sort(rng.choice(d.n, size=min(d.n, 3000), replace=False))
        grid = np.linspace(d.lo, d.hi, 101)
        curves = {}
        for k in self.ranking:
            dev = self.fits[k].device
            curves[k] = {
                "up": predict(dev, grid, np.ones(len(grid), bool), anchor=d.anchor).tolist(),
                "down": predict(dev, grid, np.zeros(len(grid), bool), anchor=d.anchor).tolist(),
            }
        edges = np.linspace(d.lo, d.hi, 31)
        binned = {}
        for name, sel in (("up", d.up), ("down", ~d.up)):
            j = np.clip(np.digitize(d.x[sel], edges) - 1, 0, 29)
            cnt = np.bincount(j, minlength=30)
            mean = np.bincount(j, d.dw[sel], 30) / np.maximum(cnt, 1)
            var = np.bincount(j, d.dw[sel] ** 2, 30) / np.maximum(cnt, 1) - mean**2
            binned[name] = {
                "w": (0.5 * (edges[:-1] + edges[1:])).tolist(),
                "mean": mean.tolist(),
                "se": np.sqrt(np.maximum(var, 0) / np.maximum(cnt - 1, 1)).tolist(),
                "count": cnt.tolist(),
            }
        return {
            "weight_map": self.weight_map.as_dict(),
            "criterion": self.criterion,
            "best": self.best.kind,
            "ranking": self.ranking_table(),
            "families": {k: f.summary() for k, f in self.fits.items()},
            "noise": self.noise,
            "spread": self.spread,
            "device_file": self.device_file(),
            "model_curves": {"w": grid.tolist(), **curves},
            "data": {
                "n_increments": d.n,
                "n_devices": d.n_devices,
                "bounds_plateau": [d.lo, d.hi],
                "binned": binned,
                "typical_step": d.dw0,
                "anchor": d.anchor,
                "sample": {
                    "x": d.x[keep].tolist(),
                    "dw": d.dw[keep].tolist(),
                    "up": d.up[keep].astype(int).tolist(),
                    "residual": self.best.residuals[keep].tolist(),
                },
            },
            "source": self.source,
            "method": self.method,
            "quality": d.quality,
            "overlay": self.overlay,
        }

    def export(self, path: str | os.PathLike) -> None:
        """Write the device file (JSON) atomically."""
        atomic_write_text(path, json.dumps(self.device_file(), indent=2) + "\n")

    def save(self, out_dir: str | os.PathLike) -> None:
        """Write DIR/device.json (the exported device) and DIR/fit.json (all numbers), atomically."""
        out = os.fspath(out_dir)
        os.makedirs(out, exist_ok=True)
        self.export(os.path.join(out, "device.json"))
        atomic_write_text(os.path.join(out, "fit.json"), json.dumps(json_safe(self.summary()), indent=1) + "\n")


def fit_warnings(best: dict, quality: dict, noise: dict) -> list[str]:
    """Warnings about a fit from its best family's summary (`FamilyFit.summary`), the data quality and the noise
    estimate: a likelihood refinement asked for and not applied, a noise-dominated fit (the model explains under
    NOISE_DOMINATED_R2 of the increment variance beyond a constant step: the family is then chosen by little),
    read noise that dominates a fit without gls (its share by the noise moments at least READ_DOMINATED), noise
    not estimated, unidentified parameters."""
    out = []
    ml = (quality or {}).get("likelihood", "")
    if ml.startswith("not applied"):
        out.append(f"likelihood {ml}")
    r2 = best["diagnostics"].get("r2")
    if r2 is not None and r2 < NOISE_DOMINATED_R2:
        out.append(f"noise-dominated fit: the model explains {max(r2, 0):.0%} of the increment variance")
    quality = quality or {}
    moments = quality.get("anchor") or {}
    if "gls" not in quality and moments.get("n_triples", 0) >= MIN_TRIPLES and moments["anchor"] >= READ_DOMINATED:
        out.append(
            f"read noise dominates the increments (its share {moments['anchor']:.2f}): least squares on them "
            "misses what the levels of each run show; fit with gls (--gls)"
        )
    if (noise or {}).get("message"):
        out.append(f"cycle and read noise {noise['message']}: the exported device has no cycle noise")
    out += [f"{p}: {why}" for p, why in (best.get("flags") or {}).items()]
    return out


def _export_device(best: FamilyFit, noise: dict, spread: dict) -> DeviceConfig:
    """The best family's config with the measured cycle noise and device-to-device spread filled in; the noise
    form the config carries goes to noise["exported_form"] (multiplicative where the family has no other)."""
    fields = best.device.model_dump()
    form = noise["form"]
    if "noise" in fields:  # paper families and tabulated: the noise form is a field
        fields["noise"] = form
    elif "mult_noise" in fields:  # LinearStep, SoftBounds
        fields["mult_noise"] = form == "multiplicative"
    else:  # the other aihwkit families have multiplicative noise only
        form = "multiplicative"
    fields["dw_min_std"] = noise[f"sigma_{form}"]
    noise["exported_form"] = form
    for fld, value in spread.get("dtod", {}).items():
        fields[fld] = min(float(value), 0.95)
    return parse_device(fields, where="exported device")


def _bootstrap_devices(
    fam: Family, population: FamilyFit, per: dict[int, FamilyFit], data: PulseData, n_boot: int | None, seed: int
) -> None:
    """Give a per-device population fit the bootstrap intervals over its devices' estimates `per`
    (`bootstrap.bootstrap_population`) and the identification flags of those intervals."""
    theta = np.array([list(f.params.values()) for f in per.values()])
    bootstrap_population(population, theta, n_boot or N_BOOT_POPULATION, seed)
    population.flags = identification(fam, population, data)


def _with_read_share(data: PulseData, anchor: float | None) -> PulseData:
    """`data` with the read-noise share its fits whiten (`gls.read_share`; without runs of one polarity long enough
    for it, the noise moments' anchor of `pulse_data.increment_noise`). The share is the anchor's own quantity,
    sigma_r^2 / (v + 2 sigma_r^2): where `anchor` is not given, the increments are regressed on it (the moments'
    estimate scatters by about 0.1 on a few hundred increments)."""
    share, source = read_share(data.dw * data.weight, data.up, data.follows, data.k), "the runs' increments"
    if share is None:
        share, source = data.quality["anchor"]["anchor"], "the noise moments"
    if anchor is None:  # what pulse_data(..., anchor=share) gives: the outliers and the scale do not depend on it
        data.quality["anchor"]["used"] = share
        data = replace(data, anchor=share)
    data = replace(data, read_share=share)
    data.quality["gls"] = (
        f"generalised least squares: consecutive single-pulse increments correlate by {-share:.2f} "
        f"(the read noise's share of their variance, by the likelihood of {source})"
    )
    return data


def fit(
    traces: TraceSet,
    kinds: list[str] | None = None,
    criterion: str = "bic",
    g_mid: float | None = None,
    g_scale: float | None = None,
    n_bins: int = 20,
    n_nodes: int = 6,
    spread: bool = True,
    source: str = "",
    method: str = "per-device",
    progress: bool = False,
    intervals: str = "analytic",
    n_boot: int | None = None,
    seed: int = 0,
    cycle_noise: bool | None = None,
    anchor: float | None = None,
    likelihood: bool = False,
    keep: tuple[int, ...] = (),
    workers: int = 1,
    gls: bool = False,
) -> FitResult:
    """Fit every family in `kinds` (default: all of the device layer) to the increments of `traces`, rank them by
    `criterion` ("bic" or "aic"), estimate noise and device-to-device spread for the best one and build the exported
    device. g_mid, g_scale: the weight map (default: `weight_map_for`); n_bins: bins of the tabulated fit; n_nodes:
    nodes of the PiecewiseStep fit; spread: fit each device for the spread; method: "per-device" (default: each
    family fitted to every device alone, chosen by the summed criterion, the population one parameter set shared by
    the devices unless their own fits reject it, then the median of their parameters: `population`; with fewer than
    MIN_DEVICES devices that have enough increments, the pooled fit) or "pooled" (one fit of all increments);
    progress: show a progress bar (tqdm, on stderr); intervals: "analytic" (pooled: Jacobian sandwich; per-device:
    the median's order-statistic interval) or "bootstrap" (`bootstrap`: per-device, every family's per-device
    estimates resampled, n_boot times (default 2000); pooled: the best family refitted to n_boot (default 200)
    resamples of devices and cycles), seeded by seed; cycle_noise: every family's increment model is the mean of the
    clipped noisy step, the noise measured first on each device's own table (`variation.table_noise`); off: the
    clipped mean step, the noise measured after the fit only; None (default): on where the anchor used is below
    CENSORED_ANCHOR (cycle noise dominates the reads; docs/calibration.md compares); anchor: where between its two
    reads the model sees an increment (`pulse_data`: 0 the start, 0.5 the midpoint; default None: from the read and
    cycle noise of the data); likelihood: refine the best family's per-device fits by the exact likelihood of the
    increments (`likelihood`; method "per-device", the censored mean on), which also measures each device's cycle
    and read noise; the population is then always the median of the per-device fits (`population.fit_population`,
    shared off); keep: TraceSet rows of outliers kept (`pulse_data`): the outliers the best fit predicts
    (`pulse_data.predicted_outliers`) are kept and everything is fitted again once; workers: processes that fit
    the families side by side (`family_pool`; the result does not depend on it); gls: every family fitted and
    ranked by generalised least squares over the read noise that consecutive increments share (`gls`: for
    read noise that dominates the cycle noise, where the levels of a run carry the shape), its correlation
    estimated from the runs' increments (`gls.read_share`) and used as the anchor where `anchor` is None."""
    call = dict(locals())
    if criterion not in ("aic", "bic"):
        raise ValueError(f"criterion must be 'aic' or 'bic', got {criterion!r}")
    if method not in ("per-device", "pooled"):
        raise ValueError(f"method must be 'per-device' or 'pooled', got {method!r}")
    if intervals not in ("analytic", "bootstrap"):
        raise ValueError(f"intervals must be 'analytic' or 'bootstrap', got {intervals!r}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if n_boot is not None and n_boot < 10:
        raise ValueError(f"n_boot must be >= 10 for percentile intervals, got {n_boot}")
    kinds = list(FAMILY_KINDS if kinds is None else kinds)
    unknown = [k for k in kinds if k not in FAMILY_KINDS]
    if unknown or not kinds:
        raise ValueError(f"unknown families {unknown}; known: {', '.join(FAMILY_KINDS)}")
    wmap = weight_map_for(traces, g_mid, g_scale)
    if likelihood and method != "per-device":
        raise ValueError("likelihood refines per-device fits: it needs method 'per-device'")
    if likelihood and cycle_noise is False:
        raise ValueError("likelihood models the cycle noise: it cannot run with cycle_noise off")
    if anchor is not None and not 0.0 <= anchor <= 0.5:
        raise ValueError(f"anchor must be in [0, 0.5], got {anchor}")
    data = pulse_data(traces, wmap, anchor, keep)
    if gls:
        data = _with_read_share(data, anchor)
    if cycle_noise is None:
        cycle_noise = likelihood or data.anchor < CENSORED_ANCHOR
    data.quality["censored_mean"] = bool(cycle_noise)
    try:
        table = fit_tabulated(data, n_bins) if cycle_noise or "tabulated" in kinds else None
    except ValueError as err:
        if kinds == ["tabulated"]:
            raise
        if "tabulated" in kinds:  # the other families still fit: the report says why this one is missing
            kinds.remove("tabulated")
            data.quality["tabulated"] = f"not fitted: {err}"
        table = None
    noise0 = table_noise(table, data, n_bins, wmap.g_scale) if cycle_noise and table else None
    if noise0 is None and likelihood:
        raise ValueError("likelihood needs the cycle noise measured first, and the traces' tables gave none")
    n_fitted = len(fitted_devices(data))
    two_stage = method == "per-device" and n_fitted >= MIN_DEVICES
    if likelihood and not two_stage:
        raise ValueError(
            f"likelihood refines per-device fits: it needs at least {MIN_DEVICES} devices with enough "
            f"increments, and the traces have {n_fitted} (fit without likelihood)"
        )
    start_data = data
    if two_stage and data.n > START_SAMPLE:  # the pooled fit only gives the per-device fits their start
        sample = np.zeros(data.n, bool)
        sample[np.random.default_rng(0).choice(data.n, START_SAMPLE, replace=False)] = True
        start_data = data.subset(sample)
    job = FamilyJob(data, start_data, n_nodes, noise0, table, n_bins, two_stage, shared=not likelihood)
    specs = job.specs()
    results = fit_each_family(job, kinds, workers, progress)
    pooled_fits = {k: r[0] for k, r in results.items()}
    fits = {k: r[1] for k, r in results.items()}
    per = {k: r[2] for k, r in results.items() if two_stage}
    if intervals == "bootstrap" and two_stage:
        for k in kinds:
            if specs.get(k) is not None and per[k] and not fits[k].shared:
                _bootstrap_devices(specs[k], fits[k], per[k], data, n_boot, seed)
    best = min(fits.values(), key=lambda f: getattr(f, criterion))
    if best.shared and start_data is not data:  # its one parameter set is the subsample fit that started them
        best = fits[best.kind] = refit_shared(specs[best.kind], best, data)
    ml = None
    if likelihood and best.kind != "tabulated" and per.get(best.kind):  # ranked by least squares, then refined
        fam = specs[best.kind]
        per[best.kind], ml = refine_population(fam, per[best.kind], data, progress)
        best = fits[best.kind] = summarize(fam, pooled_fits[best.kind], per[best.kind], data)
        if intervals == "bootstrap":
            _bootstrap_devices(fam, best, per[best.kind], data, n_boot, seed)
        best.interval = f"maximum likelihood per device; {best.interval}"
    if likelihood:
        data.quality["likelihood"] = (
            "applied: the best family's per-device fits refined by maximum likelihood"
            if ml is not None
            else f"not applied: the best family, {best.kind}, has no per-device parameters to refine"
        )
    if intervals == "bootstrap" and best.kind != "tabulated" and (best.shared or not per.get(best.kind)):
        bootstrap_pooled(specs[best.kind], best, data, n_boot or N_BOOT_POOLED, seed, progress)
        best.flags = identification(specs[best.kind], best, data)
    noise = estimate_noise(best, data, wmap.g_scale)
    if ml is not None:  # the likelihood measured both noises on every device: they replace the residuals' estimate
        form = "additive" if noise_form(best.device) == "additive" else "multiplicative"
        noise.update(
            {
                "form": form,
                f"sigma_{form}": ml["sigma"],
                "read_noise": ml["read_noise"],
                "read_noise_g": ml["read_noise"] * wmap.g_scale,
                "likelihood": ml,
            }
        )
    if not keep:
        model = _export_device(best, dict(noise), {})
        predicted = predicted_outliers(traces, wmap, data, model, noise["read_noise"])
        if predicted:
            try:
                return fit(**{**call, "keep": tuple(predicted)})
            except ValueError as err:  # a family's fit fails on them: this fit stands, and the report says why
                data.quality["kept_predicted"] = f"{len(predicted)} predicted outliers left out: refit failed ({err})"
    if not spread or data.n_devices < 3:
        spread_info = {"family": best.kind, "dtod": {}, "message": "not estimated"}
    elif best.kind == "tabulated":
        spread_info = spread_tabulated(best, data)
    else:
        spread_info = estimate_spread(
            specs[best.kind], best, data, progress=progress, per_device=per.get(best.kind) or None
        )
    device = _export_device(best, noise, spread_info)
    mean_dev = device if cycle_noise else device.model_copy(update={"dw_min_std": 0.0})  # the increment model's
    overlay = [model_trace(mean_dev, traces, wmap, d) for d in range(min(2, traces.n_devices))]
    return FitResult(
        wmap,
        fits,
        criterion,
        noise,
        spread_info,
        device,
        data,
        source,
        "per-device" if two_stage else "pooled",
        overlay,
    )
