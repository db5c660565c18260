"""Residual learning [R1]: v1 (Sec. 4) transfers P into W through the tile's update, v2 (Sec. 5) through
an EMA buffer and single threshold pulses.

[R1] Wu et al., NeurIPS 2025, arXiv:2502.06309.
"""

from __future__ import annotations

import numpy as np

from aimc.trainers.algorithms.buffered_transfer import BufferedTransfer
from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.algorithms.transfer import TransferOptimizer


class Residual(TransferOptimizer):
    """Residual learning: W_bar = W + gamma P in the forward pass, so the gradient is taken at the mixed
    weight; P zero-shifted (ConductanceArray.zero_shift) before training when cfg.zero_shift."""

    algorithm = "residual"

    def gains(self):
        return [1.0, float(self.cfg.gamma)]


class ResidualV2(BufferedTransfer, Residual):
    """Residual learning v2: mixed weight W + gamma P, zero-shifted P, and an EMA buffer
    H <- (1 - buffer_beta) H + buffer_beta read(P[:, j]); where |H| >= threshold * dw_min one pulse of
    sign(H) is fired into W and H -= sign(H) dw_min. (transfer_lr is not used: a transfer moves W by
    one pulse per element.)"""

    algorithm = "residual_v2"
    single_pulse = True

    def accumulate(self, h, cols, v):
        b = np.float32(self.cfg.buffer_beta)
        h[:, cols] = (np.float32(1.0) - b) * h[:, cols] + b * v.T

    def update_latency(self, lm: LatencyModel) -> float:
        per_transfer = self.cfg.n_columns * (lm.t_mvm + lm.t_pulse + lm.t_pre)
        return lm.t_update + per_transfer / self.cfg.transfer_every
