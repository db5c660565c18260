"""The noise model and drift compensation of an inference tile config, from `aimc.devices.inference`
(docs/inference.md)."""

from __future__ import annotations

from typing import Any

import torch

from aimc.devices import inference
from aimc.trainers.inference_config import InferenceTileConfig


class ExactDevices:
    """A noise model without noise: programming writes the targets exactly and nothing drifts."""

    def apply_programming_noise(self, weights: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, list]:
        return weights.detach().clone(), []

    def apply_drift_noise(self, weights, drift_state, t_inference: float, generator) -> torch.Tensor:
        return weights.detach().clone()

    def apply_noise(self, weights: torch.Tensor, t_inference: float, generator: torch.Generator) -> torch.Tensor:
        return weights.detach().clone()


NOISE_MODELS: dict[str, Any] = {
    "pcm": inference.PCMLikeNoiseModel,
    "custom_drift_pcm": inference.CustomDriftPCMLikeNoiseModel,
    "state_independent": inference.StateIndependentNoiseModel,
    "reram_wan2022": inference.ReRamWan2022NoiseModel,
    "reram_cmo": inference.ReRamCMONoiseModel,
    "none": ExactDevices,
}
"""Noise models by their name in InferenceTileConfig.noise_model."""

COMPENSATIONS: dict[str, Any] = {
    "global": inference.GlobalDriftCompensation,
    "global_exact_reference": inference.GlobalDriftCompensationWithExactReference,
    "per_column": inference.PerColumnDriftCompensation,
}
"""Drift compensations by their name in InferenceTileConfig.drift_compensation ("none": no compensation)."""


def build_noise_model(cfg: InferenceTileConfig) -> Any:
    """The noise model of cfg.noise_model with cfg.noise_model_options as keyword arguments."""
    try:
        return NOISE_MODELS[cfg.noise_model](**cfg.noise_model_options)
    except (TypeError, ValueError) as err:
        raise ValueError(f"noise_model_options: {err}") from None


def build_compensation(cfg: InferenceTileConfig) -> Any:
    """The drift compensation of cfg.drift_compensation, or None."""
    kind = COMPENSATIONS.get(cfg.drift_compensation)
    return None if kind is None else kind()
