"""Multi-tile residual learning [R3], with R3's optional warm start (Algorithm 1, lines 1-18).

[R3] Li et al., arXiv:2510.02516.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import Field

from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.algorithms.transfer import TransferConfig, TransferOptimizer
from aimc.trainers.algorithms.zero_shift import ZERO_SHIFT_MODE, ZeroShiftMode

LOG = logging.getLogger("aimc.trainers")

AGGRESSIVE_SWITCHES = 4  # R3 Algorithm 1, LossPlateau: switches 1-4 when the epoch loss rose once
WINDOW = 5  # later switches: at least RISES_IN_WINDOW rises among the last WINDOW epoch-to-epoch changes
RISES_IN_WINDOW = 2


class MultiTileConfig(TransferConfig):
    """Multi-tile residual learning (R3): N+1 arrays, W_bar = sum_n gamma^n W(n), transfer every T_n."""

    algorithm: Literal["multi_tile"] = "multi_tile"
    n_tiles: int = Field(4, ge=2, le=10, description="number of arrays N + 1")
    gamma: float = Field(0.5, gt=0, lt=1, description="geometric gain between consecutive arrays")
    period_ratio: float | None = Field(
        None,
        ge=1,
        description="ratio of the transfer periods of consecutive "
        "arrays: T_n = transfer_every * round(period_ratio^(N - n)); None: 1/gamma "
        "(R3 Appendix K's MNIST runs: 5)",
    )
    transfer_lr_growth: float = Field(
        1.0,
        gt=0,
        description="the transfer out of array N - k has the rate "
        "transfer_lr * transfer_lr_growth^k (k = 0 the fastest; R3 Appendix K: 1.2)",
    )
    zero_shift: bool = Field(True, description="zero-shift the fast arrays before training")
    zero_shift_cycles: int | None = Field(
        None,
        ge=1,
        description="up/down pulse pairs of the zero shift; None: the device's number of states (slow on big layers)",
    )
    zero_shift_mode: ZeroShiftMode = Field("cycles", description=ZERO_SHIFT_MODE)
    warm_start: bool = Field(
        False,
        description="R3 Algorithm 1's warm start: the fastest array is transferred "
        "into one array at a time, the slowest first, moving on when the epoch training loss "
        "plateaus; the cascade starts after the last switch",
    )


def loss_plateau(losses: list[float], switches: int) -> bool:
    """R3 Algorithm 1's LossPlateau on the epoch training losses so far: before the fifth switch, the last
    loss above the one before it; afterwards, at least 2 rises among the last 5 epoch-to-epoch changes."""
    if switches < AGGRESSIVE_SWITCHES:
        return len(losses) >= 2 and losses[-1] > losses[-2]
    if len(losses) < WINDOW + 1:
        return False
    last = losses[-(WINDOW + 1) :]
    return sum(b > a for a, b in zip(last[:-1], last[1:])) >= RISES_IN_WINDOW


class MultiTile(TransferOptimizer):
    """Multi-tile residual learning: arrays 0..N with gains gamma^n (W_bar = sum_n gamma^n W_n); the
    gradient goes into the fastest array N; array n is transferred into n - 1 (columns, noisy read,
    transfer_lr * transfer_lr_growth^(N - n)) every T_n = transfer_every * round(r^(N - n)) steps, r =
    period_ratio or 1/gamma, so slower arrays receive transfers geometrically less often (R3 Appendix K:
    r = 5, growth 1.2). Arrays 1..N are zero-shifted when cfg.zero_shift.

    With cfg.warm_start (R3 Algorithm 1, lines 1-18): array N is transferred into one array k at a time, every
    T_N steps at transfer_lr, k = 0 first; k moves to the next array when the epoch training loss plateaus
    (`loss_plateau`, checked by `end_epoch`), and once k reaches N the cascade above runs."""

    config = MultiTileConfig

    def __init__(self, model, cfg):
        self.warm_array = 0 if cfg.warm_start else cfg.n_tiles - 1  # k; N (= fast): warm start over
        self.epoch_losses: list[float] = []
        super().__init__(model, cfg)

    @property
    def fast(self):
        return self.cfg.n_tiles - 1

    def gains(self):
        return [float(self.cfg.gamma) ** n for n in range(self.cfg.n_tiles)]

    def periods(self) -> list[int]:
        """T_n for n = 1..N (index n - 1): steps between two transfers of array n into n - 1."""
        big_n = self.cfg.n_tiles - 1
        r = self.cfg.period_ratio
        return [
            self.cfg.transfer_every
            * max(1, int(round(self.cfg.gamma ** -(big_n - n) if r is None else r ** (big_n - n))))
            for n in range(1, big_n + 1)
        ]

    def transfer_rate(self, src: int) -> float:
        """The step of a transfer out of array `src`: transfer_lr * transfer_lr_growth^(N - src)."""
        return self.cfg.transfer_lr * self.cfg.transfer_lr_growth ** (self.fast - src)

    def after_step(self):
        periods = self.periods()
        if self.warm_array < self.fast:  # warm start: the fastest array into array k alone
            if self.steps % periods[-1] == 0:
                self.transfer(f"col{self.fast}", self.fast, self.warm_array)
            return
        for n in range(self.cfg.n_tiles - 1, 0, -1):  # fastest first
            if self.steps % periods[n - 1] == 0:
                self.transfer(f"col{n}", n, n - 1)

    def end_epoch(self, train_loss: float) -> None:
        """During the warm start: record the epoch's mean training loss and move k to the next array on a
        plateau (one log line per switch)."""
        if self.warm_array >= self.fast:
            return
        self.epoch_losses.append(float(train_loss))
        if loss_plateau(self.epoch_losses, self.warm_array):
            self.warm_array += 1
            what = (
                f"transfers now go into array {self.warm_array}"
                if self.warm_array < self.fast
                else "the warm start is over; every array now transfers into the next slower one"
            )
            LOG.warning(
                "multi_tile warm start: the training loss plateaued after epoch %d (%s); %s",
                len(self.epoch_losses),
                " -> ".join(f"{v:.4f}" for v in self.epoch_losses[-2:]),
                what,
            )

    def costs(self) -> dict:
        """The transfer costs, and with warm_start `warm_start_array`: the array the fastest one is
        transferred into (n_tiles - 1 once the warm start is over)."""
        out = super().costs()
        if self.cfg.warm_start:
            out["warm_start_array"] = self.warm_array
        return out

    def update_latency(self, lm: LatencyModel) -> float:
        per_transfer = self.cfg.n_columns * (lm.t_mvm + lm.t_update)
        if self.warm_array < self.fast:
            return lm.t_update + per_transfer / self.periods()[-1]
        return lm.t_update + sum(per_transfer / t for t in self.periods())

    def state_dict(self) -> dict:
        sd = super().state_dict()
        sd["analog"]["warm_start"] = {"warm_array": self.warm_array, "epoch_losses": list(self.epoch_losses)}
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        warm = (state_dict.get("analog") or {}).get("warm_start")
        super().load_state_dict(state_dict)
        if warm is not None:
            self.warm_array = int(warm["warm_array"])
            self.epoch_losses = [float(v) for v in warm["epoch_losses"]]
