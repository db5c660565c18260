"""A measured response: q_plus and q_minus given on a grid of weights."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from aimc.devices.device_base import DeviceBase
from aimc.devices.response_step import DW_DOWN, DW_UP, TABLE, W_MAX, W_MIN


class Tabulated(DeviceBase):
    """q_plus and q_minus measured at weights `w` (increasing), interpolated linearly, constant beyond the
    grid. Element spread stretches the table with the element's bounds."""

    kind: Literal["tabulated"] = "tabulated"
    w: list[float] = Field(..., min_length=2, description="grid of weights, strictly increasing (weight units)")
    q_plus_values: list[float] = Field(..., min_length=2, description="q_plus at the grid points (>= 0)")
    q_minus_values: list[float] = Field(..., min_length=2, description="q_minus at the grid points (>= 0)")
    w_min: float | None = Field(None, description="lower bound; default the first grid point")
    w_max: float | None = Field(None, description="upper bound; default the last grid point")
    w_bound_dtod: float = Field(0.0, ge=0, lt=1, description="device-to-device relative std of each bound")
    up_down_dtod: float = Field(0.0, ge=0, description="device-to-device std of the up/down split")
    noise: Literal["additive", "multiplicative"] = Field("additive", description="form of the cycle noise")

    @model_validator(mode="after")
    def _check_table(self):
        n = len(self.w)
        if len(self.q_plus_values) != n or len(self.q_minus_values) != n:
            raise ValueError(f"w, q_plus_values and q_minus_values need the same length (w has {n})")
        if np.any(np.diff(self.w) <= 0):
            raise ValueError("w must be strictly increasing")
        if min(self.q_plus_values + self.q_minus_values) < 0:
            raise ValueError("response values must be >= 0")
        lo, hi = self.bounds
        if not lo < hi:
            raise ValueError(f"w_min ({lo}) must be below w_max ({hi})")
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        lo = self.w[0] if self.w_min is None else self.w_min
        hi = self.w[-1] if self.w_max is None else self.w_max
        return (float(lo), float(hi))

    def _code(self) -> int:
        return TABLE

    def _additive(self) -> bool:
        return self.noise == "additive"

    def _table(self):
        lo, hi = self.bounds
        grid = (np.array(self.w, float) - lo) / (hi - lo)
        return grid, np.array(self.q_plus_values, float), np.array(self.q_minus_values, float)

    def _fill(self, ep, rng) -> None:
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = np.maximum(1.0 + self.dw_min_dtod * z(), 0.0)
        r = self.up_down_dtod * z()
        ep[..., DW_UP] = self.dw_min * np.maximum(gain + r, 0.0)
        ep[..., DW_DOWN] = self.dw_min * np.maximum(gain - r, 0.0)
        lo, hi = self.bounds
        ep[..., W_MAX] = hi + abs(hi) * self.w_bound_dtod * z()
        ep[..., W_MIN] = lo - abs(lo) * self.w_bound_dtod * z()
