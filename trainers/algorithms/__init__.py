"""The training algorithms: one optimizer class per `trainers.config` algorithm, and `build_optimizer`."""

from __future__ import annotations

from pydantic import TypeAdapter
from torch import nn

from aimc.trainers.algorithms.agad import AGAD
from aimc.trainers.algorithms.analog_sgd import AnalogSGD
from aimc.trainers.algorithms.base import AnalogOptimizer
from aimc.trainers.algorithms.c_ttv2 import CTTv2
from aimc.trainers.algorithms.digital_sgd import DigitalSGD
from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.algorithms.mixed_precision import MixedPrecision
from aimc.trainers.algorithms.multi_tile import MultiTile
from aimc.trainers.algorithms.residual import Residual, ResidualV2
from aimc.trainers.algorithms.rider import ERider, Rider
from aimc.trainers.algorithms.tiki_taka import TikiTaka
from aimc.trainers.algorithms.ttv2 import TTv2
from aimc.trainers.config import TrainerConfig

OPTIMIZERS: dict[str, type] = {"sgd": DigitalSGD, "analog_sgd": AnalogSGD, "tiki_taka": TikiTaka, "ttv2": TTv2,
                               "residual": Residual, "residual_v2": ResidualV2, "multi_tile": MultiTile,
                               "mixed_precision": MixedPrecision, "c_ttv2": CTTv2,
                               "agad": AGAD, "rider": Rider, "e_rider": ERider}

_ADAPTER = TypeAdapter(TrainerConfig)


def build_optimizer(model: nn.Module, trainer_cfg):
    """The optimizer of `trainer_cfg` (a TrainerConfig model or a dict with `algorithm`) for `model`.

    Analog algorithms set the array stack of each analog tile (1 array for Analog SGD, 2 for Tiki-Taka
    and residual learning, n_tiles for multi-tile) and prepare it (zero shift) the first time."""
    cfg = _ADAPTER.validate_python(trainer_cfg) if isinstance(trainer_cfg, dict) else trainer_cfg
    try:
        cls = OPTIMIZERS[cfg.algorithm]
    except KeyError:
        raise ValueError(f"unknown algorithm {cfg.algorithm!r}; known: {sorted(OPTIMIZERS)}") from None
    return cls(model, cfg)


__all__ = ["AnalogOptimizer", "AnalogSGD", "DigitalSGD", "LatencyModel", "OPTIMIZERS", "build_optimizer"]
