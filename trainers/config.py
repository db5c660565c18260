"""The tile config of the trainer layer: how a torch layer becomes analog tiles.

Each training algorithm's config sits beside its optimizer (trainers/algorithms/<algorithm>.py);
trainers/algorithms/registry.py joins them into `TrainerConfig`.
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, ValidationError, field_validator

from aimc.common.errors import ConfigError
from aimc.common.validation import Float32Config, format_validation_error
from aimc.devices import DEVICE_TAGS, DeviceConfig, PeripheryConfig, UpdateConfig, expand_preset_table, load_device


class TileConfig(Float32Config):
    """How a torch layer becomes analog tiles."""

    device: Union[str, DeviceConfig] = Field(
        "r1_power_1",
        description="device preset name, device file path, "
        "or an inline device table with `kind`, or with "
        "`preset` and the fields it changes",
    )
    forward: PeripheryConfig = Field(default_factory=PeripheryConfig, description="read periphery, forward")
    backward: PeripheryConfig = Field(default_factory=PeripheryConfig, description="read periphery, backward")
    update: UpdateConfig = Field(default_factory=UpdateConfig, description="pulsed or expected update")
    max_in: int = Field(512, ge=1, description="largest tile input size; larger layers are split")
    max_out: int = Field(512, ge=1, description="largest tile output size; larger layers are split")
    bias: Literal["digital", "analog"] = Field("digital", description="bias kept digital or as an analog column")
    out_scale: Union[bool, Literal["column"]] = Field(
        False,
        description="learnable digital output scale: true, one per layer (aihwkit's learn_out_scaling); "
        '"column", one per output (aihwkit\'s out_scaling_columnwise); false, none',
    )

    def __init__(self, **data):
        """A problem is a ConfigError with one line per field, named as in an experiment config (`tile.device:
        unknown device ...`), the same message from Python as from `aimc train`."""
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise ConfigError(format_validation_error(err, "tile", hidden=DEVICE_TAGS)) from None

    def __repr__(self) -> str:
        """The fields that differ from their defaults, as they would be given: `TileConfig(device='ecram')`."""
        changed = self.model_dump(exclude_defaults=True)
        return f"TileConfig({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    __str__ = __repr__

    @field_validator("device", mode="before")
    @classmethod
    def _from_preset(cls, device: object) -> object:
        """An inline table with `preset` becomes that preset's table with its other keys changed."""
        if isinstance(device, dict):
            try:
                return expand_preset_table(device)
            except ConfigError as err:
                raise ValueError(str(err)) from None
        return device

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
