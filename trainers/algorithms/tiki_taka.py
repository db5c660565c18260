"""Tiki-Taka v1 [R2] (aihwkit's TransferCompound).

[R2] Wu et al., NeurIPS 2024, arXiv:2406.12774.
"""

from __future__ import annotations

from aimc.trainers.algorithms.transfer import TransferOptimizer


class TikiTaka(TransferOptimizer):
    """Tiki-Taka v1: the forward gain of P is 0, so the forward pass and the gradient use W only; the
    gradient goes into P, columns of P into W every transfer_every steps; P is not zero-shifted."""

    algorithm = "tiki_taka"
