"""Bootstrap intervals over devices and cycles (percentile intervals from refits of resampled data).

A population is two levels of sampling: devices drawn from the population, cycles measured on each device.
A resample draws n devices with replacement, then, within each drawn device, as many of its cycles as it
has, with replacement (a cycle: an up run and the down run after it, the increments of each kept whole and
in order, so the lag-1 correlation of read noise stays inside a cycle). The pooled fit is refitted to every
resample (from the pooled solution) and the 2.5th and 97.5th percentiles of the refitted parameters are the
95% interval; these intervals hold the device-to-device spread of the population, which the Jacobian
sandwich (increments independent up to lag 1) does not.

The per-device method already has each device's estimate, which holds that device's cycle noise: resampling
the devices' estimates (the first level alone) gives intervals for the population value that hold both
levels (for nested data the first-level resample is the consistent one; resampling the second level too
counts the within-device noise twice). Davison & Hinkley, Bootstrap Methods and their Application (1997),
section 3.8.

With few devices a plain percentile interval is too narrow (it is the bootstrap analogue of a normal interval
with the standard deviation divided by n, not n - 1); the intervals here are expanded percentile intervals
(Hesterberg, The American Statistician 69 (2015) 371, arXiv:1411.5279): the quantiles at
Phi(-+ sqrt(n / (n - 1)) t(0.975, n - 1)) instead of 2.5% and 97.5%, with n the resampled units (devices,
or the cycles of a single device).
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from tqdm import tqdm

from aimc.calibration.families import Family
from aimc.calibration.family_fit import FamilyFit, refit
from aimc.calibration.pulse_data import PulseData
from aimc.common import seeds

N_BOOT_POOLED = 200  # default number of resamples of a pooled fit (each one a refit)
N_BOOT_POPULATION = 2000  # default number of resamples of per-device estimates (each one a median)
LEVEL = 0.95


def cycle_ids(data: PulseData) -> np.ndarray:
    """Cycle index of every increment (numbered over all devices): a device's increments in read order start
    a new cycle at the device's first increment and at every up increment after a down one."""
    new = np.ones(data.n, bool)
    if data.n > 1:
        new[1:] = (data.device[1:] != data.device[:-1]) | (data.up[1:] & ~data.up[:-1])
    return np.cumsum(new) - 1


def resample(data: PulseData, rng: np.random.Generator, cycles: np.ndarray | None = None) -> np.ndarray:
    """Indices of one two-level resample of the increments (module docstring): devices with replacement, then
    each drawn device's cycles with replacement, every cycle's increments whole and in order."""
    cycles = cycle_ids(data) if cycles is None else cycles
    starts = np.flatnonzero(np.r_[True, cycles[1:] != cycles[:-1]])
    ends = np.r_[starts[1:], data.n]
    dev_of_cycle = data.device[starts]
    present = np.unique(dev_of_cycle)
    parts = []
    for d in rng.choice(present, size=len(present), replace=True):
        own = np.flatnonzero(dev_of_cycle == d)
        for c in rng.choice(own, size=len(own), replace=True):
            parts.append(np.arange(starts[c], ends[c]))
    return np.concatenate(parts)


def expanded_tail(n_units: int, level: float = LEVEL) -> float:
    """Lower quantile of the expanded percentile interval for n_units resampled units (module docstring)."""
    if n_units < 2:
        return (1 - level) / 2
    t = float(stats.t.ppf((1 + level) / 2, n_units - 1))
    return float(stats.norm.cdf(-np.sqrt(n_units / (n_units - 1)) * t))


def percentile_ci(
    samples: np.ndarray, names: tuple[str, ...] | list[str], n_units: int, level: float = LEVEL
) -> dict[str, tuple[float, float]]:
    """Expanded percentile intervals: per column of samples (n_boot, k), its quantiles at `expanded_tail`
    and 1 - that."""
    tail = expanded_tail(n_units, level)
    lo, hi = np.quantile(samples, [tail, 1 - tail], axis=0)
    return {p: (float(a), float(b)) for p, a, b in zip(names, lo, hi)}


def population_samples(theta: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Medians over n devices drawn with replacement from the per-device estimates theta (n, k): (n_boot, k)."""
    rng = seeds.generator(int(seed), seeds.BOOTSTRAP)
    idx = rng.integers(0, len(theta), size=(n_boot, len(theta)))
    return np.median(theta[idx], axis=1)


def bootstrap_population(fit: FamilyFit, theta: np.ndarray, n_boot: int = N_BOOT_POPULATION, seed: int = 0) -> None:
    """Set the intervals of a per-device population fit (the median of theta, per-device estimates (n, k)) to
    expanded percentile intervals of that median over n_boot device resamples; standard errors: the
    resamples' std."""
    samples = population_samples(theta, n_boot, seed)
    names = list(fit.params)
    fit.ci = percentile_ci(samples, names, len(theta))
    fit.stderr = {p: float(s) for p, s in zip(names, samples.std(axis=0, ddof=1))}
    fit.interval = (
        f"bootstrap over {len(theta)} devices (per-device estimates resampled), {n_boot} resamples, "
        f"expanded percentile, seed {seed}"
    )


def bootstrap_pooled(
    fam: Family, fit: FamilyFit, data: PulseData, n_boot: int = N_BOOT_POOLED, seed: int = 0, progress: bool = False
) -> np.ndarray:
    """Set the intervals of a pooled fit to expanded percentile intervals over n_boot two-level resamples of devices and
    cycles, each refitted from the pooled solution; standard errors: the refits' std. Returns the refitted
    parameters (n_boot, k)."""
    rng = seeds.generator(int(seed), seeds.BOOTSTRAP)
    cycles = cycle_ids(data)
    theta0 = np.array(list(fit.params.values()))
    out = np.empty((n_boot, len(theta0)))
    for b in tqdm(range(n_boot), desc=f"{fam.kind} bootstrap", unit="resample", disable=not progress, leave=False):
        out[b] = refit(fam, data.subset(resample(data, rng, cycles)), theta0)
    n_dev, n_cyc = len(np.unique(data.device)), int(cycles[-1]) + 1
    fit.ci = percentile_ci(out, fam.params, n_dev if n_dev > 1 else n_cyc)
    fit.stderr = {p: float(s) for p, s in zip(fam.params, out.std(axis=0, ddof=1))}
    fit.interval = (
        f"bootstrap over {n_dev} devices and their {n_cyc} cycles, {n_boot} refits, expanded percentile, seed {seed}"
    )
    return out
