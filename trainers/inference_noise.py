"""The noise model and drift compensation of an inference tile config, from `aimc.devices.inference`."""

from __future__ import annotations

from typing import Any

import torch

from aimc.trainers.inference_config import InferenceTileConfig


class ExactDevices:
    """A noise model without noise: programming writes the targets exactly and nothing drifts."""

    def apply_programming_noise(self, weights: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, list]:
        return weights.detach().clone(), []

    def apply_drift_noise(self, weights, drift_state, t_inference: float, generator) -> torch.Tensor:
        return weights.detach().clone()

    def apply_noise(self, weights: torch.Tensor, t_inference: float, generator: torch.Generator) -> torch.Tensor:
        return weights.detach().clone()


def build_noise_model(cfg: InferenceTileConfig) -> Any:
    """The noise model of cfg.noise_model with cfg.noise_model_options as keyword arguments."""
    if cfg.noise_model == "none":
        return ExactDevices()
    from aimc.devices import inference

    try:
        return inference.PCMLikeNoiseModel(**cfg.noise_model_options)
    except TypeError as err:
        raise ValueError(f"noise_model_options: {err}") from None


def build_compensation(cfg: InferenceTileConfig) -> Any:
    """The drift compensation of cfg.drift_compensation, or None."""
    if cfg.drift_compensation == "none":
        return None
    from aimc.devices import inference

    if cfg.drift_compensation == "global":
        return inference.GlobalDriftCompensation()
    return inference.PerColumnDriftCompensation()
