"""Mean and variance of a clipped (censored) normal step: a pulse draws a Gaussian step X ~ N(mu, sd^2) and the
device clips the weight to its bounds afterwards (aihwkit 1.1.0's pulsed devices; devices.pulses.noisy_pulse),
so the change is Y = clip(X, a, b) with a <= 0 <= b the room to the bounds behind and ahead of the pulse.

With alpha = (a - mu) / sd, beta = (b - mu) / sd and D = Y - mu = clip(sd Z, a - mu, b - mu), Z ~ N(0, 1):

    E[D]   = (a - mu) Phi(alpha) + (b - mu) Phi(-beta) + sd (phi(alpha) - phi(beta))
    E[D^2] = (a - mu)^2 Phi(alpha) + (b - mu)^2 Phi(-beta)
             + sd^2 (Phi(beta) - Phi(alpha) + alpha phi(alpha) - beta phi(beta))

E[Y] = mu + E[D], Var[Y] = E[D^2] - E[D]^2 (centred on mu: no cancellation for sd << |mu|). sd = 0 gives
clip(mu, a, b) and variance 0.

The fit reads an increment against its anchor x = w0 + a Y (`pulse_data`), where the room is (w_max - x) /
(1 - a) ahead and (x - w_min) / (1 - a) behind (`pulse_data.predict`). At the start anchor (a = 0, chosen where
cycle noise dominates the reads) the room is that of the pulse's own start weight and the censored mean is
exact; at the midpoint (a = 1/2) a clipped step ends on the bound from w0 = 2 x - w_max, so x moves by half of
w0 and the room is only approximate (docs/calibration.md).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

_INV_SQRT_2PI = 0.3989422804014327


def _phi(x: np.ndarray) -> np.ndarray:
    return _INV_SQRT_2PI * np.exp(-0.5 * x * x)


TAIL = 8.0  # a bound more than TAIL sd from mu moves the moments by under sd phi(TAIL) = 5e-15 sd: not evaluated


def _flat(*arrays) -> list[np.ndarray]:
    """The arrays broadcast to one shape and flattened (float64 copies)."""
    return [np.array(v, float).ravel() for v in np.broadcast_arrays(*(np.asarray(v, float) for v in arrays))]


def _near(mu: np.ndarray, sd: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where a bound lies within TAIL sd of mu (elsewhere the moments are those of clip(mu, a, b) to float64
    precision: mu and sd^2 between the bounds, the bound and 0 beyond one; evaluating the formulas there would
    only lose digits, mu + (b - mu) for mu >> b)."""
    return (sd > 0) & ((np.abs(b - mu) < TAIL * sd) | (np.abs(mu - a) < TAIL * sd))


def _deviation_moments(mu, sd, a, b) -> tuple[np.ndarray, np.ndarray]:
    """(E[D], E[D^2]) of D = clip(X, a, b) - mu (module docstring), sd > 0."""
    lo, hi = a - mu, b - mu
    alpha, beta = lo / sd, hi / sd
    c_lo, c_hi = ndtr(alpha), ndtr(-beta)
    p_lo, p_hi = _phi(alpha), _phi(beta)
    d1 = lo * c_lo + hi * c_hi + sd * (p_lo - p_hi)
    d2 = lo * lo * c_lo + hi * hi * c_hi + sd * sd * (1.0 - c_hi - c_lo + alpha * p_lo - beta * p_hi)
    return d1, d2


def clipped_normal_mean(mu, sd, a, b) -> np.ndarray:
    """E[clip(X, a, b)], X ~ N(mu, sd^2), elementwise (a <= b, sd >= 0); the increment model's hot path."""
    shape = np.broadcast_shapes(*(np.shape(v) for v in (mu, sd, a, b)))
    mu, sd, a, b = _flat(mu, sd, a, b)
    out = np.clip(mu, a, b)
    near = _near(mu, sd, a, b)
    if near.any():
        out[near] = mu[near] + _deviation_moments(mu[near], sd[near], a[near], b[near])[0]
    return out.reshape(shape)


def clipped_normal_moments(mu, sd, a, b) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of clip(X, a, b), X ~ N(mu, sd^2), elementwise (weight units; a <= b, sd >= 0)."""
    shape = np.broadcast_shapes(*(np.shape(v) for v in (mu, sd, a, b)))
    mu, sd, a, b = _flat(mu, sd, a, b)
    mean = clipped_normal_mean(mu, sd, a, b).reshape(shape)
    var = np.where((sd > 0) & (a < mu) & (mu < b), sd * sd, 0.0)
    near = _near(mu, sd, a, b)
    if near.any():
        d1, d2 = _deviation_moments(mu[near], sd[near], a[near], b[near])
        var[near] = np.maximum(d2 - d1 * d1, 0.0)
    return mean, var.reshape(shape)
