"""Per-device fits, then the population (a two-stage, summary-statistics random-effects fit).

Stage 1 fits a family to every device alone (from the pooled solution). Stage 2 describes the population by
the distribution of the per-device parameters: the nominal parameter is their median, its 95% interval the
distribution-free interval of the median between two order statistics, (x_(c), x_(n+1-c)) with c the largest
rank for which 2 P(Binomial(n, 1/2) < c) <= 0.05 (16 devices: the 4th and 13th estimates, coverage 97.9%;
with 5 or fewer devices no such rank exists and the interval is (min, max), its coverage 1 - 2^(1 - n) stated).
That interval holds both the estimation noise of each device and the device-to-device spread, and it does
not need the pooled model to describe every device, which it does not under spread (a pooled fit of devices
with different bounds sees a smeared response). The median, not the mean: where one device's reads pin a
shape parameter weakly its estimate scatters with a long tail (PowStep's exponent trades against the
bounds), which moves the mean and not the median; the population's own spread is symmetric in the simulators
(normal device-to-device factors), where the two agree. On 30 aihwkit PowStep populations the mean's
intervals held pow_gamma 2.0 in 20, the median's in 26 (docs/calibration.md). The standard error is the
interval's width over 2 z(0.975) (McKean and Schrader, Commun. Statist. Simul. Comput. 13 (1984) 751). The
family is chosen by the criterion summed over the devices' own fits (each device has its own parameters: k
per device).

Where the devices do not differ beyond their estimation noise, the family's population is the shared model:
one parameter set (the least-squares fit of all increments) for every device. It is kept unless a
likelihood-ratio test rejects it at SPREAD_LEVEL: sum over devices of n ln(RSS_shared / RSS_own) (Gaussian
increments, a variance per device) against chi2 with k (devices - 1) degrees of freedom. Its criterion
charges its k parameters once, over all increments. Averaging per-device parameters that
trade off within one device's data leaves the response they share (16 PowStep devices without spread whose
reads stop short of the bounds: inside the reads the mean of the per-device fits steps 13-26% above the truth,
the shared fit 1-2%; docs/calibration.md).

Threads: the devices' own fits run on the threads the caller gives (`fit` runs them on Numba's thread count,
NUMBA_NUM_THREADS, where it fits the families in this process; the increment kernels release the GIL), each
fit alone, so the results do not depend on the thread count. `family_pool` fits the families in processes.

Identification: a parameter is flagged, not just given a number, when its box limit stops it, when its
interval is wider than half its box, when its interval has zero width (no curvature: the data do not move
it), or when it is a bound beyond the measured range of the reads by more than EXTRAPOLATED x the range.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
from scipy import stats
from tqdm import tqdm

from aimc.calibration.families import Family
from aimc.calibration.family_fit import (
    FamilyFit,
    criterion_squares,
    diagnostics,
    fit_family,
    fit_tabulated,
)
from aimc.calibration.pulse_data import PulseData
from aimc.calibration.quality import sparse_devices
from aimc.devices import parse_device

EXTRAPOLATED = 0.1  # a bound further than this fraction of the measured range beyond it is extrapolated
MIN_DEVICES = 3  # fewer fitted devices: the pooled fit is kept
SPREAD_LEVEL = 0.05  # the devices' own parameter sets replace the shared one where it is rejected at this level
OWN_STARTS = 2  # a device's fit starts from the pooled solution and the family's first starting points on its own data


def fitted_devices(data: PulseData) -> list[int]:
    """Devices with enough increments of both polarities for a fit of their own."""
    sparse = set(sparse_devices(data.device, data.up, data.n_devices))
    return [d for d in range(data.n_devices) if d not in sparse]


def identification(fam: Family | None, fit: FamilyFit, data: PulseData) -> dict[str, str]:
    """Parameter -> why the data do not identify it (empty when all are identified); module docstring."""
    flags: dict[str, str] = {}
    box = dict(zip(fam.params, zip(*fam.box(data)))) if fam else {}
    for p in fit.at_bound:
        flags[p] = "stopped at its box limit"
    for p, (lo, hi) in fit.ci95.items():
        if p in flags or not (math.isfinite(lo) and math.isfinite(hi)):
            continue
        if hi - lo <= 1e-12 * max(abs(fit.params[p]), 1e-12) and p in box:
            flags[p] = "zero-width interval: the data do not move it"
        elif p in box and hi - lo > 0.5 * (box[p][1] - box[p][0]):
            flags[p] = "interval wider than half its box"
    span = data.hi - data.lo
    b_lo, b_hi = fit.device.bounds
    for p, beyond in (
        ("w_max", b_hi - data.hi),
        ("w_min", data.lo - b_lo),
        ("tau", max(b_hi - data.hi, data.lo - b_lo)),
    ):
        if p in fit.params and p not in flags and beyond > EXTRAPOLATED * span:
            flags[p] = f"bound extrapolated {beyond / span:.0%} of the measured range beyond the reads"
    return flags


def device_data(data: PulseData, d: int) -> PulseData:
    """Device d's increments, with its own plateaus as the bound estimates."""
    return replace(data.subset(data.device == d), lo=float(data.dev_lo[d]), hi=float(data.dev_hi[d]))


def fit_population(
    fam: Family | None,
    pooled: FamilyFit,
    data: PulseData,
    n_bins: int = 20,
    progress: bool = False,
    shared: bool = True,
    threads: int = 1,
) -> tuple[FamilyFit, dict[int, FamilyFit]]:
    """(population fit, per-device fits by device index) of one family; `pooled`: a fit of all devices (or
    of a subsample of their increments), the per-device fits' start; fam None: the tabulated family
    (per-device tables for the criterion, the pooled table as the population). shared: the shared model
    where the devices' own fits do not reject it (`shared_or_own`); off: always the median of the per-device
    fits. With fewer than MIN_DEVICES fittable devices: the pooled fit (its sandwich intervals) and no
    per-device fits. threads: the devices' fits run on this many threads (module docstring)."""
    used = fitted_devices(data)
    if len(used) < MIN_DEVICES:
        pooled.flags = identification(fam, pooled, data)
        return pooled, {}
    theta0 = np.array(list(pooled.params.values()))
    kind = fam.kind if fam else "tabulated"

    def own_fit(d: int) -> FamilyFit | None:
        try:
            if fam is None:  # a device's table spans the population's plateaus
                return fit_tabulated(data.subset(data.device == d), n_bins)
            own = device_data(data, d)  # a family's box and starts come from the device's own plateaus
            return fit_family(fam, own, starts=[theta0, *fam.starts(own)[:OWN_STARTS]])
        except ValueError:  # a device whose table cannot be built: charged with the pooled table
            return None

    bar = dict(total=len(used), desc=f"{kind} per device", unit="device", disable=not progress, leave=False)
    if threads == 1:  # in this thread, whose Numba thread count the caller set
        fits = [own_fit(d) for d in tqdm(used, **bar)]
    else:
        pool = ThreadPoolExecutor(min(len(used), threads))  # module docstring: threads
        try:  # results in device order, whichever finishes first
            fits = list(tqdm(pool.map(own_fit, used), **bar))
        finally:  # an interrupt drops the fits not started
            pool.shutdown(cancel_futures=True)
    per = {d: f for d, f in zip(used, fits) if f is not None}
    r = pooled_residuals(pooled, data)
    population = summarize(fam, pooled, per, data, r)
    if fam is None or not shared:
        return population, per
    return shared_or_own(fam, pooled, population, per, data, r), per


def pooled_residuals(pooled: FamilyFit, data: PulseData) -> np.ndarray:
    """The residuals of all of `data` under the `pooled` fit, which may be of a subsample."""
    return pooled.residuals if pooled.n == data.n else data.dw - data.predict(pooled.device)


def _device_rss(r: np.ndarray, data: PulseData) -> tuple[np.ndarray, np.ndarray]:
    """(rss, increments) of every device of `data` for its residuals r."""
    return (
        np.bincount(data.device, criterion_squares(r, data), minlength=data.n_devices),
        np.bincount(data.device, minlength=data.n_devices),
    )


def _shared(fit: FamilyFit, data: PulseData, test: str, r: np.ndarray | None = None) -> FamilyFit:
    """`fit` (one parameter set) as the shared model of all of `data`'s devices, kept by `test`: each device's
    part under it. r: the residuals of all of `data` where `fit` is of a subsample (its intervals stay the
    subsample's); None where `fit` is of `data` itself."""
    if r is not None:
        fit = replace(
            fit,
            rss=float(np.sum(criterion_squares(r, data))),
            n=data.n,
            residuals=r,
            diagnostics=diagnostics(r, data, data.dw - r),
        )
    rss, n = _device_rss(fit.residuals, data)
    return replace(
        fit, parts=tuple((float(rss[d]), int(n[d]), fit.k) for d in range(data.n_devices) if n[d]), shared=test
    )


def shared_or_own(
    fam: Family, pooled: FamilyFit, population: FamilyFit, per: dict[int, FamilyFit], data: PulseData, r: np.ndarray
) -> FamilyFit:
    """The shared model, `pooled` (the least-squares fit of all devices, or of a subsample of their increments:
    `refit_shared`; r its residuals of all of `data`), unless the devices' own fits `per` reject it (module
    docstring); then the per-device `population`."""
    rss, _ = _device_rss(r, data)
    ratio = sum(f.n * math.log(max(rss[d], 1e-300) / max(f.rss, 1e-300)) for d, f in per.items())
    dof = pooled.k * (len(per) - 1)
    p = float(stats.chi2.sf(ratio, dof))
    if p < SPREAD_LEVEL:
        return population
    shared = _shared(
        pooled,
        data,
        f"one parameter set for all {data.n_devices} devices (their own sets: likelihood "
        f"ratio {ratio:.1f} on {dof} degrees of freedom, p = {p:.2f})",
        None if pooled.n == data.n else r,
    )
    shared.flags = identification(fam, shared, data)
    return shared


def refit_shared(fam: Family, shared: FamilyFit, data: PulseData) -> FamilyFit:
    """The shared model `shared` (of a subsample's fit) refitted on all increments of `data` from its
    parameters."""
    out = _shared(fit_family(fam, data, starts=[list(shared.params.values())]), data, shared.shared)
    out.flags = identification(fam, out, data)
    return out


def median_interval(theta: np.ndarray, level: float = 0.95) -> tuple[tuple[np.ndarray, np.ndarray], int, float]:
    """((lower, upper), c, coverage): the distribution-free interval of the median of each column of theta
    (n, k), the c-th smallest and largest values, c the largest rank whose coverage 1 - 2 P(Binomial(n, 1/2) < c)
    is at least `level` (module docstring); with too few rows for that, c = 1 (min, max)."""
    n = len(theta)
    ranks = np.arange(1, max(n // 2, 1) + 1)  # one row: its value, coverage 0
    coverage = 1 - 2 * stats.binom.cdf(ranks - 1, n, 0.5)
    ok = ranks[coverage >= level]
    c = int(ok[-1]) if len(ok) else 1
    s = np.sort(theta, axis=0)
    return (s[c - 1], s[n - c]), c, float(coverage[c - 1])


def summarize(
    fam: Family | None,
    pooled: FamilyFit,
    per: dict[int, FamilyFit],
    data: PulseData,
    pooled_r: np.ndarray | None = None,
) -> FamilyFit:
    """The population fit of per-device fits `per` (module docstring); devices without a fit of their own are
    charged with the `pooled` fit's residuals (pooled_r, default `pooled_residuals`) and parameters."""
    kind = fam.kind if fam else "tabulated"
    r = (pooled_residuals(pooled, data) if pooled_r is None else pooled_r).copy()
    pooled_rss, counts = _device_rss(r, data)
    parts = []
    for d in range(data.n_devices):
        if d in per:
            r[data.device == d] = per[d].residuals
            parts.append((per[d].rss, per[d].n, per[d].k))
        elif counts[d]:  # a sparse device: residuals of the pooled model, its parameters charged in full
            parts.append((float(pooled_rss[d]), int(counts[d]), pooled.k))
    fitted = data.dw - r
    rss = float(np.sum(criterion_squares(r, data)))
    if fam is None:
        return FamilyFit(
            kind,
            pooled.params,
            pooled.stderr,
            [],
            pooled.device,
            rss,
            data.n,
            pooled.k,
            r,
            diagnostics(r, data, fitted),
            pooled.cov,
            "pooled table; criterion over per-device tables",
            tuple(parts),
            None,
            pooled.interval,
        )
    theta = np.array([list(f.params.values()) for f in per.values()])
    n = len(theta)
    median = np.median(theta, axis=0)
    (lo, hi), c, coverage = median_interval(theta)
    se = (hi - lo) / (2 * stats.norm.ppf(0.975))
    params = {p: float(v) for p, v in zip(fam.params, median)}
    device = parse_device(fam.config_fields(median), where=f"{kind} population")
    box_lo, box_hi = (np.asarray(v, float) for v in fam.box(data))
    tol = 1e-6 * (box_hi - box_lo)
    at_limit = (median - box_lo < tol) | (box_hi - median < tol)  # the median itself at the box's limit
    at_bound = [
        p for k, p in enumerate(fam.params) if at_limit[k] or sum(p in g.at_bound for g in per.values()) > n / 2
    ]
    out = FamilyFit(
        kind,
        params,
        {p: float(v) for p, v in zip(fam.params, se)},
        at_bound,
        device,
        rss,
        data.n,
        pooled.k,
        r,
        diagnostics(r, data, fitted),
        np.diag(se**2),
        f"median of {n} per-device fits",
        tuple(parts),
        {p: (float(a), float(b)) for p, a, b in zip(fam.params, lo, hi)},
        f"over {n} devices: estimates {c} and {n + 1 - c} in order, coverage {coverage:.1%}",
    )
    out.flags = identification(fam, out, data)
    return out
