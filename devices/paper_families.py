"""R1's response families over [-tau, tau] ([R1] Wu et al., NeurIPS 2025, arXiv:2502.06309, Table 1).

`ideal`, `linear`, `power` and `exponential`, written with the up/down asymmetry `c` (q_plus scaled by
1 + c, q_minus by 1 - c) and R1's additive cycle noise `dw_min * sigma_c * xi` (xi a fresh standard normal
per pulse).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from aimc.devices.device_base import DeviceBase
from aimc.devices.response_step import (
    CONST,
    DW_DOWN,
    DW_UP,
    EXP_R1,
    GAMMA_DOWN,
    GAMMA_UP,
    LINEAR,
    POWER,
    W_MAX,
    W_MIN,
    expm1,
)


class _PaperDevice(DeviceBase):
    tau: float = Field(0.6, gt=0, description="weight bound: the element lives in [-tau, tau] (weight units)")
    c: float = Field(0.0, gt=-1, lt=1, description="up/down asymmetry: q_plus scaled by (1 + c), q_minus by "
                                                   "(1 - c); shifts the symmetric point (R1's c_Lin)")
    c_dtod: float = Field(0.0, ge=0, description="device-to-device std of c")
    tau_dtod: float = Field(0.0, ge=0, lt=1, description="device-to-device relative std of each bound")
    noise: Literal["additive", "multiplicative"] = Field(
        "additive", description="cycle noise: additive dw_min * sigma * xi (R1), or multiplicative")

    def _additive(self) -> bool:
        return self.noise == "additive"

    @property
    def bounds(self) -> tuple[float, float]:
        return (-self.tau, self.tau)

    def _draw_common(self, ep, rng) -> None:
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = np.maximum(1.0 + self.dw_min_dtod * z(), 0.0)
        c = np.clip(self.c + self.c_dtod * z(), -1.0, 1.0)
        ep[..., DW_UP] = self.dw_min * gain * (1.0 + c)
        ep[..., DW_DOWN] = self.dw_min * gain * (1.0 - c)
        ep[..., W_MAX] = self.tau * (1.0 + self.tau_dtod * z())
        ep[..., W_MIN] = -self.tau * (1.0 + self.tau_dtod * z())

    def _draw_gamma(self, ep, rng, gamma: float, gamma_dtod: float) -> None:
        shape = ep.shape[:-1]
        spread = rng.standard_normal(shape) if rng is not None else np.zeros(shape)
        g = np.maximum(gamma * (1.0 + gamma_dtod * spread), 0.0)
        ep[..., GAMMA_UP] = g
        ep[..., GAMMA_DOWN] = g


class Ideal(_PaperDevice):
    """Constant step: q_plus = 1 + c, q_minus = 1 - c (c = 0: the ideal symmetric device)."""

    kind: Literal["ideal"] = "ideal"

    def _code(self) -> int:
        return CONST

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)


class Linear(_PaperDevice):
    """Linear response (soft bounds): q_plus = (1 + c)(1 - w/tau), q_minus = (1 - c)(1 + w/tau).

    Symmetric point c * tau; F = 1 - c w/tau, G = w/tau - c (R1 Table 1, c_Lin).
    """

    kind: Literal["linear"] = "linear"

    def _code(self) -> int:
        return LINEAR

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)
        ep[..., GAMMA_UP] = 1.0 / ep[..., W_MAX]
        ep[..., GAMMA_DOWN] = 1.0 / ep[..., W_MIN]

    def symmetric_point(self) -> float:
        return self.c * self.tau


class Power(_PaperDevice):
    """Power response: q_plus = (1 + c)(1 - w/tau)^gamma, q_minus = (1 - c)(1 + w/tau)^gamma (R1 Table 1)."""

    kind: Literal["power"] = "power"
    gamma: float = Field(1.0, gt=0, description="exponent of the response (R1 uses 0.5 to 4)")
    gamma_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of gamma")

    def _code(self) -> int:
        return POWER

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 2.0  # distances to the bound measured in units of tau = span / 2
        return out

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)
        self._draw_gamma(ep, rng, self.gamma, self.gamma_dtod)

    def symmetric_point(self) -> float:
        # (1 + c)(1 - u)^g = (1 - c)(1 + u)^g  =>  u = (r - 1) / (r + 1),  r = ((1 + c) / (1 - c))^(1/g)
        r = ((1.0 + self.c) / (1.0 - self.c)) ** (1.0 / self.gamma)
        return self.tau * (r - 1.0) / (r + 1.0)


class Exponential(_PaperDevice):
    """Exponential response: q_plus = (1 + c)(exp(g(1 - w/tau)) - 1)/(exp(g) - 1), q_minus likewise with
    1 + w/tau and (1 - c) (R1 Table 1). Symmetric point 0 for c = 0, else found by bisection."""

    kind: Literal["exponential"] = "exponential"
    gamma: float = Field(1.0, gt=0, le=700, description="curvature g of the response (R1 uses 0.5 to 4; at most "
                                                        "700: expm1(g) overflows float64 above 709.8)")
    gamma_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of gamma")

    def _code(self) -> int:
        return EXP_R1

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 2.0
        return out

    def _consts_of(self, ep: np.ndarray) -> np.ndarray:
        """consts[1 + k] = expm1(g) of direction k (0 up, 1 down) where all elements share g, else NaN: the
        mean step's denominator, which otherwise costs a second expm1 per step (an expected update of
        r1_exp_2 0.80-0.96 of the time with it, docs/performance.md)."""
        out = self._consts()
        for k, column in enumerate((GAMMA_UP, GAMMA_DOWN)):
            g = ep[..., column]
            shared = g.size > 0 and bool((g == g.flat[0]).all())
            out[1 + k] = expm1(float(g.flat[0])) if shared else np.nan
        return out

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)
        self._draw_gamma(ep, rng, self.gamma, self.gamma_dtod)
