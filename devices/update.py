"""How a desired update reaches the devices: pulsed (stochastic trains) or expected (Analog Update)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from aimc.common.validation import Float32Config
from aimc.devices.pulse_trains import MAX_BL, clip_to_probability, plan_kernel


class UpdateConfig(Float32Config):
    """Update scheme of a tile; the defaults are aihwkit 1.1.0's pulsed update (StochasticCompressed pulse
    trains, desired_bl 31, update management and BL management on)."""

    mode: Literal["pulsed", "expected"] = Field(
        "pulsed",
        description="pulsed: coincidences of stochastic pulse trains (hardware); expected: the "
        "Analog Update with granularity and noise (fast, the paper's model)",
    )
    desired_bl: int = Field(
        31, ge=1, le=MAX_BL, description=f"longest pulse train BL (slots per sample, at most {MAX_BL})"
    )
    update_management: bool = Field(True, description="balance the x and d pulse probabilities")
    update_bl_management: bool = Field(True, description="shorten BL to ceil(lr max|x| max|d| / dw_min)")


def checked_batch(x: np.ndarray, d: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """x (batch, in) and d (batch, out) of an update of an array of `shape` (out, in), as contiguous float32;
    a sample-count mismatch or a NaN or infinity raises ValueError before any weight changes."""
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, shape[1])
    d = np.ascontiguousarray(d, dtype=np.float32).reshape(-1, shape[0])
    if x.shape[0] != d.shape[0]:
        raise ValueError(f"x has {x.shape[0]} samples, d has {d.shape[0]}")
    if not (np.isfinite(x).all() and np.isfinite(d).all()):
        raise ValueError("x or d holds NaN or infinity; the weights were left as they were")
    return x, d


def train_plan(x: np.ndarray, d: np.ndarray, lr: float, dw_min: float, cfg: UpdateConfig):
    """Per-sample pulse-train lengths and probability scales for the update W -= lr d x^T (aihwkit 1.1.0,
    PulsedUpdateMetaParameter::performUpdateManagement).

    With k = |lr| max|x| max|d| / dw_min per sample: BL = min(ceil(k), desired_bl) with BL management, else
    desired_bl; the probability scales A (for d) and B (for x) satisfy A B BL dw_min = |lr|, so the mean
    number of coincidences of element (i, j) is |lr| |x_j| |d_i| / dw_min per sample while no probability
    exceeds 1. Update management (on whenever BL management is, as in aihwkit) balances them,
    A max|d| = B max|x|, with max|d| shrunk by desired_bl / k where k exceeds desired_bl: x then keeps its
    full scale (B max|x| = 1) and d_i fires with probability min(1, (k / BL) |d_i| / max|d|). Without either
    management A = B = sqrt(|lr| / (dw_min desired_bl)). Probabilities are min(scale |v|, 1).
    Returns (bl int32 (B,), x_scale (B,), d_scale (B,)): p_x = min(x_scale |x|, 1), p_d = min(d_scale |d|, 1).
    A sample with x = 0 or d = 0 gets BL = 0 (no pulses). `dw_min` is the device's granularity
    (`DeviceBase.granularity`: dw_min, or aihwkit's value for PowStep, ExpStep and PiecewiseStep).
    """
    return plan_kernel(
        np.ascontiguousarray(x, np.float32),
        np.ascontiguousarray(d, np.float32),
        abs(float(lr)),
        float(dw_min),
        cfg.desired_bl,
        cfg.update_management,
        cfg.update_bl_management,
    )


def mean_update(x: np.ndarray, d: np.ndarray, lr: float, dw_min: float, cfg: UpdateConfig) -> np.ndarray:
    """The mean change of the pulsed update in weight units, -lr sum_b d_b^T x_b with the pulse probabilities
    clipped at 1: dw_min BL p_d p_x per sample and element, down where lr d x > 0. x_b, d_b enter as
    clip(v, -1 / scale, 1 / scale) (where no probability clips: -lr d^T x exactly). x, d float32."""
    _, x_scale, d_scale = train_plan(x, d, lr, dw_min, cfg)
    return (-float(lr)) * (clip_to_probability(d, d_scale).T @ clip_to_probability(x, x_scale))
