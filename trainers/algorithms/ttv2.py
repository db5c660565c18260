"""TTv2 (Gokmen, Front. Artif. Intell. 2021; aihwkit's BufferedTransferCompound)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aimc.trainers.algorithms.transfer import WITH_RESET_PROB, TransferConfig, TransferOptimizer
from aimc.trainers.algorithms.transfer_parts import ReadSum, ThresholdBuffer


class TTv2Config(TransferConfig):
    """TTv2 (Gokmen 2021): digital buffer H accumulates reads of P; one pulse into W where |H| >= threshold."""

    algorithm: Literal["ttv2"] = "ttv2"
    threshold: float = Field(1.0, gt=0, description="transfer threshold in units of dw_min")
    with_reset_prob: float = Field(0.0, ge=0, le=1, description=WITH_RESET_PROB)


class TTv2(TransferOptimizer):
    """TTv2: gradient at W (gain of P 0), P read column by column into H <- H + transfer_lr * read(P[:, j]);
    where |H| >= threshold * dw_min, n = floor(|H|/dw_min) pulses (at most the transfer BL) of sign(H) are
    fired into W and H -= n dw_min."""

    config = TTv2Config

    def __init__(self, model, cfg: TTv2Config):
        super().__init__(model, cfg, buffer=ThresholdBuffer(cfg.threshold), fold=ReadSum(cfg.transfer_lr))
