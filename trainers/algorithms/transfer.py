"""The base of the transfer algorithms (Tiki-Taka, TTv2, residual learning, multi-tile): the gradient goes
into a fast array P; every k steps columns of P are read and moved into a slower array W.

Array 0 of each tile is the main array W (gain 1). With x, d the layer's input and output gradient of a
step (equations in docs/trainers.md):

    gradient:  P <- P - lr * d^T x                          (pulsed/expected update, response applied)
    transfer:  every k = transfer_every steps, columns J (n = n_columns, cyclic):
               v = read(P[:, J]) (forward periphery, noisy)  and  W[:, J] <- W[:, J] + transfer_lr * v
    reset:     (tiki_taka, ttv2 with with_reset_prob = p > 0; aihwkit 1.1.0's TransferCompound) between the
               read and the write, one uniform draw u per read column; where any u < p, P[:, J] is reset:
               P_ij <- clip(b_ij + reset_std * xi), b_ij the element's reset value
"""

from __future__ import annotations

import time

import numpy as np

from aimc.devices import UpdateConfig
from aimc.trainers.algorithms.base import AnalogOptimizer
from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.algorithms.zero_shift import report, zero_shift
from aimc.trainers.layers import TileBlock

RESET_DRAWS = 0x5E7  # stream key of the reset draws of with_reset_prob


class TransferOptimizer(AnalogOptimizer):
    """Two arrays (W, P) by default; the gradient into the fast array P (index `fast`), transfers of P's
    columns into W. The fast arrays are zero-shifted before training where the config has zero_shift."""

    fast = 1

    def __init__(self, model, cfg):
        super().__init__(model, cfg)
        if self.reset_prob > 0:
            self.counts["resets"] = 0

    @property
    def reset_prob(self) -> float:
        """with_reset_prob of the config (0 where the algorithm has none)."""
        return float(getattr(self.cfg, "with_reset_prob", 0.0))

    def gains(self):
        return [1.0, 0.0]

    def init_block(self, li, bi, block, fresh):
        if self.reset_prob > 0 and getattr(block.tile.arrays[self.fast], "effects", None) is None:
            raise ValueError(f"with_reset_prob = {self.reset_prob} needs a device with a reset value (aihwkit's "
                             f"families: reset, reset_dtod, reset_std); {type(block.tile.device).__name__} has none")
        if fresh and getattr(self.cfg, "zero_shift", False):
            start = time.perf_counter()
            for n in range(1, len(block.tile.arrays)):
                self.counts["setup_pulses"] += zero_shift(block.tile, n, self.cfg.zero_shift_mode,
                                                          self.cfg.zero_shift_cycles)
            self.setup_seconds += time.perf_counter() - start

    def report_setup(self):
        if self.counts["setup_pulses"]:
            weights = sum(layer.out_features * layer.in_ext for layer in self.layers)
            report(self.algorithm, self.counts["setup_pulses"], weights, self.setup_seconds,
                   self.cfg.zero_shift_mode, self.cfg.zero_shift_cycles)

    @property
    def fast_lr(self) -> float:
        """The gradient step onto the fast array: cfg.fast_lr (constant under lr_decay), else lr."""
        return self.lr if self.cfg.fast_lr is None else float(self.cfg.fast_lr)

    def update_block(self, li, bi, block, x, d):
        self.gradient_update(block, x, d, self.fast, self.fast_lr)

    def after_step(self):
        if self.steps % self.cfg.transfer_every == 0:
            self.transfer("col", 1, 0)

    def update_latency(self, lm: LatencyModel) -> float:
        per_transfer = self.cfg.n_columns * (lm.t_mvm + lm.t_update)
        return lm.t_update + per_transfer / self.cfg.transfer_every

    # -- one transfer -----------------------------------------------------------------------------------
    def transfer(self, pointer: str, src: int, dst: int) -> None:
        """One transfer event: the next n_columns columns of array `src` (cyclic pointer `pointer` of each
        tile's state) into array `dst`, in every tile."""
        self.counts["transfers"] += 1
        for li, layer in enumerate(self.layers):
            for bi, b in enumerate(layer.blocks):
                st = self.tile_state[li][bi]
                cols = self.next_columns(st, pointer, min(self.cfg.n_columns, b.tile.in_size), b.tile.in_size)
                self.transfer_columns(b, st, src, dst, cols)
                self.counts["transferred_columns"] += len(cols)

    def transfer_columns(self, block: TileBlock, st: dict, src: int, dst: int, cols: np.ndarray) -> None:
        """W_dst[:, cols] += transfer_lr * read(W_src[:, cols])."""
        v = self.read_columns(block, src, cols)
        self.maybe_reset(block, st, src, cols)
        self.transfer_update(block, dst, cols, v, self.cfg.transfer_lr)

    def maybe_reset(self, block: TileBlock, st: dict, src: int, cols: np.ndarray) -> None:
        """With with_reset_prob = p > 0: one uniform draw per read column (a stream of the array's seed and
        a counter kept in the tile state, so a resumed run draws the same); where any is < p, the columns
        `cols` of array `src` are reset whole (ConductanceArray.reset) and counted in `resets`. p = 0 draws
        nothing."""
        p = self.reset_prob
        if p <= 0:
            return
        a = block.tile.arrays[src]
        k = int(st.get("reset_draws", 0))
        st["reset_draws"] = k + 1
        u = np.random.default_rng([a.seed, k, RESET_DRAWS]).uniform(size=len(cols))
        if (u < p).any():
            a.reset(cols)
            block.tile.invalidate()
            self.counts["resets"] = self.counts.get("resets", 0) + len(cols)

    def next_columns(self, state: dict, key: str, n_cols: int, in_size: int) -> np.ndarray:
        """The next n_cols column indices of a cyclic pointer stored in state[key]."""
        ptr = state.get(key, 0)
        cols = (ptr + np.arange(n_cols)) % in_size
        state[key] = int((ptr + n_cols) % in_size)
        return cols

    def read_columns(self, block: TileBlock, index: int, cols: np.ndarray) -> np.ndarray:
        """Noisy read of columns `cols` of array `index` (AnalogTile.read_columns); counts the reads."""
        self.counts["transfer_reads"] += len(cols)
        return block.tile.read_columns(index, cols)

    def transfer_update(self, block: TileBlock, index: int, cols: np.ndarray, values: np.ndarray,
                        lr: float) -> int:
        """W_index[:, cols] += lr * values.T as a pulsed/expected update with one-hot inputs (one sample
        per column), the way the hardware transfers a column. values: (n, out)."""
        t = block.tile
        onehot = np.zeros((len(cols), t.in_size), np.float32)
        onehot[np.arange(len(cols)), cols] = 1.0
        n = t.update(onehot, -values, lr, index, self.transfer_update_cfg(block))
        self.counts["transfer_pulses"] += n
        return n

    def transfer_bl(self, block: TileBlock) -> int:
        """Longest pulse train of a transfer: cfg.transfer_bl, else the tile's update BL."""
        bl = getattr(self.cfg, "transfer_bl", None)
        return int(bl) if bl is not None else int(block.tile.update_cfg.desired_bl)

    def transfer_update_cfg(self, block: TileBlock) -> UpdateConfig:
        """The tile's update settings with the transfer's BL."""
        cfg = block.tile.update_cfg
        bl = self.transfer_bl(block)
        return cfg if bl == cfg.desired_bl else cfg.model_copy(update={"desired_bl": bl})
