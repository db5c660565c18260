"""Data quality of pulse traces before any fit: outlier increments (glitch reads or steps) found without a
model, so that every family is fitted to the same increments.

An increment is an outlier when it is far from the increments of the same polarity at about the same weight
on two counts at once: more than `K_NOISE` robust standard deviations (1.4826 x the median absolute
deviation) from the median of its bin, and more than `K_STEP` times the largest typical step (over the bins,
|median| + Z99 robust standard deviations: the 99th percentile of |step| without the glitches, which set a
plain percentile once they are a percent) away from it. The first count alone flags legitimate steps next to
a plateau of zero increments in noise-free data; the second alone misses glitches on small-step devices.
A Gaussian increment passes the first with probability 1 - 1e-15, so flags are glitches, not noise.
"""

from __future__ import annotations

import numpy as np

K_NOISE = 8.0  # robust standard deviations from the bin median
K_STEP = 2.0  # times the largest typical step: over the bins of a polarity, |median| + Z99 robust std
Z99 = 2.326  # the 99th percentile of a normal, in standard deviations
N_BINS = 20  # equal-count bins of the midpoint weight per polarity
MIN_INCREMENTS = 20  # a device with fewer usable increments (or fewer than 5 of a polarity) is listed as sparse


def outliers(m: np.ndarray, dw: np.ndarray, up: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask of outlier increments, expected step per pulse there: the bin median).

    m: midpoint weight, dw: increment, up: polarity is up, k: pulses in
    the increment (steps per pulse dw/k are compared, so reads k pulses apart join the bins of single pulses)."""
    y = dw / k
    flag = np.zeros(len(y), bool)
    expected = np.zeros(len(y))
    for sel in (up, ~up):
        idx = np.flatnonzero(sel)
        if len(idx) < 2 * N_BINS:
            continue
        order = idx[np.argsort(m[idx], kind="stable")]
        parts = np.array_split(order, N_BINS)
        med = np.array([np.median(y[part]) for part in parts])
        rstd = np.array([1.4826 * np.median(np.abs(y[part] - c)) for part, c in zip(parts, med)])
        big = float(np.max(np.abs(med) + Z99 * rstd))
        for part, c, r in zip(parts, med, rstd):
            dev = np.abs(y[part] - c)
            flag[part] = (dev > K_NOISE * r) & (dev > K_STEP * big)
            expected[part] = c
    return flag, expected


def robust_scale(m: np.ndarray, z: np.ndarray, up: np.ndarray) -> float:
    """The robust std of z about its local median: per polarity, 1.4826 x the median absolute deviation from the
    median in N_BINS equal-count bins of m, the median over the bins of both polarities (NaN without 2 N_BINS
    values of a polarity). Glitches of a few percent do not move it; the spread of the mean over a bin adds to it."""
    scales = []
    for sel in (up, ~up):
        idx = np.flatnonzero(sel)
        if len(idx) < 2 * N_BINS:
            continue
        for part in np.array_split(idx[np.argsort(m[idx], kind="stable")], N_BINS):
            scales.append(1.4826 * float(np.median(np.abs(z[part] - np.median(z[part])))))
    return float(np.median(scales)) if scales else float("nan")


def sparse_devices(device: np.ndarray, up: np.ndarray, n_devices: int) -> list[int]:
    """Devices with fewer than MIN_INCREMENTS increments or fewer than 5 of either polarity."""
    n_up = np.bincount(device[up], minlength=n_devices)
    n_down = np.bincount(device[~up], minlength=n_devices)
    return [d for d in range(n_devices) if n_up[d] + n_down[d] < MIN_INCREMENTS or min(n_up[d], n_down[d]) < 5]
