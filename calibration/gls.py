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
from scipy import optimize


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


SEGMENT = 16  # increments between the knots of a run's trend, and the shortest run `read_share` uses
SAMPLE = 20000  # increments `read_share` takes at most (whole runs, in order)


def runs_of_one_polarity(up: np.ndarray, follows: np.ndarray) -> list[np.ndarray]:
    """Index arrays of the runs of SEGMENT or more consecutive increments of one polarity, in order, up to SAMPLE
    increments in all."""
    breaks = np.flatnonzero(~follows[1:] | (up[1:] != up[:-1])) + 1
    out, total = [], 0
    for seg in np.split(np.arange(len(up)), breaks):
        if len(seg) >= SEGMENT and total < SAMPLE:
            out.append(seg)
            total += len(seg)
    return out


def _trend_basis(n: int) -> np.ndarray:
    """Hat functions in the pulse index of a run of n increments, knots SEGMENT apart: a linear spline."""
    knots = np.linspace(0.0, n - 1.0, max(2, round((n - 1) / SEGMENT) + 1))
    t = np.arange(n, dtype=float)[:, None]
    width = knots[1] - knots[0]
    return np.maximum(0.0, 1.0 - np.abs(t - knots[None, :]) / width)


def read_share(dw: np.ndarray, up: np.ndarray, follows: np.ndarray, k: np.ndarray) -> float | None:
    """The read noise's share a (module docstring) by restricted maximum likelihood: each run of one polarity
    (`runs_of_one_polarity`) is its mean step's linear spline in the pulse index plus errors with the increments'
    correlation at share a; the variance is profiled out. The runs are kept apart (the reads they share at their
    ends are left out). None without such runs."""
    runs = runs_of_one_polarity(up, follows)
    if not runs:
        return None
    bases = [_trend_basis(len(seg)) for seg in runs]

    def neg_loglik(share: float) -> float:
        rss, n, p, logdet = 0.0, 0, 0, 0.0
        for seg, x in zip(runs, bases):
            chain = np.ones(len(seg), bool)
            chain[0] = False
            w = Whitener(chain, k[seg], share)
            zy, zx = w(dw[seg]), w(x)
            coef, *_ = np.linalg.lstsq(zx, zy, rcond=None)
            r = zy - zx @ coef
            rss += float(r @ r)
            n, p = n + len(seg), p + x.shape[1]
            logdet += 2.0 * float(np.sum(np.log(w.diag))) + float(np.linalg.slogdet(zx.T @ zx)[1])
        return 0.5 * (n - p) * np.log(max(rss, 1e-300) / (n - p)) + 0.5 * logdet

    res = optimize.minimize_scalar(neg_loglik, bounds=(0.0, 0.5), method="bounded", options={"xatol": 1e-3})
    return float(res.x)
