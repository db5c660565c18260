"""Configs of the trainer layer: how layers map onto tiles, and which training algorithm runs.

Rates are unambiguous: `lr` is always the step of the gradient update in weight units per unit gradient
(W <- W - lr * grad, for the array that takes the gradient), `transfer_lr` the step of a transfer
(W <- W + transfer_lr * read(P)), both independent of any other rate.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, ValidationError, field_validator

from aimc.common.errors import ConfigError
from aimc.common.validation import Float32Config, format_validation_error
from aimc.devices import DEVICE_KINDS, DeviceConfig, PeripheryConfig, UpdateConfig, load_device


class TileConfig(Float32Config):
    """How a torch layer becomes analog tiles."""

    device: Union[str, DeviceConfig] = Field("r1_power_1", description="device preset name, device file path, "
                                                                     "or an inline device table with `kind`")
    forward: PeripheryConfig = Field(default_factory=PeripheryConfig, description="read periphery, forward")
    backward: PeripheryConfig = Field(default_factory=PeripheryConfig, description="read periphery, backward")
    update: UpdateConfig = Field(default_factory=UpdateConfig, description="pulsed or expected update")
    max_in: int = Field(512, ge=1, description="largest tile input size; larger layers are split")
    max_out: int = Field(512, ge=1, description="largest tile output size; larger layers are split")
    bias: Literal["digital", "analog"] = Field("digital", description="bias kept digital or as an analog column")
    out_scale: Union[bool, Literal["column"]] = Field(
        False, description="learnable digital output scale: true, one per layer (aihwkit's learn_out_scaling); "
                           "\"column\", one per output (aihwkit's out_scaling_columnwise); false, none")

    def __init__(self, **data):
        """A problem is a ConfigError with one line per field, named as in an experiment config (`tile.device:
        unknown device ...`), the same message from Python as from `aimc train`."""
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise ConfigError(format_validation_error(err, "tile", hidden=DEVICE_KINDS)) from None

    @field_validator("device")
    @classmethod
    def _known_device(cls, device: Union[str, DeviceConfig]) -> Union[str, DeviceConfig]:
        """A preset name or device file is checked now, not when a layer is built (the name is kept)."""
        if isinstance(device, str):
            try:
                load_device(device)
            except ConfigError as err:
                raise ValueError(str(err)) from None
        return device

    def resolved_device(self) -> DeviceConfig:
        return load_device(self.device)


class _Trainer(Float32Config):
    lr: float = Field(0.05, gt=0, description="gradient step (weight units per unit gradient)")


class DigitalSGDConfig(_Trainer):
    """Floating-point SGD on the digital model (the reference)."""

    algorithm: Literal["sgd"] = "sgd"
    lr: float = Field(0.1, gt=0, description="SGD learning rate")


class AnalogSGDConfig(_Trainer):
    """Analog SGD: the gradient pulsed into the single array (R1 Sec. 3)."""

    algorithm: Literal["analog_sgd"] = "analog_sgd"


class _Transfer(_Trainer):
    transfer_lr: float = Field(0.01, gt=0, description="transfer step beta (weight units per unit read)")
    transfer_every: int = Field(1, ge=1, description="steps between two transfers (k)")
    n_columns: int = Field(1, ge=1, description="columns of P read and transferred per transfer (n)")
    transfer_bl: int | None = Field(None, ge=1, le=32, description="longest pulse train of a transfer (most "
                                    "pulses per element and transfer); None: the tile's update BL. aihwkit gives "
                                    "transfers their own update settings (BL 31 by default)")


class TikiTakaConfig(_Transfer):
    """Tiki-Taka v1 (R2): gradient into P, periodic column-wise transfer of P into W; forward uses W only."""

    algorithm: Literal["tiki_taka"] = "tiki_taka"


class TTv2Config(_Transfer):
    """TTv2 (Gokmen 2021): digital buffer H accumulates reads of P; one pulse into W where |H| >= threshold."""

    algorithm: Literal["ttv2"] = "ttv2"
    threshold: float = Field(1.0, gt=0, description="transfer threshold in units of dw_min")


class ResidualConfig(_Transfer):
    """Residual learning (R1 Sec. 4): mixed weight W + gamma P, gradient at the mixed weight, zero-shifted P."""

    algorithm: Literal["residual"] = "residual"
    gamma: float = Field(0.5, gt=0, description="gain of the residual array P in the mixed weight")
    zero_shift: bool = Field(True, description="zero-shift P to its symmetric point before training")
    zero_shift_cycles: int | None = Field(None, ge=1, description="up/down pulse pairs of the zero shift; None: "
                                                               "the device's number of states (slow on big layers)")


class ResidualV2Config(ResidualConfig):
    """Residual learning v2 (R1 Sec. 5): EMA buffer H of P's reads, one-pulse threshold transfer into W."""

    algorithm: Literal["residual_v2"] = "residual_v2"
    buffer_beta: float = Field(0.1, gt=0, le=1, description="EMA rate of the buffer H <- (1-b) H + b read(P)")
    threshold: float = Field(1.0, gt=0, description="transfer threshold in units of dw_min")


class MultiTileConfig(_Transfer):
    """Multi-tile residual learning (R3): N+1 arrays, W_bar = sum_n gamma^n W(n), transfer every T_n."""

    algorithm: Literal["multi_tile"] = "multi_tile"
    n_tiles: int = Field(4, ge=2, le=10, description="number of arrays N + 1")
    gamma: float = Field(0.5, gt=0, lt=1, description="geometric gain between consecutive arrays")
    zero_shift: bool = Field(True, description="zero-shift the fast arrays before training")
    zero_shift_cycles: int | None = Field(None, ge=1, description="up/down pulse pairs of the zero shift; None: "
                                                               "the device's number of states (slow on big layers)")


class MixedPrecisionConfig(_Trainer):
    """Mixed precision: digital gradient accumulator; whole pulses fired where it reaches dw_min (R3 baseline)."""

    algorithm: Literal["mixed_precision"] = "mixed_precision"
    threshold: float = Field(1.0, gt=0, description="pulse threshold in units of dw_min")


TrainerConfig = Annotated[
    Union[DigitalSGDConfig, AnalogSGDConfig, TikiTakaConfig, TTv2Config, ResidualConfig, ResidualV2Config,
          MultiTileConfig, MixedPrecisionConfig],
    Field(discriminator="algorithm"),
]
ALGORITHMS = ("sgd", "analog_sgd", "tiki_taka", "ttv2", "residual", "residual_v2", "multi_tile",
              "mixed_precision")
