"""Multi-tile residual learning [R3].

[R3] Li et al., arXiv:2510.02516.
"""

from __future__ import annotations

import numpy as np

from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.algorithms.transfer import TransferOptimizer
from aimc.trainers.layers import TileBlock


class MultiTile(TransferOptimizer):
    """Multi-tile residual learning: arrays 0..N with gains gamma^n (W_bar = sum_n gamma^n W_n); the
    gradient goes into the fastest array N; array n is transferred into n - 1 (columns, noisy read,
    transfer_lr * transfer_lr_growth^(N - n)) every T_n = transfer_every * round(r^(N - n)) steps, r =
    period_ratio or 1/gamma, so slower arrays receive transfers geometrically less often (R3 Appendix K:
    r = 5, growth 1.2). Arrays 1..N are zero-shifted when cfg.zero_shift."""

    algorithm = "multi_tile"

    @property
    def fast(self):
        return self.cfg.n_tiles - 1

    def gains(self):
        return [float(self.cfg.gamma) ** n for n in range(self.cfg.n_tiles)]

    def periods(self) -> list[int]:
        """T_n for n = 1..N (index n - 1): steps between two transfers of array n into n - 1."""
        big_n = self.cfg.n_tiles - 1
        r = self.cfg.period_ratio
        return [self.cfg.transfer_every * max(1, int(round(self.cfg.gamma ** -(big_n - n) if r is None
                                                           else r ** (big_n - n))))
                for n in range(1, big_n + 1)]

    def transfer_columns(self, block: TileBlock, st: dict, src: int, dst: int, cols: np.ndarray) -> None:
        """W_dst[:, cols] += transfer_lr * transfer_lr_growth^(N - src) * read(W_src[:, cols])."""
        v = self.read_columns(block, src, cols)
        lr = self.cfg.transfer_lr * self.cfg.transfer_lr_growth ** (self.fast - src)
        self.transfer_update(block, dst, cols, v, lr)

    def after_step(self):
        periods = self.periods()
        for n in range(self.cfg.n_tiles - 1, 0, -1):  # fastest first
            if self.steps % periods[n - 1] == 0:
                self.transfer(f"col{n}", n, n - 1)

    def update_latency(self, lm: LatencyModel) -> float:
        per_transfer = self.cfg.n_columns * (lm.t_mvm + lm.t_update)
        return lm.t_update + sum(per_transfer / t for t in self.periods())
