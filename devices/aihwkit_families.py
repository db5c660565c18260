"""aihwkit's pulsed response families, with aihwkit's parameter names, defaults and update equations
(IBM aihwkit 1.1.0; where its docstring and its binary disagree, these follow the binary).

Every family draws per element: b_max = w_max (1 + w_max_dtod xi), b_min = w_min (1 + w_min_dtod xi),
gain = 1 + dw_min_dtod xi (exp(dw_min_dtod xi) with dw_min_dtod_log_normal), r = up_down_dtod xi,
dw_up = (min(up_down, 0) + gain + r) dw_min and dw_down = (-max(up_down, 0) + gain - r) dw_min (their
magnitudes with enforce_consistency); the cycle noise multiplies the step, (1 + sigma xi). Defaults are
those of aihwkit's PulsedDevice. Every family carries aihwkit's effects (write noise, decay, diffusion,
reset, corrupt devices: devices.effects).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from aimc.devices.device_base import DeviceBase
from aimc.devices.effects import DeviceEffects
from aimc.devices.response_step import (
    CONST,
    DW_DOWN,
    DW_UP,
    EXP_STEP,
    GAMMA_DOWN,
    GAMMA_UP,
    LINEAR,
    POWER,
    TABLE,
    W_MAX,
    W_MIN,
)


class PulsedDevice(DeviceBase, DeviceEffects):
    """aihwkit 1.1.0's PulsedDevice: the fields and draws every aihwkit family shares."""

    dw_min_dtod: float = Field(0.3, ge=0, lt=1, description="device-to-device relative std of the step size")
    dw_min_dtod_log_normal: bool = Field(False, description="draw the step gain as exp(dw_min_dtod xi), "
                                                            "log-normal, instead of 1 + dw_min_dtod xi")
    dw_min_std: float = Field(0.3, ge=0, description="cycle-to-cycle std per pulse (relative to the step)")
    w_max: float = Field(0.6, description="mean upper bound (weight units)")
    w_min: float = Field(-0.6, description="mean lower bound (weight units)")
    w_max_dtod: float = Field(0.3, ge=0, description="device-to-device relative std of the upper bound")
    w_min_dtod: float = Field(0.3, ge=0, description="device-to-device relative std of the lower bound")
    up_down: float = Field(0.0, gt=-1, lt=1, description="mean up/down bias: > 0 shrinks down steps, "
                                                         "< 0 shrinks up steps (fraction of dw_min)")
    up_down_dtod: float = Field(0.01, ge=0, description="device-to-device std of the up/down bias")
    enforce_consistency: bool = Field(True, description="use |dw_up|, |dw_down| so steps keep their sign, and "
                                                        "sign-consistent bounds b_max >= 0 >= b_min")

    @model_validator(mode="after")
    def _check_bounds(self):
        if not self.w_min < self.w_max:
            raise ValueError(f"w_min ({self.w_min}) must be below w_max ({self.w_max})")
        return self

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
        ep[..., DW_UP] = np.maximum(dw_up, 0.0)
        ep[..., DW_DOWN] = np.maximum(dw_down, 0.0)
        hi = self.w_max * (1.0 + self.w_max_dtod * z())
        lo = self.w_min * (1.0 + self.w_min_dtod * z())
        if self.enforce_consistency:  # sign-consistent bounds (aihwkit 1.1.0's binary: b_max >= 0 >= b_min)
            swap = lo > hi
            hi, lo = np.abs(np.where(swap, lo, hi)), -np.abs(np.where(swap, hi, lo))
        ep[..., W_MAX] = hi
        ep[..., W_MIN] = lo


class ConstantStep(PulsedDevice):
    """aihwkit ConstantStep: up + dw_up (1 + sigma xi), down - dw_down (1 + sigma xi)."""

    kind: Literal["ConstantStep"] = "ConstantStep"

    def _code(self) -> int:
        return CONST


class LinearStep(PulsedDevice):
    """aihwkit LinearStep: up + dw_up (1 - |gamma_up| w / w_ref_up), down - dw_down (1 - |gamma_down| w / w_ref_down).

    w_ref are the mean bounds (mean_bound_reference) or each element's own bounds; mult_noise False puts the
    noise on the constant part only (additive sigma * dw xi). Steps are clipped at zero.
    """

    kind: Literal["LinearStep"] = "LinearStep"
    gamma_up: float = Field(0.0, description="relative slope of the up step: 1 gives soft bounds")
    gamma_down: float = Field(0.0, description="relative slope of the down step")
    gamma_up_dtod: float = Field(0.05, ge=0, description="device-to-device std of gamma_up (relative)")
    gamma_down_dtod: float = Field(0.05, ge=0, description="device-to-device std of gamma_down (relative)")
    mean_bound_reference: bool = Field(True, description="slopes refer to the mean bounds, not each element's")
    mult_noise: bool = Field(True, description="multiplicative cycle noise (else on the constant part only)")

    def _code(self) -> int:
        return LINEAR

    def _additive(self) -> bool:
        return not self.mult_noise

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        g_up = np.abs(self.gamma_up * (1.0 + self.gamma_up_dtod * z()))
        g_dn = np.abs(self.gamma_down * (1.0 + self.gamma_down_dtod * z()))
        ref_up = self.w_max if self.mean_bound_reference else ep[..., W_MAX]
        ref_dn = self.w_min if self.mean_bound_reference else ep[..., W_MIN]
        ep[..., GAMMA_UP] = g_up / ref_up
        ep[..., GAMMA_DOWN] = g_dn / ref_dn


class SoftBounds(LinearStep):
    """aihwkit SoftBounds: up + dw_up (1 - w/b_max), down - dw_down (1 - w/b_min), each element's own bounds.

    Symmetric point (dw_up - dw_down) / (dw_up/b_max - dw_down/b_min), the closed form aihwkit 1.1.0 uses
    for SoftBoundsReference's subtract_symmetry_point.
    """

    kind: Literal["SoftBounds"] = "SoftBounds"
    gamma_up: Literal[1.0] = Field(1.0, description="fixed at 1 (soft bounds)")
    gamma_down: Literal[1.0] = Field(1.0, description="fixed at 1 (soft bounds)")
    gamma_up_dtod: Literal[0.0] = Field(0.0, description="fixed at 0")
    gamma_down_dtod: Literal[0.0] = Field(0.0, description="fixed at 0")
    mean_bound_reference: Literal[False] = Field(False, description="fixed: own bounds")

    def symmetric_point(self) -> float:
        p = self.nominal().ep[0, 0]
        up, dn, hi, lo = p[DW_UP], p[DW_DOWN], p[W_MAX], p[W_MIN]
        return float((up - dn) / (up / hi - dn / lo))


class ExpStep(PulsedDevice):
    """aihwkit ExpStep: up + max(1 - A_up exp(gamma_up z), 0) dw_up, down - max(1 - A_down exp(-gamma_down z), 0)
    dw_down, with z = 2 a w / (b_max - b_min) + b. Defaults are aihwkit 1.1.0's.

    Cycle noise: a step s at weight w becomes s + dw_min_std (s + dw_min_std_add + dw_min_std_slope |w|) xi,
    w the weight before the pulse (aihwkit 1.1.0's ExpStep update with its "complex noise"; with add and slope
    0 the usual s (1 + dw_min_std xi)). The expected update's noise leaves add and slope out.
    """

    kind: Literal["ExpStep"] = "ExpStep"
    A_up: float = Field(0.00081, description="amplitude of the up non-linearity")
    A_down: float = Field(0.36833, description="amplitude of the down non-linearity")
    gamma_up: float = Field(12.44625, description="exponent of the up non-linearity")
    gamma_down: float = Field(12.78785, description="exponent of the down non-linearity")
    a: float = Field(0.244, description="slope of z in w")
    b: float = Field(0.2425, description="offset of z")
    dw_min_std_add: float = Field(0.0, description="cycle noise: added to the step before scaling by dw_min_std "
                                                   "(weight units)")
    dw_min_std_slope: float = Field(0.0, description="cycle noise: times |w| added to the step before scaling "
                                                     "by dw_min_std")

    @property
    def granularity(self) -> float:
        """The nominal down step at w = 0, (1 - max(up_down, 0)) dw_min max(1 - A_down e^(-gamma_down b), 0),
        or dw_min where that is 0 (aihwkit 1.1.0, rpu_expstep_device.h: its granularity takes the down step
        at zero only)."""
        shape = max(1.0 - self.A_down * np.exp(-self.gamma_down * self.b), 0.0)
        down = (1.0 - max(self.up_down, 0.0)) * self.dw_min * shape
        return float(down) if down > 0 else float(self.dw_min)

    def _code(self) -> int:
        return EXP_STEP

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[:4] = (self.A_up, self.A_down, self.a, self.b)
        if self.dw_min_std_add != 0.0 or self.dw_min_std_slope != 0.0:  # consts[6] > 0: pulses add the spread
            out[4:7] = (self.dw_min_std_add, self.dw_min_std_slope, 1.0)
        return out

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        ep[..., GAMMA_UP] = self.gamma_up
        ep[..., GAMMA_DOWN] = self.gamma_down


class PowStep(PulsedDevice):
    """aihwkit PowStep: up + dw_up ((b_max - w)/r)^gamma_up, down - dw_down ((w - b_min)/r)^gamma_down,
    r = b_max - b_min.

    The exponents split one-sidedly, as dw_up / dw_down do (aihwkit 1.1.0's binary; its docstring's
    gamma (1 +- split) is not what it computes): with g = 1 + pow_gamma_dtod xi (additive gain) and
    s = pow_up_down_dtod xi, gamma_up = pow_gamma (min(pow_up_down, 0) + g + s) and
    gamma_down = pow_gamma (-max(pow_up_down, 0) + g - s), magnitudes with enforce_consistency.
    """

    kind: Literal["PowStep"] = "PowStep"
    pow_gamma: float = Field(1.0, gt=0, description="exponent of the response")
    pow_gamma_dtod: float = Field(0.1, ge=0, description="device-to-device std of the exponent (relative)")
    pow_up_down: float = Field(0.0, gt=-1, lt=1, description="lowers one exponent by pow_gamma |pow_up_down|: "
                                                             "> 0 the down exponent, < 0 the up exponent")
    pow_up_down_dtod: float = Field(0.0, ge=0, description="device-to-device std of the exponent split")

    @property
    def granularity(self) -> float:
        """dw_min 0.5^pow_gamma: the mean step at the midpoint of the bounds (aihwkit 1.1.0,
        rpu_powstep_device.h), so a desired change of lr |x| |d| fires the pulses that move a midpoint
        element by that much."""
        return float(self.dw_min * 0.5 ** self.pow_gamma)

    def _code(self) -> int:
        return POWER

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 1.0  # distances to the bound in units of r = b_max - b_min
        return out

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = 1.0 + self.pow_gamma_dtod * z()
        split = self.pow_up_down_dtod * z()
        g_up = self.pow_gamma * (min(self.pow_up_down, 0.0) + gain + split)
        g_dn = self.pow_gamma * (-max(self.pow_up_down, 0.0) + gain - split)
        if self.enforce_consistency:
            g_up, g_dn = np.abs(g_up), np.abs(g_dn)
        ep[..., GAMMA_UP] = np.maximum(g_up, 0.0)
        ep[..., GAMMA_DOWN] = np.maximum(g_dn, 0.0)


class PiecewiseStep(PulsedDevice):
    """aihwkit PiecewiseStep: the steps are dw_up, dw_down times a piecewise-linear function given at N+1
    equally spaced nodes over [b_min, b_max]."""

    kind: Literal["PiecewiseStep"] = "PiecewiseStep"
    piecewise_up: list[float] = Field([1.0, 1.0], min_length=2, description="relative up step at the nodes")
    piecewise_down: list[float] = Field([1.0, 1.0], min_length=2, description="relative down step at the nodes")

    @model_validator(mode="after")
    def _check_nodes(self):
        if len(self.piecewise_up) != len(self.piecewise_down):
            raise ValueError("piecewise_up and piecewise_down need the same number of nodes")
        if min(self.piecewise_up + self.piecewise_down) < 0:
            raise ValueError("piecewise nodes must be >= 0")
        return self

    @property
    def granularity(self) -> float:
        """dw_min times the up node in the middle, piecewise_up[N // 2] (aihwkit 1.1.0,
        rpu_piecewisestep_device.h); dw_min where that node is 0."""
        middle = self.piecewise_up[len(self.piecewise_up) // 2]
        return float(self.dw_min * middle) if middle > 0 else float(self.dw_min)

    def _code(self) -> int:
        return TABLE

    def _table(self):
        n = len(self.piecewise_up)
        return np.linspace(0.0, 1.0, n), np.array(self.piecewise_up, float), np.array(self.piecewise_down, float)


def soft_bounds_pmax(p_max: float = 1000.0, alpha: float = 0.0005, range_min: float = -1.0, range_max: float = 1.0,
                     **fields) -> SoftBounds:
    """aihwkit 1.1.0's SoftBoundsPmaxDevice, which its library turns into a SoftBounds device:
    B = (range_max - range_min) / (1 - exp(-p_max alpha)), w_min = range_min, w_max = range_min + B,
    dw_min = B alpha, up_down = 1 + 2 range_min / B (so dw_up = B alpha, dw_down = -2 alpha range_min).
    Its documented response B (1 - exp(-alpha p)) + range_min is not what that device does (docs/devices.md).
    `fields`: any other SoftBounds field (spreads, noise, effects)."""
    if not (p_max > 0 and alpha > 0 and range_max > range_min):
        raise ValueError("soft_bounds_pmax needs p_max > 0, alpha > 0 and range_max > range_min")
    span = (range_max - range_min) / (1.0 - np.exp(-p_max * alpha))
    return SoftBounds(w_min=range_min, w_max=range_min + span, dw_min=span * alpha,
                      up_down=1.0 + 2.0 * range_min / span, **fields)
