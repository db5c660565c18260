"""Mean and variance of a clipped (censored) normal step: a pulse draws a Gaussian step X ~ N(mu, sd^2) and the
device clips the weight to its bounds afterwards (aihwkit 1.1.0's pulsed devices; devices.pulses.noisy_pulse),
so the change is Y = clip(X, a, b) with a <= 0 <= b the room to the bounds behind and ahead of the pulse.

With alpha = (a - mu) / sd, beta = (b - mu) / sd and D = Y - mu = clip(sd Z, a - mu, b - mu), Z ~ N(0, 1):

    E[D]   = (a - mu) Phi(alpha) + (b - mu) Phi(-beta) + sd (phi(alpha) - phi(beta))
    E[D^2] = (a - mu)^2 Phi(alpha) + (b - mu)^2 Phi(-beta)
             + sd^2 (Phi(beta) - Phi(alpha) + alpha phi(alpha) - beta phi(beta))

E[Y] = mu + E[D], Var[Y] = E[D^2] - E[D]^2 (centred on mu: no cancellation for sd << |mu|). sd = 0 gives
clip(mu, a, b) and variance 0.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

_INV_SQRT_2PI = 0.3989422804014327


def _phi(x: np.ndarray) -> np.ndarray:
    return _INV_SQRT_2PI * np.exp(-0.5 * x * x)


def clipped_normal_moments(mu, sd, a, b) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of clip(X, a, b), X ~ N(mu, sd^2), elementwise (weight units; a <= b, sd >= 0)."""
    mu, sd, a, b = np.broadcast_arrays(*(np.asarray(v, float) for v in (mu, sd, a, b)))
    pos = sd > 0
    s = np.where(pos, sd, 1.0)
    lo, hi = a - mu, b - mu
    alpha, beta = lo / s, hi / s
    c_lo, c_hi = ndtr(alpha), ndtr(-beta)
    p_lo, p_hi = _phi(alpha), _phi(beta)
    d1 = lo * c_lo + hi * c_hi + s * (p_lo - p_hi)
    d2 = lo * lo * c_lo + hi * hi * c_hi + s * s * (1.0 - c_hi - c_lo + alpha * p_lo - beta * p_hi)
    mean = np.where(pos, mu + d1, np.clip(mu, a, b))
    var = np.where(pos, np.maximum(d2 - d1 * d1, 0.0), 0.0)
    return mean, var
