"""RIDER and E-RIDER: residual learning with dynamic symmetric-point tracking (Xiao, Li, Wu, Gokmen, Chen,
"Dynamic Symmetric Point Tracking", arXiv:2602.21321, Algorithms 2 and 3).

Array 0 of a tile is the main array W, array 1 the residual array P; Q is a digital reference (per tile,
float32) and Q~ the reference P is read against (array 1's `reference`, the analog copy of Q). With the
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

import numpy as np

from aimc.trainers.algorithms.buffered_transfer import BufferedTransfer


class Rider(BufferedTransfer):
    """RIDER. Tile state: Q (the digital reference), c (the chopper sign) and, with a threshold, the buffer H.
    Costs add reference_writes, the elements of Q~ programmed."""

    algorithm = "rider"

    def gains(self):
        return [1.0, float(self.cfg.gamma)]

    def init_block(self, li, bi, block, fresh):
        super().init_block(li, bi, block, fresh)  # the optional zero shift: Q~ = the estimate of the SP
        self.counts.setdefault("reference_writes", 0)
        self.tile_state[li][bi].update(Q=block.tile.arrays[1].reference.copy(), c=1.0)

    def update_block(self, li, bi, block, x, d):
        c = float(self.tile_state[li][bi]["c"])
        self.gradient_update(block, x, d if c > 0 else -d, 1, self.fast_lr)

    def transfer_columns(self, block, st, src, dst, cols):
        ref = block.tile.arrays[1].reference
        q = st["Q"]
        v = self.read_columns(block, 1, cols)  # (n, out): P - Q~
        q[:, cols] += np.float32(self.cfg.tracking_rate) * (v.T + ref[:, cols] - q[:, cols])  # eta (P - Q_k)
        signal = np.float32(st["c"]) * v
        if self.cfg.threshold is None:
            self.transfer_update(block, 0, cols, signal, self.cfg.transfer_lr)
        else:
            h = self.buffer(st, block)
            self.accumulate(h, cols, signal)
            self.fire(block, st, h, cols)
        self.track(block, st, cols)

    def track(self, block, st, cols) -> None:
        """RIDER: the read reference follows Q at once."""
        block.tile.arrays[1].reference[:, cols] = st["Q"][:, cols]
        block.tile.invalidate(layout=True)
        self.counts["reference_writes"] += block.tile.out_size * len(cols)


class ERider(Rider):
    """E-RIDER: RIDER with a chopper per tile; Q~ reprogrammed to Q at each switch."""

    algorithm = "e_rider"

    def track(self, block, st, cols):
        """E-RIDER: Q~ changes only at a chopper switch."""

    def after_step(self):
        super().after_step()
        p = self.cfg.chop_prob
        tiles = [(b, st) for layer, sts in zip(self.layers, self.tile_state) for b, st in zip(layer.blocks, sts)]
        if self.cfg.chop_random:
            flips = np.random.default_rng([0xE41D, self.layers[0].seed, self.steps]).random(len(tiles)) < p
        else:
            flips = np.full(len(tiles), self.steps % max(math.ceil(1.0 / p), 2) == 0)
        for (b, st), flip in zip(tiles, flips):
            if flip:
                st["c"] = -float(st["c"])
                b.tile.arrays[1].reference[...] = st["Q"]
                b.tile.set_stack([1.0, float(self.cfg.gamma) * st["c"]])
                self.counts["reference_writes"] += st["Q"].size
