"""Buffered transfer (TTv2, residual learning v2): reads of P accumulate in a digital buffer H (per tile,
out x in, float32); where |H| reaches the threshold, exact pulses go into W (ConductanceArray.pulse)."""

from __future__ import annotations

import numpy as np

from aimc.devices.threshold import threshold_counts_cols
from aimc.trainers.algorithms.transfer import TransferOptimizer
from aimc.trainers.layers import TileBlock


class BufferedTransfer(TransferOptimizer):
    """A transfer reads P's columns J into H[:, J] (`accumulate`, the algorithm's rule), then fires, where
    |H| >= threshold * dw_min, n = floor(|H| / dw_min) pulses (at most the transfer BL; one with
    `single_pulse`) of sign(H) into W and takes them off H."""

    single_pulse = False

    def accumulate(self, h: np.ndarray, cols: np.ndarray, v: np.ndarray) -> None:
        """Fold the reads v (n, out) of columns `cols` into the buffer h, in place: H += transfer_lr v (TT-v2's
        rule; residual learning v2 keeps an EMA instead)."""
        h[:, cols] += np.float32(self.cfg.transfer_lr) * v.T

    def transfer_columns(self, block, st, src, dst, cols):
        v = self.read_columns(block, src, cols)  # (n, out)
        self.maybe_reset(block, st, src, cols)
        h = self.buffer(st, block)
        self.accumulate(h, cols, v)
        self.fire(block, st, h, cols)

    def buffer(self, st: dict, block: TileBlock) -> np.ndarray:
        """The tile's buffer H (kept in its state, checkpointed), zero at first."""
        h = st.get("H")
        if h is None:
            h = st["H"] = np.zeros((block.tile.out_size, block.tile.in_size), np.float32)
        return h

    def fire(self, block: TileBlock, st: dict, h: np.ndarray, cols: np.ndarray) -> None:
        """Threshold pulses of H's columns `cols` into W (array 0); H keeps the remainder."""
        a = block.tile.arrays[0]
        counts = st.get("_counts")
        if counts is None or counts.shape != a.shape:
            counts = np.zeros(a.shape, np.int64)
            st["_counts"] = counts
        n = threshold_counts_cols(h, cols.astype(np.int64), counts, a.params.granularity,
                                  float(self.cfg.threshold), self.transfer_bl(block), self.single_pulse)
        if n:
            self.counts["transfer_pulses"] += block.tile.pulse(counts, 0)
        counts[:, cols] = 0
