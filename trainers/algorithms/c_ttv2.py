"""Chopped Tiki-Taka v2 (c-TTv2): aihwkit 1.1.0's ChoppedTransferCompound, as its CPU simulator runs it.

Rasch, Carta, Fagbohungbe, Gokmen, Nat. Commun. 15:7133 (2024), arXiv:2303.04721 (Eq. 10-14); the order of
operations, the buffer scaling and the defaults are aihwkit 1.1.0's. Array 0 of a tile is the slow array C
(the visible weight), array 1 the fast array A. For each rank-1 update (x, d) (a sample; one output pixel
of a convolution):

    fast step:  eta_A = fast_lr * BL * dw_A / (m_x m_d) (auto_scale; m_x, m_d running estimates of
                max|x|, max|d|) or fast_lr; times lr where scale_fast_lr
    gradient:   A <- A - eta_A (c_out d)(c_in x)^T          (pulsed; the choppers flip the pulse signs)
    every `every` updates, column k (cyclic):
        v = read(A[:, k]);  H[:, k] += c_in[k] c_out * s * v,   s = lr_T / (buffer_granularity dw_A G)
        n = clamp(trunc(H), +-transfer_bl) where |H| >= 1: n pulses into C[:, k] (step != 1: a pulsed
        update of C by step dw_C n, see trainers/algorithms/chopped_kernel.py); H <- momentum H
        (forget_buffer) or H <- H - (1 - momentum) n;  then c_in[k] flips (random: probability
        in_chop_prob; regular: in the last sweep of every period of max(ceil(1/in_chop_prob), 2) sweeps)

with lr_T = transfer_lr (* lr where scale_transfer_lr) (* gamma where gamma > 0) and G =
auto_granularity / (n_in * |transfer_every|) (1 where auto_granularity is 0). `every` is transfer_every, or
where it is negative round(n_states / n_in * |transfer_every|) with n_states = (w_max - w_min) / dw_A of
the fast device (a sweep over the columns per |transfer_every| n_states updates). A mini-batch is split at the
reads, so each read sees A after exactly the updates before it.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from pydantic import Field, field_validator, model_validator

from aimc.common import seeds
from aimc.trainers.algorithms.base import GAIN_MAX, PERIOD_MAX, AlgorithmConfig, AnalogOptimizer
from aimc.trainers.algorithms.chopped_kernel import (
    ChopperState,
    TransferRule,
    auto_scale_estimates,
    chopped_transfer,
    running_estimate,
)
from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.layers import TileBlock


class CTTv2Config(AlgorithmConfig):
    """Chopped Tiki-Taka v2 (aihwkit 1.1.0 ChoppedTransferCompound; Rasch et al., Nat. Commun. 15:7133,
    2024, arXiv:2303.04721). Names and defaults are aihwkit's `build_config("c-ttv2")`; every `*_every` is in
    rank-1 updates (one input vector; one output pixel of a convolution), unless `units_in_mbatch`."""

    algorithm: Literal["c_ttv2"] = "c_ttv2"
    fast_lr: float = Field(
        0.1,
        gt=0,
        description="gradient step onto the fast array A: with auto_scale the "
        "pulse fraction fast_lr * BL * dw_A / (m_x m_d) (weight units per unit d x); without, "
        "fast_lr itself (weight units per unit d x)",
    )
    scale_fast_lr: bool = Field(
        False, description="multiply the fast step by lr (later aihwkit versions; aihwkit 1.1.0 never does)"
    )
    auto_scale: bool = Field(True, description="scale the fast step by running estimates m_x, m_d of max|x|, max|d|")
    auto_momentum: float = Field(
        0.99,
        gt=0,
        lt=1,
        description="EMA momentum of m_x, m_d (per batch of m vectors: "
        "each vector moves the EMA by (1 - auto_momentum) / m)",
    )
    transfer_lr: float = Field(
        1.0,
        gt=0,
        description="transfer rate lr_T (weight units of C per unit read of A, "
        "before the buffer granularity): the buffer grows by lr_T * read / granularity",
    )
    scale_transfer_lr: bool = Field(True, description="lr_T = transfer_lr * lr (true) or transfer_lr (false)")
    transfer_every: float = Field(
        1.0,
        description="rank-1 updates between two column reads (or mini-batches "
        "with units_in_mbatch), rounded to an integer >= 1; if < 0, the read period is "
        "round(n_states / n_in * |transfer_every|) rank-1 updates, n_states = (w_max - "
        "w_min) / dw_A of the fast device (aihwkit's calcNumStates): |transfer_every| "
        "n_states updates per sweep",
    )
    step: float = Field(
        1.0,
        gt=0,
        description="write into C: lr = step * dw_C per unit of the thresholded buffer "
        "(1: exactly n pulses; otherwise a pulsed update of C with transfer_bl slots and no update "
        "management: with transfer_bl 1 each pulse fires with probability min(step, 1))",
    )
    units_in_mbatch: bool = Field(False, description="transfer_every counts mini-batches instead of rank-1 updates")
    in_chop_prob: float = Field(
        0.1,
        ge=0,
        le=1,
        description="chopper switching of a column: probability per read "
        "(in_chop_random) or the reciprocal of the period in sweeps (regular)",
    )
    in_chop_random: bool = Field(True, description="switch input choppers at random (true) or regularly (false)")
    out_chop_prob: float = Field(
        0.0, ge=0, le=1, description="probability per sweep that a row's output chopper switches"
    )
    buffer_granularity: float = Field(
        1.0, gt=0, description="buffer threshold in units of dw_A (times the auto_granularity factor)"
    )
    auto_granularity: float = Field(
        0.0,
        ge=0,
        description="if > 0, the threshold is multiplied by "
        "auto_granularity / (n_in * transfer_every): rank-1 updates of constant gradient "
        "that fill the buffer to one pulse",
    )
    momentum: float = Field(
        0.0,
        ge=0,
        le=1,
        description="buffer kept after a pulse: H <- momentum H (forget_buffer) or H <- H - (1 - momentum) n",
    )
    forget_buffer: bool = Field(True, description="after a pulse keep momentum * H (true) or subtract the pulses")
    no_buffer: bool = Field(False, description="each read is thresholded alone (no memory in H)")
    correct_gradient_magnitudes: bool = Field(
        False,
        description="divide the buffer increment by the fast step and "
        "use dw_C / dw_A (aihwkit's correct_gradient_magnitudes)",
    )
    transfer_bl: int = Field(1, ge=1, le=32, description="most pulses per element and column write into C")
    gamma: float = Field(
        0.0,
        ge=0,
        le=GAIN_MAX,
        description="gain of the de-chopped A in the forward weight C + gamma A (later "
        "aihwkit versions; needs in_chop_prob = out_chop_prob = 0); the transfer rate is "
        "multiplied by gamma where gamma > 0",
    )
    with_reset_prob: float = Field(
        0.0,
        ge=0,
        le=1,
        description="resets during transfers: 0 only (aihwkit 1.1.0's "
        "ChoppedTransferCompound accepts the field but resets nothing)",
    )

    @field_validator("transfer_every")
    @classmethod
    def _some_period(cls, te: float) -> float:
        if te == 0:
            raise ValueError(
                "transfer_every = 0: give the rank-1 updates between two reads (> 0), or a multiple of "
                "the fast device's number of states per sweep (< 0)"
            )
        if abs(te) > PERIOD_MAX:
            raise ValueError(f"transfer_every = {te:g}: a period of at most 2^53 = {PERIOD_MAX:.4g} in magnitude")
        return te

    @field_validator("with_reset_prob")
    @classmethod
    def _no_reset(cls, p: float) -> float:
        if p > 0:
            raise ValueError(
                f"with_reset_prob = {p}: resets during transfers are not provided for c_ttv2 and agad "
                "(aihwkit 1.1.0's ChoppedTransferCompound resets nothing either); use tiki_taka or ttv2"
            )
        return p

    @model_validator(mode="after")
    def _gamma_without_choppers(self):
        if self.gamma > 0 and (self.in_chop_prob > 0 or self.out_chop_prob > 0):
            raise ValueError(
                f"gamma = {self.gamma} needs in_chop_prob = out_chop_prob = 0: the forward gain of the "
                "fast array is one number per tile, it cannot follow per-column choppers"
            )
        return self


class CTTv2(AnalogOptimizer):
    """c-TTv2. Tile state: H (buffer), c_in / c_out (chopper signs, float32 +-1), m_x / m_d (auto-scale EMAs),
    eta (the last fast step), t (rank-1 updates so far), col (next column), sweeps (completed sweeps over
    the columns). Chopper draws come from the tile's seed and the step number, so a resumed run draws the
    same switches. Array `fast` of a tile is A, array 0 C."""

    config = CTTv2Config
    fast = 1
    runs_on_gpu = True  # the updates, reads, buffers and pulses on the device; choppers and schedule on the host

    def gains(self):
        return [1.0, float(self.cfg.gamma)]

    def init_block(self, li, bi, block, fresh):
        t = block.tile
        self.tile_state[li][bi].update(
            H=np.zeros((t.out_size, t.in_size), np.float32),
            c_in=np.ones(t.in_size, np.float32),
            c_out=np.ones(t.out_size, np.float32),
            m_x=0.0,
            m_d=0.0,
            eta=0.0,
            t=0,
            col=0,
            sweeps=0,
        )
        self.init_extra(self.tile_state[li][bi], block)

    def init_extra(self, st: dict, block: TileBlock) -> None:
        """Further state of a subclass."""

    def after_step(self):
        """The transfers run inside the gradient update (`update_block`), between its vectors."""

    # -- the fast step ------------------------------------------------------------------------------------
    def every(self, n: int, block: TileBlock) -> int:
        """Rank-1 updates between two column reads for a batch of n vectors: transfer_every (rounded half away
        from zero, as aihwkit 1.1.0) or ceil(transfer_every n) with units_in_mbatch; where transfer_every < 0,
        round(n_states / n_in |transfer_every|), n_states = (w_max - w_min) / dw_A of the fast array's device
        (aihwkit's calcNumStates), whatever units_in_mbatch. At least 1."""
        te = self.cfg.transfer_every
        if te < 0:
            n_states, _ = self.fast_states(block)
            period = max(1, math.floor(n_states / block.tile.in_size * -te + 0.5))
        else:
            period = max(1, math.ceil(te * n) if self.cfg.units_in_mbatch else math.floor(te + 0.5))
        if period > 2**62:
            raise ValueError(
                f"transfer_every = {te:g} gives a period of {period:.3g} rank-1 updates, beyond the 64-bit update "
                "count (2^62)"
            )
        return period

    def fast_states(self, block: TileBlock) -> tuple[float, float]:
        """(n_states, dw_A) of the fast array's device: n_states = (w_max - w_min) / dw_A (aihwkit's
        calcNumStates)."""
        lo, hi = block.tile.bounds(self.fast)
        dw = self.dw_fast(block)
        return (hi - lo) / dw, dw

    def dw_fast(self, block: TileBlock) -> float:
        """dw_A: the granularity of the fast array's device."""
        return block.tile.granularity(self.fast)

    def fast_steps(self, st: dict, block: TileBlock, x: np.ndarray, d: np.ndarray) -> np.ndarray | float:
        """eta_A of every vector of the batch (auto_scale: one per vector, the EMAs updated per vector
        before its step, tau = (1 - auto_momentum) / n; an EMA at 0 starts at the first positive value);
        otherwise one float."""
        cfg = self.cfg
        base = cfg.fast_lr * (self.lr if cfg.scale_fast_lr else 1.0)
        if not cfg.auto_scale:
            st["eta"] = base
            return base
        m_x, m_d, tau = float(st["m_x"]), float(st["m_d"]), (1.0 - cfg.auto_momentum) / len(x)
        if isinstance(x, torch.Tensor):  # GPU tiles: the rows' largest magnitudes there, the estimates here
            mx = running_estimate(x.abs().amax(dim=1).double().cpu().numpy(), m_x, tau)
            md = running_estimate(d.abs().amax(dim=1).double().cpu().numpy(), m_d, tau)
        else:
            mx, md = auto_scale_estimates(x, d, m_x, m_d, tau)
        st["m_x"], st["m_d"] = float(mx[-1]), float(md[-1])
        scale = base * block.tile.update_cfg.desired_bl * self.dw_fast(block)
        prod = mx * md
        eta = np.where(prod > 0, scale / np.where(prod > 0, prod, 1.0), base)
        st["eta"] = float(eta[-1])
        return eta

    def update_block(self, li, bi, block, x, d):
        st = self.tile_state[li][bi]
        if not isinstance(x, torch.Tensor):  # GPU tiles take tensors as they are
            x, d = np.ascontiguousarray(x, np.float32), np.ascontiguousarray(d, np.float32)  # a block's columns
        n = len(x)
        every = self.every(n, block)
        eta = self.fast_steps(st, block, x, d)
        done = int(st["t"])
        first = every - done % every - 1  # the first vector after which a column is read
        st["t"] = done + n
        rule = self.rule(st, block)
        uniforms = self.chopper_draws(st, block, rule, len(range(first, n, every)))
        if "_pending" not in st:
            st["_pending"] = np.zeros((block.tile.out_size, block.tile.in_size), np.int64)
            st["_queued"] = np.zeros(block.tile.in_size, np.bool_)
        none = np.zeros((0, 0), np.float32)
        fb = self.feedback(st, block, done)
        state = ChopperState(
            st["H"],
            st["c_in"],
            st["c_out"],
            st.get("M", none),
            st.get("Pref", none),
            st.get("switched", np.zeros(0, np.bool_)),
            np.zeros(6) if fb is None else fb,
            st["_pending"],
            st["_queued"],
        )
        res = chopped_transfer(
            block.tile,
            (self.fast, 0),
            x,
            d,
            float(eta) if np.isscalar(eta) else eta,
            rule,
            uniforms,
            state,
            (first, every),
            (st["col"], st["sweeps"]),
        )
        st["col"], st["sweeps"] = res.col, res.sweeps
        self.counts["update_pulses"] += res.update_pulses
        self.counts["transfer_pulses"] += res.transfer_pulses
        for key in ("transfers", "transferred_columns", "transfer_reads"):
            self.counts[key] += res.reads

    def feedback(self, st: dict, block: TileBlock, done: int) -> np.ndarray | None:
        """The fast-step feedback state of the kernel (AGAD only), for a batch after `done` rank-1 updates."""
        return None

    def chopper_draws(self, st: dict, block: TileBlock, rule: TransferRule, reads: int) -> np.ndarray:
        """The uniforms the chopper switches of `reads` column reads take, in order: one per read where they
        switch at random, out_size after the read of the last column where out_chop_prob > 0. They come from
        the tile's seed and the step number, so a resumed run draws the same switches."""
        t = block.tile
        wraps = int(np.count_nonzero((int(st["col"]) + np.arange(reads)) % t.in_size == t.in_size - 1))
        n = reads * int(rule.chop_random) + (wraps * t.out_size if rule.out_chop_prob > 0 else 0)
        if not n:  # regular switches draw nothing: no generator to seed
            return np.zeros(0)
        return seeds.generator(t.seed & 0x7FFFFFFF, seeds.CHOPPERS, self.steps).random(n)

    # -- the transfer of one column -----------------------------------------------------------------------
    def lr_scale(self, st: dict, block: TileBlock) -> float:
        """s: buffer increment per unit read of A (1/weight units)."""
        cfg = self.cfg
        lr_t = cfg.transfer_lr * (self.lr if cfg.scale_transfer_lr else 1.0) * (cfg.gamma if cfg.gamma > 0 else 1.0)
        dw_a = self.dw_fast(block)
        g = cfg.auto_granularity / (block.tile.in_size * abs(cfg.transfer_every)) if cfg.auto_granularity > 0 else 1.0
        bg = cfg.buffer_granularity * dw_a * g
        if cfg.correct_gradient_magnitudes:
            eta = st["eta"] if st["eta"] > 0 else 1.0
            return abs(lr_t) / eta / (bg * block.tile.granularity(0) / dw_a)
        return abs(lr_t) / bg

    def rule(self, st: dict, block: TileBlock) -> TransferRule:
        """Buffer, threshold and chopper settings of the transfers of this call: the input chopper of a column
        switches after its read at random (probability in_chop_prob) or regularly (in the last sweep of every
        max(ceil(1/in_chop_prob), 2) sweeps)."""
        cfg = self.cfg
        p = cfg.in_chop_prob
        period = max(math.ceil(1.0 / p), 2) if p > 0 and not cfg.in_chop_random else 0
        return TransferRule(
            scale=self.lr_scale(st, block),
            transfer_bl=int(cfg.transfer_bl),
            momentum=cfg.momentum,
            forget_buffer=cfg.forget_buffer,
            no_buffer=cfg.no_buffer,
            buffer_cap=0.0,
            chop_prob=p,
            chop_random=bool(p > 0 and cfg.in_chop_random),
            period=period,
            out_chop_prob=cfg.out_chop_prob,
            dynamic=False,
            beta=0.0,
            write_after=-1,
            step=float(cfg.step),
            correct_accumulation=False,
        )

    # -- costs ------------------------------------------------------------------------------------------
    def update_latency(self, lm: LatencyModel) -> float:
        """A pulsed update plus, per column read so far per step and tile, a read and a one-pulse write."""
        tiles = sum(len(layer.blocks) for layer in self.layers)
        reads = self.counts["transfer_reads"] / max(self.steps * tiles, 1)
        return lm.t_update + reads * (lm.t_mvm + lm.t_pulse + lm.t_pre)
