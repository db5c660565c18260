"""Residual learning [R1]: v1 (Sec. 4) transfers P into W through the tile's update, v2 (Sec. 5) through
an EMA buffer and single threshold pulses.

[R1] Wu et al., NeurIPS 2025, arXiv:2502.06309.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aimc.trainers.algorithms.base import GAIN_MAX
from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.algorithms.transfer import TransferConfig, TransferOptimizer
from aimc.trainers.algorithms.transfer_parts import ReadEMA, ThresholdBuffer
from aimc.trainers.algorithms.zero_shift import ZERO_SHIFT_MODE, ZeroShiftMode


class ResidualConfig(TransferConfig):
    """Residual learning (R1 Sec. 4): mixed weight W + gamma P, gradient at the mixed weight, zero-shifted P."""

    algorithm: Literal["residual"] = "residual"
    gamma: float = Field(
        0.5, gt=0, le=GAIN_MAX, description="gain of the residual array P in the mixed weight (at most 2^24)"
    )
    zero_shift: bool = Field(True, description="zero-shift P to its symmetric point before training")
    zero_shift_cycles: int | None = Field(
        None,
        ge=1,
        description="up/down pulse pairs of the zero shift; None: the device's number of states (slow on big layers)",
    )
    zero_shift_mode: ZeroShiftMode = Field("cycles", description=ZERO_SHIFT_MODE)


class ResidualV2Config(ResidualConfig):
    """Residual learning v2 (R1 Sec. 5): EMA buffer H of P's reads, one-pulse threshold transfer into W."""

    algorithm: Literal["residual_v2"] = "residual_v2"
    buffer_beta: float = Field(0.1, gt=0, le=1, description="EMA rate of the buffer H <- (1-b) H + b read(P)")
    threshold: float = Field(1.0, gt=0, description="transfer threshold in units of dw_min")


class Residual(TransferOptimizer):
    """Residual learning: W_bar = W + gamma P in the forward pass, so the gradient is taken at the mixed
    weight; P zero-shifted (ConductanceArray.zero_shift) before training when cfg.zero_shift."""

    config = ResidualConfig

    def __init__(self, model, cfg: ResidualConfig):
        super().__init__(model, cfg, fast_gain=cfg.gamma)


class ResidualV2(TransferOptimizer):
    """Residual learning v2: mixed weight W + gamma P, zero-shifted P, and an EMA buffer
    H <- (1 - buffer_beta) H + buffer_beta read(P[:, j]); where |H| >= threshold * dw_min one pulse of
    sign(H) is fired into W and H -= sign(H) dw_min. (transfer_lr is not used: a transfer moves W by
    one pulse per element.)"""

    config = ResidualV2Config

    def __init__(self, model, cfg: ResidualV2Config):
        super().__init__(
            model,
            cfg,
            fast_gain=cfg.gamma,
            buffer=ThresholdBuffer(cfg.threshold, single_pulse=True),
            fold=ReadEMA(cfg.buffer_beta),
        )

    def update_latency(self, lm: LatencyModel) -> float:
        per_transfer = self.cfg.n_columns * (lm.t_mvm + lm.t_pulse + lm.t_pre)
        return lm.t_update + per_transfer / self.cfg.transfer_every
