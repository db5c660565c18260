"""Analog SGD [R1 Sec. 3, R2]: the gradient pulsed into the single array of each tile.

[R1] Wu et al., NeurIPS 2025, arXiv:2502.06309; [R2] Wu et al., NeurIPS 2024, arXiv:2406.12774.
"""

from __future__ import annotations

from typing import Literal

from aimc.trainers.algorithms.base import AlgorithmConfig, AnalogOptimizer


class AnalogSGDConfig(AlgorithmConfig):
    """Analog SGD: the gradient pulsed into the single array (R1 Sec. 3)."""

    algorithm: Literal["analog_sgd"] = "analog_sgd"


class AnalogSGD(AnalogOptimizer):
    """Analog SGD: W <- W - lr d^T x pulsed into the single array of each tile (R1 eq. 5 in expectation:
    W <- W + dW F(W) - |dW| G(W), dW = -lr grad)."""

    config = AnalogSGDConfig
    runs_on_gpu = True

    def update_block(self, li, bi, block, x, d):
        self.gradient_update(block, x, d, 0)
