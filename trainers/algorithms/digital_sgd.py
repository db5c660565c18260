"""Digital SGD: the floating-point reference, torch.optim.SGD with the analog optimizers' cost API."""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from aimc.trainers.algorithms.base import AlgorithmConfig, algorithm_name
from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.layers import analog_layers


class DigitalSGDConfig(AlgorithmConfig):
    """Floating-point SGD on the digital model (the reference)."""

    algorithm: Literal["sgd"] = "sgd"
    lr: float = Field(0.1, gt=0, description="SGD learning rate")


class DigitalSGD(torch.optim.SGD):
    """torch.optim.SGD on all parameters of a digital model, with the costs()/latency_estimate() API of
    the analog optimizers (no chip: zero pulses, zero reads)."""

    config = DigitalSGDConfig
    algorithm = algorithm_name(DigitalSGDConfig)

    def __init__(self, model: nn.Module, cfg):
        if analog_layers(model):
            raise ValueError(
                "digital SGD trains a digital model; the model has analog layers "
                "(use trainers.to_digital(model) or an analog algorithm)"
            )
        super().__init__(model.parameters(), lr=float(cfg.lr))
        self.cfg = cfg
        self.steps = 0

    @torch.no_grad()
    def step(self, closure=None):
        out = super().step(closure)
        self.steps += 1
        return out

    def end_epoch(self, train_loss: float) -> None:
        """The analog optimizers' epoch hook; digital SGD has nothing to do."""

    def costs(self) -> dict:
        return {
            "steps": self.steps,
            "pulses": 0,
            "reads": 0,
            "transfers": 0,
            "weights": 0,
            "pulses_per_weight": 0.0,
            "update_pulses": 0,
            "transfer_pulses": 0,
            "setup_pulses": 0,
            "transferred_columns": 0,
            "transfer_reads": 0,
        }

    def latency_estimate(self, model: LatencyModel | None = None) -> dict:
        return {
            "algorithm": self.algorithm,
            "forward_ns": 0.0,
            "backward_ns": 0.0,
            "update_ns": 0.0,
            "step_ns": 0.0,
            "layers": {},
            "model": None,
        }

    def state_dict(self):
        sd = super().state_dict()
        sd["digital_steps"] = self.steps
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        self.steps = int(state_dict.pop("digital_steps", 0))
        super().load_state_dict(state_dict)
