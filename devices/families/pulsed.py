"""What aihwkit's pulsed response families share, with aihwkit's parameter names, defaults and update equations
(IBM aihwkit 1.1.0; where its docstring and its binary disagree, these follow the binary), and how they are
fitted.

Every family draws per element: b_max = w_max (1 + w_max_dtod xi), b_min = w_min (1 + w_min_dtod xi),
gain = 1 + dw_min_dtod xi (exp(dw_min_dtod xi) with dw_min_dtod_log_normal), r = up_down_dtod xi,
dw_up = (min(up_down, 0) + gain + r) dw_min and dw_down = (-max(up_down, 0) + gain - r) dw_min (their
magnitudes with enforce_consistency); the cycle noise multiplies the step, (1 + sigma xi). Defaults are
those of aihwkit's PulsedDevice. Every family carries aihwkit's effects (write noise, decay, diffusion,
reset, corrupt devices: devices.effects).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from aimc.devices.device_base import DW_DOWN, DW_UP, W_MAX, W_MIN, DeviceBase
from aimc.devices.effects import DeviceEffects
from aimc.devices.families.fitting import MeasuredRange, by_field, span


class PulsedDevice(DeviceBase, DeviceEffects):
    """aihwkit 1.1.0's PulsedDevice: the fields and draws every aihwkit family shares."""

    dw_min_dtod: float = Field(
        0.3, ge=0, description="device-to-device relative std of the step size (below 1 unless log-normal)"
    )
    dw_min_dtod_log_normal: bool = Field(
        False, description="draw the step gain as exp(dw_min_dtod xi), log-normal, instead of 1 + dw_min_dtod xi"
    )
    dw_min_std: float = Field(0.3, ge=0, description="cycle-to-cycle std per pulse (relative to the step)")
    w_max: float = Field(0.6, description="mean upper bound (weight units)")
    w_min: float = Field(-0.6, description="mean lower bound (weight units)")
    w_max_dtod: float = Field(0.3, ge=0, description="device-to-device relative std of the upper bound")
    w_min_dtod: float = Field(0.3, ge=0, description="device-to-device relative std of the lower bound")
    up_down: float = Field(
        0.0,
        gt=-1,
        lt=1,
        description="mean up/down bias: > 0 shrinks down steps, < 0 shrinks up steps (fraction of dw_min)",
    )
    up_down_dtod: float = Field(0.01, ge=0, description="device-to-device std of the up/down bias")
    enforce_consistency: bool = Field(
        True,
        description="use |dw_up|, |dw_down| so steps keep their sign, and sign-consistent bounds b_max >= 0 >= b_min",
    )

    @model_validator(mode="after")
    def _check_bounds(self):
        if not self.w_min < self.w_max:
            raise ValueError(f"w_min ({self.w_min}) must be below w_max ({self.w_max})")
        if not self.dw_min_dtod_log_normal and self.dw_min_dtod >= 1:
            raise ValueError(
                f"dw_min_dtod: {self.dw_min_dtod:g} must be below 1 with the normal spread 1 + dw_min_dtod xi "
                "(the log-normal spread, dw_min_dtod_log_normal, takes any)"
            )
        self._check_scales()
        return self

    def _check_scales(self) -> None:
        """Refuse noise and steps on the wrong scale for the weight range r = w_max - w_min: a step below
        float32's resolution at the bounds (lost in every addition), write noise (write_noise_std dw_min) or
        diffusion per step above r (the weights become noise). aihwkit's presets stay far inside: the largest
        write noise, ReRamArrayHfO2's, is 0.27 of a range of 2."""
        span = self.w_max - self.w_min
        resolution = float(np.finfo(np.float32).eps) * max(abs(self.w_max), abs(self.w_min))
        if self.dw_min < resolution:
            raise ValueError(
                f"dw_min: {self.dw_min:g} is below float32's resolution {resolution:.3g} at the bounds "
                f"[{self.w_min:g}, {self.w_max:g}]: a step would be lost in every addition"
            )
        if self.write_noise_std * self.dw_min > span:
            raise ValueError(
                f"write_noise_std: {self.write_noise_std:g} x dw_min = {self.write_noise_std * self.dw_min:.3g} "
                f"exceeds the weight range w_max - w_min = {span:g} (write_noise_std is in units of dw_min)"
            )
        if self.diffusion > span:
            raise ValueError(
                f"diffusion: {self.diffusion:g} per step exceeds the weight range w_max - w_min = {span:g}"
            )

    def _additive(self) -> bool:
        return False

    def _after_fill(self, ep, rng) -> None:
        self.corrupt(ep, rng)

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.w_min, self.w_max)

    def _fill(self, ep, rng) -> None:
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = np.exp(self.dw_min_dtod * z()) if self.dw_min_dtod_log_normal else 1.0 + self.dw_min_dtod * z()
        r = self.up_down_dtod * z()
        dw_up = (min(self.up_down, 0.0) + gain + r) * self.dw_min
        dw_down = (-max(self.up_down, 0.0) + gain - r) * self.dw_min
        if self.enforce_consistency:
            dw_up, dw_down = np.abs(dw_up), np.abs(dw_down)
        ep[..., DW_UP] = dw_up  # without enforce_consistency a negative step stays: its pulses move the wrong way
        ep[..., DW_DOWN] = dw_down
        hi = self.w_max * (1.0 + self.w_max_dtod * z())
        lo = self.w_min * (1.0 + self.w_min_dtod * z())
        if self.enforce_consistency:  # sign-consistent bounds (aihwkit 1.1.0's binary: b_max >= 0 >= b_min)
            swap = lo > hi
            hi, lo = np.abs(np.where(swap, lo, hi)), -np.abs(np.where(swap, hi, lo))
        ep[..., W_MAX] = hi
        ep[..., W_MIN] = lo


# -- fitting ---------------------------------------------------------------------------------------------------
AIHW_FIXED = {"dw_min_dtod": 0.0, "up_down_dtod": 0.0, "w_max_dtod": 0.0, "w_min_dtod": 0.0, "dw_min_std": 0.0}
"""The fields an aihwkit family's fit holds fixed: no spread, no cycle noise."""


def _steps_at_zero(p: dict) -> tuple[float, float]:
    """An aihwkit element's (up, down) steps at w = 0: dw_min (1 + up_down) up when up_down < 0, dw_min
    (1 - up_down) down when up_down > 0, dw_min otherwise (aihwkit 1.1.0: up_bias = min(up_down, 0),
    down_bias = -max(up_down, 0))."""
    return p["dw_min"] * (1 + min(p["up_down"], 0.0)), p["dw_min"] * (1 - max(p["up_down"], 0.0))


def _gain(p: dict, dw: float) -> float:
    """Mean of an aihwkit element's up and down steps at w = 0, in units of the nominal dw_min."""
    up, down = _steps_at_zero(p)
    return 0.5 * (up + down) / dw


def _split(p: dict, dw: float) -> float:
    """Half difference of an aihwkit element's up and down steps at w = 0, in units of the nominal dw_min."""
    up, down = _steps_at_zero(p)
    return 0.5 * (up - down) / dw


AIHW_SPREAD = {
    "dw_min_dtod": (_gain, "abs"),
    "up_down_dtod": (_split, "abs"),
    "w_max_dtod": (by_field("w_max"), "rel"),
    "w_min_dtod": (by_field("w_min"), "rel"),
}
"""How an aihwkit family's device-to-device spreads are measured (`Family.spread`)."""


def aihw_box(d: MeasuredRange, extra_lo=(), extra_hi=()):
    """Box of (dw_min, up_down, w_max, w_min), then the family's own parameters (extra_lo, extra_hi)."""
    s, eps = span(d), 1e-3 * span(d)
    mid = 0.5 * (d.lo + d.hi)
    return (
        [d.dw0 / 20, -0.99, max(mid, 0.0) + eps, d.lo - 4 * s, *extra_lo],
        [d.dw0 * 20, 0.99, d.hi + 4 * s, min(mid, 0.0) - eps, *extra_hi],
    )


def aihw_start(d: MeasuredRange, dw: float | None = None) -> list[float]:
    """The start of (dw_min, up_down, w_max, w_min): dw (default the typical step), no bias, the measured
    bounds."""
    return [d.dw0 if dw is None else dw, 0.0, d.hi, d.lo]
