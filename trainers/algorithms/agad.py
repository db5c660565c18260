"""AGAD: aihwkit 1.1.0's DynamicTransferCompound, c-TTv2 with a dynamic reference.

Rasch, Carta, Fagbohungbe, Gokmen, Nat. Commun. 15:7133 (2024), arXiv:2303.04721 (Eq. 12-13); the order of
operations and the defaults are aihwkit 1.1.0's. The fast update is c-TTv2's (trainers/algorithms/c_ttv2.py).
A column read v of A enters the buffer relative to a reference: with N_s = max(ceil(1/in_chop_prob), 2)
and beta = min(tail_weightening / N_s, 1),

    if column k's chopper switched after its previous read:  Pref[:, k] <- M[:, k]
    H[:, k] += c_in[k] c_out s (v - Pref[:, k]);   M[:, k] <- (1 - beta) M[:, k] + beta v

so the buffer sees how A moved since the end of the previous chopper phase, whatever A's offset. The
choppers switch regularly, in the last sweep of every N_s sweeps (and, with in_chop_random, also at random
with probability in_chop_prob per read). No pulses go into C during the first N_s + 1 sweeps (the buffer is
filled and thresholded as usual). With experimental_correct_accumulation, s is divided by min(c, 1 / dw_A),
c = sweeps mod N_s + 1 the reads of the column in the current chopper phase (exact for regular switching).
With experimental_fast_lr_feedback (C++-only in aihwkit 1.1.0), every fast step is multiplied by a scale
that, once per period of n_in |transfer_every| N_s experimental_feedback_mod updates, is multiplied by
target / (the largest change of Pref at the latches since), so that the reference moves by about the target
(a fraction experimental_feedback_target of the fast device's half range) per chopper phase.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from aimc.trainers.algorithms.c_ttv2 import CTTv2, CTTv2Config


class AGADConfig(CTTv2Config):
    """AGAD (aihwkit 1.1.0 DynamicTransferCompound; Rasch et al. 2024): c-TTv2 whose reads are taken relative to
    a reference latched from the running mean of the reads at each chopper switch; no writes into C during the
    first chopper period. Defaults are aihwkit's `build_config("agad")`."""

    algorithm: Literal["agad"] = "agad"
    in_chop_prob: float = Field(
        0.1,
        gt=0,
        le=1,
        description="1 / chopper period: the input choppers switch "
        "every N_s = max(ceil(1 / in_chop_prob), 2) sweeps (and at random with this "
        "probability per read when in_chop_random)",
    )
    in_chop_random: bool = Field(False, description="also switch at random with probability in_chop_prob per read")
    tail_weightening: float = Field(5.0, gt=0, description="running mean rate beta = min(tail_weightening / N_s, 1)")
    buffer_cap: float = Field(0.0, ge=0, description="if > 0 (and not forget_buffer), |H| <= buffer_cap * transfer_bl")
    experimental_correct_accumulation: bool = Field(
        False,
        description="divide the buffer increment by the reads "
        "of the column in the current chopper phase so far, at most "
        "1 / dw_A (exact with regular switching)",
    )
    experimental_fast_lr_feedback: bool = Field(
        False,
        description="rescale the fast step once per "
        "experimental_feedback_mod chopper periods (n_in |transfer_every| "
        "N_s updates) by target / (largest change of the reference at its "
        "latches since): aihwkit 1.1.0's C++-only option",
    )
    experimental_feedback_target: float = Field(
        0.1,
        gt=0,
        description="feedback target as a fraction of the fast "
        "device's w_max - dw_A, w_max = n_states dw_A / 2 (clipped to "
        "[dw_A, w_max])",
    )
    experimental_feedback_mod: int = Field(1, ge=1, description="chopper periods between two feedback steps")


class AGAD(CTTv2):
    """AGAD. Tile state adds M (running mean of the reads), Pref (the reference) and switched (per column,
    its chopper switched since its last read)."""

    config = AGADConfig

    def init_extra(self, st, block):
        shape = (block.tile.out_size, block.tile.in_size)
        st.update(
            M=np.zeros(shape, np.float32),
            Pref=np.zeros(shape, np.float32),
            switched=np.zeros(block.tile.in_size, np.bool_),
        )
        if self.cfg.experimental_fast_lr_feedback:
            st["fb"] = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # scale, estimate, previous t; set per call

    def fast_steps(self, st, block, x, d):
        """c-TTv2's fast steps; with the feedback one per vector (the kernel scales each), and the step kept for
        correct_gradient_magnitudes times the current scale."""
        eta = super().fast_steps(st, block, x, d)
        if "fb" not in st:
            return eta
        st["eta"] *= float(st["fb"][0])
        return np.full(len(x), eta) if np.isscalar(eta) else eta

    def feedback(self, st, block, done):
        """[scale, estimate, previous t, target, period, done]: target = min(max((w_max - dw_A)
        experimental_feedback_target, dw_A), w_max), w_max = n_states dw_A / 2 of the fast device; period =
        n_in |transfer_every| N_s experimental_feedback_mod rank-1 updates (aihwkit 1.1.0)."""
        fb = st.get("fb")
        if fb is None:
            return None
        n_states, dw = self.fast_states(block)
        w_max = n_states * dw / 2.0
        cfg = self.cfg
        fb[3] = min(max((w_max - dw) * cfg.experimental_feedback_target, dw), w_max)
        fb[4] = block.tile.in_size * abs(cfg.transfer_every) * self.n_s * cfg.experimental_feedback_mod
        fb[5] = done
        return fb

    @property
    def n_s(self) -> int:
        """Sweeps per chopper phase."""
        return max(math.ceil(1.0 / self.cfg.in_chop_prob), 2)

    def rule(self, st, block):
        cfg = self.cfg
        return (
            super()
            .rule(st, block)
            ._replace(
                buffer_cap=cfg.buffer_cap,
                chop_random=cfg.in_chop_random,
                period=self.n_s,
                dynamic=True,
                beta=min(cfg.tail_weightening / self.n_s, 1.0),
                write_after=self.n_s,
                correct_accumulation=bool(cfg.experimental_correct_accumulation),
                fast_lr_feedback=bool(cfg.experimental_fast_lr_feedback),
            )
        )
