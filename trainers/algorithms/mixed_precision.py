"""Mixed precision (Nandakumar et al., Front. Neurosci. 2020), the baseline of [R3].

[R3] Li et al., arXiv:2510.02516.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from aimc.trainers.algorithms.base import AlgorithmConfig, AnalogOptimizer
from aimc.trainers.algorithms.transfer_parts import ThresholdBuffer


class MixedPrecisionConfig(AlgorithmConfig):
    """Mixed precision: digital gradient accumulator; whole pulses fired where it reaches dw_min (R3 baseline)."""

    algorithm: Literal["mixed_precision"] = "mixed_precision"
    threshold: float = Field(1.0, gt=0, description="pulse threshold in units of dw_min")


class MixedPrecision(AnalogOptimizer):
    """Mixed precision: a digital accumulator X <- X - lr d^T x (float32, exact gradient; a `ThresholdBuffer`
    in the tile state under "X"); where |X| >= threshold * dw_min, n = floor(|X| / dw_min) pulses (at most
    desired_bl) of sign(X) are fired into W and X -= n dw_min."""

    config = MixedPrecisionConfig
    runs_on_gpu = True  # the accumulator X on the host, the pulses on the device

    def __init__(self, model, cfg: MixedPrecisionConfig):
        self.accumulator = ThresholdBuffer(cfg.threshold, key="X")
        super().__init__(model, cfg)

    def update_block(self, li, bi, block, x, d):
        st = self.tile_state[li][bi]
        acc = self.accumulator.of(st, block.tile)
        xt, dt = (  # on GPU tiles x and d are tensors there: the accumulator is on the host
            v.to("cpu", torch.float32)
            if isinstance(v, torch.Tensor)
            else torch.from_numpy(np.ascontiguousarray(v, np.float32))
            for v in (x, d)
        )
        torch.from_numpy(acc).addmm_(dt.T, xt, alpha=-self.lr)
        self.counts["update_pulses"] += self.accumulator.fire(
            block.tile, st, acc, 0, int(block.tile.update_cfg.desired_bl)
        )
