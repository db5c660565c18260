"""RIDER and E-RIDER: residual learning with dynamic symmetric-point tracking (Xiao, Li, Wu, Gokmen, Chen,
"Dynamic Symmetric Point Tracking", arXiv:2602.21321, Algorithms 2 and 3).

Array 0 of a tile is the main array W, array 1 the residual array P; Q is a digital reference (per tile,
float32) and Q~ the reference P is read against (array 1's reference, the analog copy of Q). With the
chopper c = +-1 (always +1 for RIDER):

    mixed weight:  W_bar = W + gamma c (P - Q~)                       (the gradient is taken here)
    gradient:      P <- P - lr c d^T x                                (pulsed; the response applies)
    every transfer_every steps, columns J (cyclic, n_columns):
        v = read(P[:, J] - Q~[:, J])
        Q[:, J] <- Q[:, J] + tracking_rate (v + Q~[:, J] - Q[:, J])   (Q <- (1 - eta) Q + eta P)
        W[:, J] <- W[:, J] + transfer_lr c v                          (pulsed, one-hot inputs)
          or, with a threshold: H[:, J] += transfer_lr c v, whole pulses of dw_min where |H| >= threshold dw_min
    RIDER: Q~[:, J] <- Q[:, J] after each transfer;  E-RIDER: the chopper switches after a step with
    probability chop_prob (or every max(ceil(1/chop_prob), 2) steps), and at a switch Q~ <- Q.

P drifts toward its symmetric point (the -lr |g| G(P) part of its update) and Q, a low-pass filter of P,
follows it, so P needs no zero shift (Lemma 3.5, Theorem 3.7). How the paper's partly lost equations were
resolved (docs/trainers.md): Q is updated column by column at each read, not all at once per step; the
transfer moves c (P - Q~) (Eq. 18b; for RIDER Q~ = Q_k, Algorithm 2); E-RIDER's chopper is one sign per
tile, drawn per step.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from aimc.common import seeds
from aimc.trainers.algorithms.base import GAIN_MAX
from aimc.trainers.algorithms.transfer import TransferConfig, TransferOptimizer
from aimc.trainers.algorithms.transfer_parts import ReadSum, ReferenceTracking, ThresholdBuffer
from aimc.trainers.algorithms.zero_shift import ZERO_SHIFT_MODE, ZeroShiftMode


class RiderConfig(TransferConfig):
    """RIDER (arXiv:2602.21321, Algorithm 2): residual learning whose reference Q tracks the symmetric point of P
    on the fly: mixed weight W + gamma (P - Q), Q <- (1 - tracking_rate) Q + tracking_rate P per read column,
    W <- W + transfer_lr (P - Q); no zero shift needed."""

    algorithm: Literal["rider"] = "rider"
    gamma: float = Field(0.1, gt=0, le=GAIN_MAX, description="gain of P - Q in the mixed weight (at most 2^24)")
    tracking_rate: float = Field(
        0.1,
        gt=0,
        le=1,
        description="EMA rate eta of the digital reference Q, per read of a column (Q <- (1 - eta) Q + eta P)",
    )
    threshold: float | None = Field(
        None,
        gt=0,
        description="None: each read moves W by a pulsed update of "
        "transfer_lr c (P - Q~) (Eq. 11b / 18b); a number: the reads accumulate in a "
        "digital buffer H += transfer_lr c (P - Q~) that fires whole pulses into W "
        "where |H| >= threshold * dw_min (as TT-v2, and as the paper's aihwkit runs "
        "transfer through DynamicTransferCompound's buffer)",
    )
    zero_shift: bool = Field(False, description="zero-shift P before training as well (not needed by RIDER)")
    zero_shift_cycles: int | None = Field(None, ge=1, description="pulse pairs (or pulses) of that zero shift")
    zero_shift_mode: ZeroShiftMode = Field("cycles", description=ZERO_SHIFT_MODE)


class ERiderConfig(RiderConfig):
    """E-RIDER (arXiv:2602.21321, Algorithm 3): RIDER with a chopper c = +-1 per tile on the gradient of P and in the
    mixed weight W + gamma c (P - Q~); the analog reference Q~ is reprogrammed to Q at each chopper switch."""

    algorithm: Literal["e_rider"] = "e_rider"
    chop_prob: float = Field(
        0.05,
        gt=0,
        le=1,
        description="chopper switching per step: probability "
        "(chop_random) or 1 / period in steps, period max(ceil(1 / chop_prob), 2)",
    )
    chop_random: bool = Field(True, description="switch at random (Eq. 17 of arXiv:2602.21321) or regularly")


def rider_parts(cfg: RiderConfig, every_read: bool) -> dict:
    """The transfer parts of RIDER and E-RIDER: the mixed weight's gain gamma, the tracked reference, and with
    a threshold the buffer H += transfer_lr c (P - Q~)."""
    parts = dict(fast_gain=cfg.gamma, reference=ReferenceTracking(cfg.tracking_rate, every_read))
    if cfg.threshold is not None:
        parts.update(buffer=ThresholdBuffer(cfg.threshold), fold=ReadSum(cfg.transfer_lr))
    return parts


class Rider(TransferOptimizer):
    """RIDER. Tile state: Q (the digital reference), c (the chopper sign, +1) and, with a threshold, the buffer
    H. Costs add reference_writes, the elements of Q~ programmed."""

    config = RiderConfig

    def __init__(self, model, cfg: RiderConfig):
        super().__init__(model, cfg, **rider_parts(cfg, every_read=True))


class ERider(TransferOptimizer):
    """E-RIDER: RIDER with a chopper per tile; Q~ reprogrammed to Q at each switch."""

    config = ERiderConfig

    def __init__(self, model, cfg: ERiderConfig):
        super().__init__(model, cfg, **rider_parts(cfg, every_read=False))

    def after_step(self):
        super().after_step()
        p = self.cfg.chop_prob
        tiles = [(b, st) for layer, sts in zip(self.layers, self.tile_state) for b, st in zip(layer.blocks, sts)]
        if self.cfg.chop_random:
            flips = seeds.generator(seeds.E_RIDER_CHOPPER, self.layers[0].seed, self.steps).random(len(tiles)) < p
        else:
            flips = np.full(len(tiles), self.steps % max(math.ceil(1.0 / p), 2) == 0)
        for (b, st), flip in zip(tiles, flips):
            if flip:
                self.counts["reference_writes"] += self.reference.switch(b.tile, st, float(self.cfg.gamma))
