"""Generalised least squares over the read noise that consecutive increments share.

An increment is the difference of two reads, dw_k = w_{k+1} - w_k, so two consecutive increments share the
read w_{k+1} and their errors correlate: with read-noise variance sigma_r^2 and a pulse's cycle-noise variance v,
Var(dw_k) = k v + 2 sigma_r^2 (k pulses) and Cov(dw_{k-1}, dw_k) = -sigma_r^2. In the share of the read noise
a = sigma_r^2 / (v + 2 sigma_r^2) (the anchor of `pulse_data.increment_noise`), consecutive single-pulse
increments correlate by -a: 0 under cycle noise alone, -1/2 under read noise alone. Ordinary least squares on the
increments then weighs every increment as if alone; where read noise dominates, what the data say about the shape
of the response lies in the levels of a run, which carry each read's error once, and the increments' least
squares loses most of it (docs/calibration.md: one LTP/LTD pair at 1% read noise).

The whitened residuals z = L^-1 u of the weighted residuals u (`PulseData.weight`), with L L' the correlation
matrix of the increments (tridiagonal within each chain of increments that follow one another, `PulseData.follows`;
L lower bidiagonal: its Cholesky factor, computed in one pass), are independent with the increments' variance, so
their sum of squares is the generalised least-squares criterion; under read noise alone it equals the sum of
squares of each chain's path of summed residuals about its mean (the level residuals with one offset per chain).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def cholesky_factor(follows: np.ndarray, k: np.ndarray, share: float) -> tuple[np.ndarray, np.ndarray]:
    """(diag, off) of the bidiagonal Cholesky factor L of the increments' correlation matrix: L[i, i] = diag[i],
    L[i, i-1] = off[i] (0 where increment i does not follow i - 1). share: the read noise's share a of a
    single-pulse increment's variance (module docstring), in [0, 1/2]; k: pulses per increment."""
    n = follows.shape[0]
    diag = np.ones(n)
    off = np.zeros(n)
    if share <= 0.0:
        return diag, off
    cycle = (1.0 - 2.0 * share) / share  # v / sigma_r^2
    for i in range(1, n):
        if follows[i]:
            rho = -1.0 / np.sqrt((k[i - 1] * cycle + 2.0) * (k[i] * cycle + 2.0))
            off[i] = rho / diag[i - 1]
            diag[i] = np.sqrt(max(1.0 - off[i] * off[i], 1e-12))
    return diag, off


@njit(cache=True)
def _whiten(u: np.ndarray, diag: np.ndarray, off: np.ndarray) -> np.ndarray:
    """L^-1 u by forward substitution, u (n, p) (column by column)."""
    z = np.empty_like(u)
    for j in range(u.shape[1]):
        prev = 0.0
        for i in range(u.shape[0]):
            prev = (u[i, j] - off[i] * prev) / diag[i]
            z[i, j] = prev
    return z


class Whitener:
    """z = L^-1 u for the increments of one PulseData (module docstring); the identity where share is 0."""

    def __init__(self, follows: np.ndarray, k: np.ndarray, share: float):
        self.share = float(share)
        self.diag, self.off = cholesky_factor(np.ascontiguousarray(follows), np.ascontiguousarray(k, float), share)

    def __call__(self, u: np.ndarray) -> np.ndarray:
        """The whitened residuals of u (n,), or of each column of a Jacobian (n, p)."""
        if self.share <= 0.0:
            return u
        u = np.asarray(u, float)
        z = _whiten(u.reshape(len(u), -1), self.diag, self.off)
        return z.reshape(u.shape)


SHARES = np.linspace(0.0, 0.5, 51)  # the grid of read-noise shares `read_share` searches
SEGMENT = 16  # shortest run of one polarity whose increments `smooth_residuals` fits (a cubic in the pulse index)


def read_share(u: np.ndarray, follows: np.ndarray, k: np.ndarray) -> float:
    """The read noise's share a of the increments' variance (module docstring) that maximises the Gaussian
    likelihood of the weighted residuals u of a mean model fitted without it, on SHARES: -n/2 ln(z'z / n) -
    ln det L, z = L^-1 u (the variance profiled out)."""
    n = len(u)
    best, best_ll = 0.0, -np.inf
    for share in SHARES:
        w = Whitener(follows, k, share)
        z = w(u)
        ll = -0.5 * n * np.log(max(float(z @ z), 1e-300) / n) - float(np.sum(np.log(w.diag)))
        if ll > best_ll:
            best, best_ll = float(share), ll
    return best


def smooth_residuals(dw: np.ndarray, up: np.ndarray, follows: np.ndarray) -> np.ndarray:
    """Residuals of the increments about a cubic in the pulse index fitted to each run of SEGMENT or more
    consecutive increments of one polarity (the mean step changes slowly along a run), NaN elsewhere: a mean model
    that, unlike a fit on the reads' weights, does not take up the read noise of the anchors."""
    out = np.full(len(dw), np.nan)
    breaks = np.flatnonzero(~follows[1:] | (up[1:] != up[:-1])) + 1
    for seg in np.split(np.arange(len(dw)), breaks):
        if len(seg) >= SEGMENT:
            t = np.linspace(-1.0, 1.0, len(seg))
            out[seg] = dw[seg] - np.polyval(np.polyfit(t, dw[seg], 3), t)
    return out
