"""How a desired update reaches the devices: pulsed (stochastic trains) or expected (Analog Update)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from aimc.common.validation import Float32Config
from aimc.devices.pulse_trains import plan_kernel


class UpdateConfig(Float32Config):
    """Update scheme of a tile; the defaults are aihwkit 1.1.0's pulsed update (StochasticCompressed pulse
    trains, desired_bl 31, update management and BL management on)."""

    mode: Literal["pulsed", "expected"] = Field(
        "pulsed", description="pulsed: coincidences of stochastic pulse trains (hardware); expected: the "
                              "Analog Update with granularity and noise (fast, the paper's model)")
    desired_bl: int = Field(31, ge=1, le=32, description="longest pulse train BL (pulses per sample)")
    update_management: bool = Field(True, description="balance the x and d pulse probabilities")
    update_bl_management: bool = Field(True, description="shorten BL to ceil(lr max|x| max|d| / dw_min)")


def train_plan(x: np.ndarray, d: np.ndarray, lr: float, dw_min: float, cfg: UpdateConfig):
    """Per-sample pulse-train lengths and probability scales for the update W -= lr d x^T.

    With k = |lr| max|x| max|d| / dw_min per sample: BL = min(ceil(k), desired_bl) (or desired_bl); d is
    scaled by desired_bl / k where k exceeds desired_bl (saturated trains clip the update); the probability
    scales A (for d) and B (for x) satisfy A B BL dw_min = |lr|, so the mean number of coincidences of
    element (i, j) is |lr| |x_j| |d_i| / dw_min per sample; with update management A max|d| = B max|x|.
    Returns (bl int32 (B,), x_scale (B,), d_scale (B,), d_clip (B,)): p_x = x_scale |x|, p_d = d_scale |d|,
    and d_clip the saturation factor applied. A sample with x = 0 or d = 0 gets BL = 0 (no pulses).
    `dw_min` is the device's granularity (`DeviceBase.granularity`: dw_min, or aihwkit's value for PowStep,
    ExpStep and PiecewiseStep).
    """
    return plan_kernel(np.ascontiguousarray(x, np.float32), np.ascontiguousarray(d, np.float32), abs(float(lr)),
                       float(dw_min), cfg.desired_bl, cfg.update_management, cfg.update_bl_management)
