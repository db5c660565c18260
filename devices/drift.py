"""Power-law conductance drift of an idle array, with aihwkit 1.1.0's DriftParameter names, defaults and
equations (its pulsed devices' `drift_weights`; where its docstring and its binary disagree, the binary).

Drift acts only when an array is left idle (`ConductanceArray.idle`), never during training. Per element
ij a drift exponent nu_ij = nu (1 + nu_dtod xi) is drawn once. Each call advances the drift clock by
T += delta_t / t_0 (delta_t in seconds, t_0 in seconds: T counts units of t_0). An element whose weight
moved by more than reset_tol since the end of the previous call (an update, a reset, a decay) restarts:
t0_ij = T, w0_ij = w, and does not drift in that call. Every other element takes

    nu_a = nu_ij + nu_std nu_ij xi - nu_k ln((w - w_offset) / wg_ratio + g_offset) + nu_k log_g0
    f    = max(T - t0_ij, 1) ^ (-nu_a)
    w    = w0_ij f + a (f - 1),   a = g_offset wg_ratio + w_offset (0 where |a| < reset_tol)

(xi fresh standard normals per call; the nu_k term only where nu_k != 0), then every element gets
w += w_noise_std xi: the noise of a call replaces that of the previous one (w0 stays), it does not
accumulate. Drift is on only where nu > 0 (aihwkit's binary: otherwise nu_k and w_noise_std do nothing).
The clock and the restart points start on the first call (T = 0, t0 = 0, w0 the weights then), so a first
call with delta_t = t gives w (t / t_0)^(-nu) for t > t_0: the closed form of a weight programmed at
time 0. With all fields at their defaults drift is off and costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field

from aimc.common.validation import Float32Config


class DriftParameter(Float32Config):
    """aihwkit 1.1.0's DriftParameter of a pulsed device (all off by default, as there)."""

    nu: float = Field(0.0, ge=0, description="mean drift exponent nu (dimensionless); drift is on where nu > 0")
    nu_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of nu, drawn once")
    nu_std: float = Field(0.0, ge=0, description="cycle-to-cycle relative std of nu, drawn every call")
    t_0: float = Field(1.0, gt=0, description="time unit of the drift clock (seconds): f = (t / t_0)^-nu")
    reset_tol: float = Field(
        1e-7,
        ge=0,
        description="a weight change above this between two calls restarts the element's drift (weight units)",
    )
    wg_ratio: float = Field(1.0, gt=0, description="(w_max - w_min) / (g_max - g_min): weight per conductance")
    g_offset: float = Field(0.0, description="g_min: conductance of the weight w_offset")
    w_offset: float = Field(0.0, description="w(g_min): the weight g_min maps to")
    nu_k: float = Field(0.0, description="dependence of nu on the conductance: nu - nu_k ln(g / g0)")
    log_g0: float = Field(0.0, description="ln(g0) of the nu_k term")
    w_noise_std: float = Field(0.0, ge=0, description="std of Gaussian noise added after each call (weight units)")

    @property
    def enabled(self) -> bool:
        """Whether idle time drifts at all: nu > 0 (as aihwkit's binary, where nu = 0 turns off the nu_k term
        and the noise as well)."""
        return self.nu > 0


@dataclass
class DriftState:
    """The drift of one array: nu (out, in) the drawn exponents, time T (units of t_0), t0 (out, in) each
    element's restart time, w0 (out, in) its weight then, w_prev (out, in) its weight after the last call."""

    nu: np.ndarray
    time: float
    t0: np.ndarray
    w0: np.ndarray
    w_prev: np.ndarray


def start_drift(param: DriftParameter, w: np.ndarray, rng: np.random.Generator) -> DriftState:
    """The drift state of weights w at the first call: exponents nu (1 + nu_dtod xi) from rng, clock 0."""
    nu = np.full(w.shape, float(param.nu))
    if param.nu_dtod > 0:
        nu *= 1 + param.nu_dtod * rng.standard_normal(w.shape)
    return DriftState(nu=nu, time=0.0, t0=np.zeros(w.shape), w0=w.astype(np.float64), w_prev=w.astype(np.float64))


def drift_weights(
    param: DriftParameter, state: DriftState, w: np.ndarray, delta_t: float, rng: np.random.Generator
) -> None:
    """One drift call of delta_t seconds on weights w (float32, changed in place; module docstring)."""
    state.time += float(delta_t) / param.t_0
    now = w.astype(np.float64)
    moved = np.abs(now - state.w_prev) > param.reset_tol
    state.t0 = np.where(moved, state.time, state.t0)
    state.w0 = np.where(moved, now, state.w0)
    nu = state.nu
    if param.nu_std > 0:
        nu = nu * (1 + param.nu_std * rng.standard_normal(w.shape))
    if param.nu_k != 0:
        with np.errstate(invalid="ignore", divide="ignore"):
            g = (now - param.w_offset) / param.wg_ratio + param.g_offset
            nu = nu - param.nu_k * np.log(g) + param.nu_k * param.log_g0
    f = np.maximum(state.time - state.t0, 1.0) ** -nu
    a = param.g_offset * param.wg_ratio + param.w_offset
    if abs(a) < param.reset_tol:
        a = 0.0
    out = np.where(moved, now, state.w0 * f + a * (f - 1))
    if param.w_noise_std > 0:
        out += param.w_noise_std * rng.standard_normal(w.shape)
    w[...] = out
    state.w_prev = w.astype(np.float64)
