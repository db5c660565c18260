"""Transfer-based algorithms: Tiki-Taka (TTv1, TTv2), residual learning (R1 v1, v2), multi-tile residual
learning (R3), and mixed precision (R3's baseline). Array 0 of each tile is the main array W (gain 1);
the gradient goes into the fastest array; columns move from fast to slow arrays on a schedule.

Equations (docs/trainers.md): with x, d the layer's input and output gradient of a step,

    gradient:  P <- P - lr * d^T x                          (pulsed/expected update, response applied)
    transfer:  every k = transfer_every steps, columns J (n = n_columns, cyclic):
               v = read(P[:, J]) (forward periphery, noisy)  and  W[:, J] <- W[:, J] + transfer_lr * v
"""

from __future__ import annotations

import numpy as np

from aimc.devices.threshold import threshold_counts, threshold_counts_cols
from aimc.trainers.algorithms.base import AnalogOptimizer, LatencyModel


class _TransferBase(AnalogOptimizer):
    """Two arrays (W, P); gradient into P (index 1); transfer of P's columns into W (index 0)."""

    fast = 1
    zero_shift_fast = False

    def gains(self):
        return [1.0, 0.0]

    def init_block(self, li, bi, block, fresh):
        if fresh:
            for n in range(1, len(block.tile.arrays)):
                a = block.tile.arrays[n]
                before = a.pulses
                if self.zero_shift_fast:
                    a.zero_shift(getattr(self.cfg, "zero_shift_cycles", None))
                self.counts["setup_pulses"] += a.pulses - before

    def update_block(self, li, bi, block, x, d):
        self.gradient_update(block, x, d, self.fast)

    def after_step(self):
        k = self.cfg.transfer_every
        if self.steps % k != 0:
            return
        self.counts["transfers"] += 1
        for li, layer in enumerate(self.layers):
            for bi, b in enumerate(layer.blocks):
                st = self.tile_state[li][bi]
                cols = self.next_columns(st, "col", min(self.cfg.n_columns, b.tile.in_size), b.tile.in_size)
                self.transfer_columns(li, bi, b, st, 1, 0, cols)
                self.counts["transferred_columns"] += len(cols)
            layer.invalidate()

    def transfer_columns(self, li, bi, block, st, src, dst, cols):
        v = self.read_columns(block, src, cols)
        self.transfer_update(block, dst, cols, v, self.cfg.transfer_lr)

    def update_latency(self, lm: LatencyModel) -> float:
        per_transfer = self.cfg.n_columns * (lm.t_mvm + lm.t_update)
        return lm.t_update + per_transfer / self.cfg.transfer_every


class TikiTaka(_TransferBase):
    """Tiki-Taka v1 (R2; aihwkit TransferCompound): forward gain of P is 0, so the forward pass and the
    gradient use W only; P is not zero-shifted."""

    algorithm = "tiki_taka"


class Residual(_TransferBase):
    """Residual learning (R1 Sec. 4): W_bar = W + gamma P in the forward pass, so the gradient is taken at
    the mixed weight; P zero-shifted (ConductanceArray.zero_shift) before training when cfg.zero_shift."""

    algorithm = "residual"

    @property
    def zero_shift_fast(self):
        return bool(self.cfg.zero_shift)

    def gains(self):
        return [1.0, float(self.cfg.gamma)]


class _BufferedMixin:
    """Digital buffer H (per tile, out x in, float32) and threshold pulses into W through
    ConductanceArray.pulse (exact pulses)."""

    single_pulse = False

    def _buffer(self, st, block):
        h = st.get("H")
        if h is None:
            h = st["H"] = np.zeros((block.tile.out_size, block.tile.in_size), np.float32)
        return h

    def _fire(self, block, st, h, cols):
        a = block.tile.arrays[0]
        counts = st.get("_counts")
        if counts is None or counts.shape != a.shape:
            counts = np.zeros(a.shape, np.int64)
            st["_counts"] = counts
        n = threshold_counts_cols(h, cols.astype(np.int64), counts, a.params.granularity,
                                  float(self.cfg.threshold), self.transfer_bl(block), self.single_pulse)
        if n:
            fired = a.pulse(counts)
            self.counts["transfer_pulses"] += fired
        counts[:, cols] = 0


class TTv2(_BufferedMixin, _TransferBase):
    """TTv2 (Gokmen 2021; aihwkit BufferedTransferCompound): gradient at W (gain of P 0), P read column by
    column into H <- H + transfer_lr * read(P[:, j]); where |H| >= threshold * dw_min, n = floor(|H|/dw_min)
    pulses (at most desired_bl) of sign(H) are fired into W and H -= n dw_min."""

    algorithm = "ttv2"

    def transfer_columns(self, li, bi, block, st, src, dst, cols):
        v = self.read_columns(block, src, cols)  # (n, out)
        h = self._buffer(st, block)
        h[:, cols] += np.float32(self.cfg.transfer_lr) * v.T
        self._fire(block, st, h, cols)

    def update_latency(self, lm: LatencyModel) -> float:
        per_transfer = self.cfg.n_columns * (lm.t_mvm + lm.t_update)
        return lm.t_update + per_transfer / self.cfg.transfer_every


class ResidualV2(_BufferedMixin, Residual):
    """Residual learning v2 (R1 Sec. 5): mixed weight W + gamma P, zero-shifted P, and an EMA buffer
    H <- (1 - buffer_beta) H + buffer_beta read(P[:, j]); where |H| >= threshold * dw_min one pulse of
    sign(H) is fired into W and H -= sign(H) dw_min. (transfer_lr is not used: a transfer moves W by
    one pulse per element.)"""

    algorithm = "residual_v2"
    single_pulse = True

    def transfer_columns(self, li, bi, block, st, src, dst, cols):
        v = self.read_columns(block, src, cols)
        h = self._buffer(st, block)
        b = np.float32(self.cfg.buffer_beta)
        h[:, cols] = (np.float32(1.0) - b) * h[:, cols] + b * v.T
        self._fire(block, st, h, cols)

    def update_latency(self, lm: LatencyModel) -> float:
        per_transfer = self.cfg.n_columns * (lm.t_mvm + lm.t_pulse + lm.t_pre)
        return lm.t_update + per_transfer / self.cfg.transfer_every


class MultiTile(_TransferBase):
    """Multi-tile residual learning (R3): arrays 0..N with gains gamma^n (W_bar = sum_n gamma^n W_n);
    the gradient goes into the fastest array N; array n is transferred into n - 1 (columns, noisy read,
    transfer_lr) every T_n = transfer_every * round(gamma^-(N - n)) steps, so slower arrays receive
    transfers geometrically less often. Arrays 1..N are zero-shifted when cfg.zero_shift."""

    algorithm = "multi_tile"

    @property
    def fast(self):
        return self.cfg.n_tiles - 1

    @property
    def zero_shift_fast(self):
        return bool(self.cfg.zero_shift)

    def gains(self):
        return [float(self.cfg.gamma) ** n for n in range(self.cfg.n_tiles)]

    def periods(self) -> list[int]:
        """T_n for n = 1..N (index n - 1): steps between two transfers of array n into n - 1."""
        big_n = self.cfg.n_tiles - 1
        return [self.cfg.transfer_every * max(1, int(round(self.cfg.gamma ** -(big_n - n))))
                for n in range(1, big_n + 1)]

    def after_step(self):
        periods = self.periods()
        big_n = self.cfg.n_tiles - 1
        for n in range(big_n, 0, -1):  # fastest first
            if self.steps % periods[n - 1] != 0:
                continue
            self.counts["transfers"] += 1
            for li, layer in enumerate(self.layers):
                for bi, b in enumerate(layer.blocks):
                    st = self.tile_state[li][bi]
                    cols = self.next_columns(st, f"col{n}", min(self.cfg.n_columns, b.tile.in_size),
                                             b.tile.in_size)
                    self.transfer_columns(li, bi, b, st, n, n - 1, cols)
                    self.counts["transferred_columns"] += len(cols)
                layer.invalidate()

    def update_latency(self, lm: LatencyModel) -> float:
        per_transfer = self.cfg.n_columns * (lm.t_mvm + lm.t_update)
        return lm.t_update + sum(per_transfer / t for t in self.periods())


class MixedPrecision(AnalogOptimizer):
    """Mixed precision (Nandakumar et al. 2020; R3's baseline): a digital accumulator X <- X - lr d^T x
    (float32, exact gradient); where |X| >= threshold * dw_min, n = floor(|X| / dw_min) pulses (at most
    desired_bl) of sign(X) are fired into W (ConductanceArray.pulse) and X -= n dw_min."""

    algorithm = "mixed_precision"

    def gains(self):
        return [1.0]

    def update_block(self, li, bi, block, x, d):
        import torch

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
            self.counts["update_pulses"] += a.pulse(counts)

    def update_latency(self, lm: LatencyModel) -> float:
        return lm.t_update
