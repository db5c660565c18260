"""R1's response families over [-tau, tau] ([R1] Wu et al., NeurIPS 2025, arXiv:2502.06309, Table 1).

`ideal`, `linear`, `power` and `exponential`, written with the up/down asymmetry `c` (q_plus scaled by
1 + c, q_minus by 1 - c) and R1's additive cycle noise `dw_min * sigma_c * xi` (xi a fresh standard normal
per pulse). `power` and `exponential` take an optional exponent of their own for depression, `gamma_down`
(q_minus with gamma_down, q_plus with gamma): measured devices are often far more non-linear one way.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_serializer, model_validator

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


def _drawn_exponent(shape: tuple[int, ...], rng, gamma: float, dtod: float) -> np.ndarray:
    """An exponent per element, gamma (1 + dtod z) clipped at 0, z standard normal from rng (0 where rng is
    None: the nominal element)."""
    spread = rng.standard_normal(shape) if rng is not None else np.zeros(shape)
    return np.maximum(gamma * (1.0 + dtod * spread), 0.0)


class _UpDownGamma(_PaperDevice):
    """A paper family with an exponent `gamma` (q_plus) and an optional one of its own for q_minus,
    `gamma_down`, with spreads `gamma_dtod` and `gamma_down_dtod`: fields of each family (declared there, after
    `kind`, so that a dump keeps the field order it had before gamma_down)."""

    @model_validator(mode="after")
    def _down_spread_needs_down_gamma(self):
        if self.gamma_down is None and self.gamma_down_dtod is not None:
            raise ValueError("gamma_down_dtod needs gamma_down (without it q_minus shares gamma and its spread)")
        return self

    @model_serializer(mode="wrap")
    def _without_unset_down(self, handler):
        """The dump leaves gamma_down and gamma_down_dtod out while they are None: configs written before
        they existed keep their JSON, so their hash (aimc.config.canonical_json) and their run folders."""
        out = handler(self)
        for key in ("gamma_down", "gamma_down_dtod"):
            if out.get(key, 0) is None:
                del out[key]
        return out

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)
        shape = ep.shape[:-1]
        ep[..., GAMMA_UP] = _drawn_exponent(shape, rng, self.gamma, self.gamma_dtod)
        if self.gamma_down is None:
            ep[..., GAMMA_DOWN] = ep[..., GAMMA_UP]
        else:  # an independent draw for the down exponent
            d = self.gamma_dtod if self.gamma_down_dtod is None else self.gamma_down_dtod
            ep[..., GAMMA_DOWN] = _drawn_exponent(shape, rng, self.gamma_down, d)

    @property
    def gamma_minus(self) -> float:
        """The exponent of q_minus: gamma_down, or gamma where it is None."""
        return self.gamma if self.gamma_down is None else self.gamma_down


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


class Power(_UpDownGamma):
    """Power response: q_plus = (1 + c)(1 - w/tau)^gamma, q_minus = (1 - c)(1 + w/tau)^gamma_down
    (R1 Table 1 with gamma_down = gamma)."""

    kind: Literal["power"] = "power"
    gamma: float = Field(1.0, gt=0, description="exponent of the response (R1 uses 0.5 to 4)")
    gamma_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of gamma")
    gamma_down: float | None = Field(None, gt=0, description="exponent of q_minus (depression); None: gamma")
    gamma_down_dtod: float | None = Field(None, ge=0, description="device-to-device relative std of gamma_down, "
                                                                  "drawn apart from gamma's; None: gamma_dtod")

    def _code(self) -> int:
        return POWER

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 2.0  # distances to the bound measured in units of tau = span / 2
        return out

    def symmetric_point(self) -> float:
        if self.gamma_minus != self.gamma:  # no closed form: bisection of q_plus - q_minus
            return super().symmetric_point()
        # (1 + c)(1 - u)^g = (1 - c)(1 + u)^g  =>  u = (r - 1) / (r + 1),  r = ((1 + c) / (1 - c))^(1/g)
        r = ((1.0 + self.c) / (1.0 - self.c)) ** (1.0 / self.gamma)
        return self.tau * (r - 1.0) / (r + 1.0)


class Exponential(_UpDownGamma):
    """Exponential response: q_plus = (1 + c)(exp(g(1 - w/tau)) - 1)/(exp(g) - 1) with g = gamma, q_minus
    likewise with 1 + w/tau, (1 - c) and g = gamma_down (R1 Table 1 with gamma_down = gamma). Symmetric point
    0 for c = 0 and gamma_down = gamma, else found by bisection."""

    kind: Literal["exponential"] = "exponential"
    gamma: float = Field(1.0, gt=0, le=700, description="curvature g of the response (R1 uses 0.5 to 4; at most "
                                                        "700: expm1(g) overflows float64 above 709.8)")
    gamma_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of gamma")
    gamma_down: float | None = Field(None, gt=0, le=700, description="curvature of q_minus (depression), at most "
                                                                     "700 as gamma; None: gamma")
    gamma_down_dtod: float | None = Field(None, ge=0, description="device-to-device relative std of gamma_down, "
                                                                  "drawn apart from gamma's; None: gamma_dtod")

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
