"""The registry of the training algorithms: one list of optimizer classes, from which come the algorithm
names, the config union an experiment's `trainer` takes, and `build_optimizer`.

Each optimizer class carries its config class (`config`), whose `algorithm` Literal is the algorithm's
name. A new algorithm is its module (config and optimizer) and one entry in `OPTIMIZER_CLASSES`.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, TypeAdapter, ValidationError
from torch import nn

from aimc.common.errors import ConfigError
from aimc.common.validation import format_validation_error
from aimc.trainers.algorithms.agad import AGAD
from aimc.trainers.algorithms.analog_sgd import AnalogSGD
from aimc.trainers.algorithms.base import algorithm_name
from aimc.trainers.algorithms.c_ttv2 import CTTv2
from aimc.trainers.algorithms.digital_sgd import DigitalSGD
from aimc.trainers.algorithms.mixed_precision import MixedPrecision
from aimc.trainers.algorithms.multi_tile import MultiTile
from aimc.trainers.algorithms.residual import Residual, ResidualV2
from aimc.trainers.algorithms.rider import ERider, Rider
from aimc.trainers.algorithms.tiki_taka import TikiTaka
from aimc.trainers.algorithms.ttv2 import TTv2

OPTIMIZER_CLASSES: tuple[type, ...] = (
    DigitalSGD,
    AnalogSGD,
    TikiTaka,
    TTv2,
    Residual,
    ResidualV2,
    MultiTile,
    MixedPrecision,
    CTTv2,
    AGAD,
    Rider,
    ERider,
)
"""Every algorithm's optimizer, in the order the algorithms are listed."""

OPTIMIZERS: dict[str, type] = {algorithm_name(cls.config): cls for cls in OPTIMIZER_CLASSES}
"""Optimizer class by algorithm name."""

ALGORITHMS: tuple[str, ...] = tuple(OPTIMIZERS)
"""The algorithm names, the tags of `TrainerConfig`."""

TrainerConfig = Annotated[Union[tuple(cls.config for cls in OPTIMIZER_CLASSES)], Field(discriminator="algorithm")]
"""Any algorithm's config, told apart by its `algorithm` field (an experiment's `trainer`)."""

_ADAPTER = TypeAdapter(dict[Literal["trainer"], TrainerConfig])
"""Validates `{"trainer": config}`, so that an error's path reads as in an experiment config."""


def build_optimizer(model: nn.Module, trainer_cfg: TrainerConfig | dict | str):
    """The optimizer of `trainer_cfg` for `model`: a TrainerConfig model, a dict with `algorithm` and the
    fields it changes, or an algorithm name (all its defaults). A bad config is a ConfigError with one line
    per field, named as in an experiment config (`trainer.gamma: ...`).

    Analog algorithms set the array stack of each analog tile (1 array for Analog SGD, 2 for Tiki-Taka
    and residual learning, n_tiles for multi-tile) and prepare it (zero shift) the first time."""
    if isinstance(trainer_cfg, str):
        trainer_cfg = {"algorithm": trainer_cfg}
    if isinstance(trainer_cfg, dict):
        try:
            trainer_cfg = _ADAPTER.validate_python({"trainer": trainer_cfg})["trainer"]
        except ValidationError as err:
            raise ConfigError(format_validation_error(err, hidden=ALGORITHMS)) from None
    cls = OPTIMIZERS.get(getattr(trainer_cfg, "algorithm", None))
    if cls is None or not isinstance(trainer_cfg, cls.config):
        raise TypeError(
            "build_optimizer: `trainer_cfg` must be an algorithm's config, a dict with `algorithm` or an "
            f"algorithm name (one of {', '.join(ALGORITHMS)}); got {type(trainer_cfg).__name__}"
        )
    return cls(model, trainer_cfg)
