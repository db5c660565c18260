"""Mixed precision (Nandakumar et al., Front. Neurosci. 2020), the baseline of [R3].

[R3] Li et al., arXiv:2510.02516.
"""

from __future__ import annotations

import numpy as np
import torch

from aimc.devices.threshold import threshold_counts
from aimc.trainers.algorithms.base import AnalogOptimizer


class MixedPrecision(AnalogOptimizer):
    """Mixed precision: a digital accumulator X <- X - lr d^T x (float32, exact gradient); where
    |X| >= threshold * dw_min, n = floor(|X| / dw_min) pulses (at most desired_bl) of sign(X) are fired
    into W (ConductanceArray.pulse) and X -= n dw_min."""

    algorithm = "mixed_precision"

    def update_block(self, li, bi, block, x, d):
        st = self.tile_state[li][bi]
        a = block.tile.arrays[0]
        acc = st.get("X")
        if acc is None:
            acc = st["X"] = np.zeros(a.shape, np.float32)
        counts = st.get("_counts")
        if counts is None:
            counts = st["_counts"] = np.zeros(a.shape, np.int64)
        xt = torch.from_numpy(np.ascontiguousarray(x, np.float32))
        dt = torch.from_numpy(np.ascontiguousarray(d, np.float32))
        torch.from_numpy(acc).addmm_(dt.T, xt, alpha=-self.lr)
        n = threshold_counts(acc, counts, a.params.granularity, float(self.cfg.threshold),
                             int(block.tile.update_cfg.desired_bl), False)
        if n:
            self.counts["update_pulses"] += block.tile.pulse(counts, 0)
