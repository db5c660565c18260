"""TTv2 (Gokmen, Front. Artif. Intell. 2021; aihwkit's BufferedTransferCompound)."""

from __future__ import annotations

from aimc.trainers.algorithms.buffered_transfer import BufferedTransfer


class TTv2(BufferedTransfer):
    """TTv2: gradient at W (gain of P 0), P read column by column into H <- H + transfer_lr * read(P[:, j]);
    where |H| >= threshold * dw_min, n = floor(|H|/dw_min) pulses (at most the transfer BL) of sign(H) are
    fired into W and H -= n dw_min."""

    algorithm = "ttv2"
