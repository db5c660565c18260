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

What the algorithms differ in are parts passed to `TransferOptimizer` (trainers/algorithms/transfer_parts.py):
a digital buffer with threshold pulses between the read and the write (TTv2, residual learning v2, RIDER
with a threshold), the rule that folds reads into it, and RIDER's reference tracking.
"""

from __future__ import annotations

import time

import numpy as np
from pydantic import Field

from aimc.common import seeds
from aimc.devices import UpdateConfig
from aimc.devices.pulse_trains import MAX_BL
from aimc.trainers.algorithms.base import AlgorithmConfig, AnalogOptimizer
from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.algorithms.transfer_parts import ReadEMA, ReadSum, ReferenceTracking, ThresholdBuffer
from aimc.trainers.algorithms.zero_shift import report, zero_shift
from aimc.trainers.layers import TileBlock

WITH_RESET_PROB = (
    "probability per read column that the transfer's columns of the fast array are reset (aihwkit "
    "1.1.0's with_reset_prob): after the read, before the write, w = clip(b + reset_std xi); needs a "
    "device with reset (aihwkit's families)"
)


class TransferConfig(AlgorithmConfig):
    """What the configs of the transfer algorithms share: the fast step and the transfer schedule."""

    fast_lr: float | None = Field(
        None,
        gt=0,
        description="gradient step onto the fast array, constant under "
        "lr_decay (aihwkit's TransferCompound fast_lr, 1.0 by default there); None: lr. "
        "lr still steps the digital parameters",
    )
    transfer_lr: float = Field(0.01, gt=0, description="transfer step beta (weight units per unit read)")
    transfer_every: int = Field(1, ge=1, description="steps between two transfers (k)")
    n_columns: int = Field(1, ge=1, description="columns of P read and transferred per transfer (n)")
    transfer_bl: int | None = Field(
        None,
        ge=1,
        le=MAX_BL,
        description="longest pulse train of a transfer (most "
        "pulses per element and transfer); None: the tile's update BL. aihwkit gives "
        "transfers their own update settings (BL 31 by default)",
    )


class TransferOptimizer(AnalogOptimizer):
    """Two arrays (W, P) by default; the gradient into the fast array P (index `fast`), transfers of P's
    columns into W. The fast arrays are zero-shifted before training where the config has zero_shift.

    The parts: `fast_gain`, P's gain in the forward weight (0: W alone; gamma: residual learning's mixed
    weight); `buffer` with `fold`, a digital buffer the reads are folded into and that fires threshold
    pulses into W (none: the reads are written into W by a pulsed update at transfer_lr); `reference`,
    RIDER's tracked reference of P and chopper sign."""

    fast = 1

    def __init__(
        self,
        model,
        cfg,
        *,
        fast_gain: float = 0.0,
        buffer: ThresholdBuffer | None = None,
        fold: ReadSum | ReadEMA | None = None,
        reference: ReferenceTracking | None = None,
    ):
        if (buffer is None) != (fold is None):
            raise ValueError("a buffer needs the rule that folds reads into it, and a rule a buffer")
        self.fast_gain = float(fast_gain)
        self.buffer, self.fold, self.reference = buffer, fold, reference
        super().__init__(model, cfg)
        if self.reset_prob > 0:
            self.counts["resets"] = 0

    runs_on_gpu = True  # column reads and pulses on the device; a buffer (TTv2, residual v2) and RIDER's Q on the host

    @property
    def reset_prob(self) -> float:
        """with_reset_prob of the config (0 where the algorithm has none)."""
        return float(getattr(self.cfg, "with_reset_prob", 0.0))

    def gains(self):
        return [1.0, self.fast_gain]

    def init_block(self, li, bi, block, fresh):
        if self.reset_prob > 0 and not block.tile.has_reset(self.fast):
            raise ValueError(
                f"with_reset_prob = {self.reset_prob} needs a device with a reset value (aihwkit's "
                f"families: reset, reset_dtod, reset_std); {type(block.tile.device).__name__} has none"
            )
        if fresh and getattr(self.cfg, "zero_shift", False):
            start = time.perf_counter()
            for n in range(1, len(block.tile.gains)):
                self.counts["setup_pulses"] += zero_shift(
                    block.tile, n, self.cfg.zero_shift_mode, self.cfg.zero_shift_cycles
                )
            self.setup_seconds += time.perf_counter() - start
        if self.reference is not None:  # Q~ = the zero shift's estimate of the symmetric point, or 0
            self.counts.setdefault("reference_writes", 0)
            self.reference.start(block.tile, self.tile_state[li][bi])

    def report_setup(self):
        if self.counts["setup_pulses"]:
            weights = sum(layer.out_features * layer.in_ext for layer in self.layers)
            report(
                self.algorithm,
                self.counts["setup_pulses"],
                weights,
                self.setup_seconds,
                self.cfg.zero_shift_mode,
                self.cfg.zero_shift_cycles,
            )

    @property
    def fast_lr(self) -> float:
        """The gradient step onto the fast array: cfg.fast_lr (constant under lr_decay), else lr."""
        return self.lr if self.cfg.fast_lr is None else float(self.cfg.fast_lr)

    def update_block(self, li, bi, block, x, d):
        if self.reference is not None:
            d = self.reference.signed(self.tile_state[li][bi], d)
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
        """W_dst[:, cols] += transfer_rate(src) * read(W_src[:, cols]) as a pulsed update; or, with a buffer,
        the reads folded into H[:, cols] and its threshold pulses fired into W_dst. With a reference, the read
        moves Q and the transfer carries c times the read; Q~ follows as the reference part says."""
        tile = block.tile
        v = self.read_columns(block, src, cols)  # (n, out)
        self.maybe_reset(block, st, src, cols)
        if self.reference is not None:
            v = self.reference.follow(tile, st, cols, v)
        if self.buffer is None:
            self.transfer_update(block, dst, cols, v, self.transfer_rate(src))
        else:
            h = self.buffer.of(st, tile)
            self.fold.fold(h, cols, v)
            self.counts["transfer_pulses"] += self.buffer.fire(tile, st, h, dst, self.transfer_bl(block), cols)
        if self.reference is not None:
            self.counts["reference_writes"] += self.reference.track(tile, st, cols)

    def transfer_rate(self, src: int) -> float:
        """The step of a transfer out of array `src` (weight units per unit read): transfer_lr."""
        return self.cfg.transfer_lr

    def maybe_reset(self, block: TileBlock, st: dict, src: int, cols: np.ndarray) -> None:
        """With with_reset_prob = p > 0: one uniform draw per read column (a stream of the array's seed and
        a counter kept in the tile state, so a resumed run draws the same); where any is < p, the columns
        `cols` of array `src` are reset whole (AnalogTile.reset_columns) and counted in `resets`. p = 0 draws
        nothing."""
        p = self.reset_prob
        if p <= 0:
            return
        k = int(st.get("reset_draws", 0))
        st["reset_draws"] = k + 1
        u = seeds.generator(block.tile.array_seed(src), k, seeds.RESET_DRAWS).uniform(size=len(cols))
        if (u < p).any():
            block.tile.reset_columns(src, cols)
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

    def transfer_update(self, block: TileBlock, index: int, cols: np.ndarray, values: np.ndarray, lr: float) -> int:
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
