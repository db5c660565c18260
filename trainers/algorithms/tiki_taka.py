"""Tiki-Taka v1 [R2] (aihwkit's TransferCompound).

[R2] Wu et al., NeurIPS 2024, arXiv:2406.12774.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aimc.trainers.algorithms.transfer import WITH_RESET_PROB, TransferConfig, TransferOptimizer


class TikiTakaConfig(TransferConfig):
    """Tiki-Taka v1 (R2): gradient into P, periodic column-wise transfer of P into W; forward uses W only."""

    algorithm: Literal["tiki_taka"] = "tiki_taka"
    with_reset_prob: float = Field(0.0, ge=0, le=1, description=WITH_RESET_PROB)


class TikiTaka(TransferOptimizer):
    """Tiki-Taka v1: the forward gain of P is 0, so the forward pass and the gradient use W only; the
    gradient goes into P, columns of P into W every transfer_every steps; P is not zero-shifted."""

    config = TikiTakaConfig
