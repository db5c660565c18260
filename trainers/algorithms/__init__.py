"""The training algorithms: one module per algorithm with its config and optimizer, the registry of them
(`OPTIMIZERS`, `ALGORITHMS`, `TrainerConfig`) and `build_optimizer`."""

from __future__ import annotations

from aimc.trainers.algorithms.agad import AGAD, AGADConfig
from aimc.trainers.algorithms.analog_sgd import AnalogSGD, AnalogSGDConfig
from aimc.trainers.algorithms.base import AlgorithmConfig, AnalogOptimizer
from aimc.trainers.algorithms.c_ttv2 import CTTv2, CTTv2Config
from aimc.trainers.algorithms.digital_sgd import DigitalSGD, DigitalSGDConfig
from aimc.trainers.algorithms.latency import LatencyModel
from aimc.trainers.algorithms.mixed_precision import MixedPrecision, MixedPrecisionConfig
from aimc.trainers.algorithms.multi_tile import MultiTile, MultiTileConfig
from aimc.trainers.algorithms.registry import ALGORITHMS, OPTIMIZER_CLASSES, OPTIMIZERS, TrainerConfig, build_optimizer
from aimc.trainers.algorithms.residual import Residual, ResidualConfig, ResidualV2, ResidualV2Config
from aimc.trainers.algorithms.rider import ERider, ERiderConfig, Rider, RiderConfig
from aimc.trainers.algorithms.tiki_taka import TikiTaka, TikiTakaConfig
from aimc.trainers.algorithms.transfer import TransferConfig, TransferOptimizer
from aimc.trainers.algorithms.ttv2 import TTv2, TTv2Config

__all__ = [
    "AGAD",
    "AGADConfig",
    "ALGORITHMS",
    "AlgorithmConfig",
    "AnalogOptimizer",
    "AnalogSGD",
    "AnalogSGDConfig",
    "CTTv2",
    "CTTv2Config",
    "DigitalSGD",
    "DigitalSGDConfig",
    "ERider",
    "ERiderConfig",
    "LatencyModel",
    "MixedPrecision",
    "MixedPrecisionConfig",
    "MultiTile",
    "MultiTileConfig",
    "OPTIMIZERS",
    "OPTIMIZER_CLASSES",
    "Residual",
    "ResidualConfig",
    "ResidualV2",
    "ResidualV2Config",
    "Rider",
    "RiderConfig",
    "TTv2",
    "TTv2Config",
    "TikiTaka",
    "TikiTakaConfig",
    "TrainerConfig",
    "TransferConfig",
    "TransferOptimizer",
    "build_optimizer",
]
