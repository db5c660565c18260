"""Data quality of pulse traces before any fit: outlier increments (glitch reads or steps) found without a
model, so that every family is fitted to the same increments.

An increment is an outlier when it is far from the increments of the same polarity at about the same weight
on two counts at once: more than `K_NOISE` robust standard deviations (1.4826 x the median absolute
deviation) from the median of its bin, and more than `K_STEP` times the largest typical step (99th
percentile of |step| of that polarity) away from it. The first count alone flags legitimate steps next to
a plateau of zero increments in noise-free data; the second alone misses glitches on small-step devices.
A Gaussian increment passes the first with probability 1 - 1e-15, so flags are glitches, not noise.
"""

from __future__ import annotations

import numpy as np

K_NOISE = 8.0  # robust standard deviations from the bin median
K_STEP = 2.0  # times the 99th percentile of the polarity's |step per pulse|
N_BINS = 20  # equal-count bins of the midpoint weight per polarity
MIN_INCREMENTS = 20  # a device with fewer usable increments (or fewer than 5 of a polarity) is listed as sparse


def outliers(m: np.ndarray, dw: np.ndarray, up: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask of outlier increments, expected step per pulse there: the bin median).

    m: midpoint weight, dw: increment, up: polarity is up, k: pulses in the increment (steps per pulse dw/k
    are compared, so reads k pulses apart join the bins of single pulses)."""
    y = dw / k
    flag = np.zeros(len(y), bool)
    expected = np.zeros(len(y))
    for sel in (up, ~up):
        idx = np.flatnonzero(sel)
        if len(idx) < 2 * N_BINS:
            continue
        big = float(np.percentile(np.abs(y[idx]), 99))
        order = idx[np.argsort(m[idx], kind="stable")]
        for part in np.array_split(order, N_BINS):
            med = float(np.median(y[part]))
            dev = np.abs(y[part] - med)
            rstd = 1.4826 * float(np.median(dev))
            flag[part] = (dev > K_NOISE * rstd) & (dev > K_STEP * big)
            expected[part] = med
    return flag, expected


def sparse_devices(device: np.ndarray, up: np.ndarray, n_devices: int) -> list[int]:
    """Devices with fewer than MIN_INCREMENTS increments or fewer than 5 of either polarity."""
    n_up = np.bincount(device[up], minlength=n_devices)
    n_down = np.bincount(device[~up], minlength=n_devices)
    return [d for d in range(n_devices) if n_up[d] + n_down[d] < MIN_INCREMENTS or min(n_up[d], n_down[d]) < 5]
