"""The tile config of the trainer layer: how a torch layer becomes analog tiles.

Each training algorithm's config sits beside its optimizer (trainers/algorithms/<algorithm>.py);
trainers/algorithms/registry.py joins them into `TrainerConfig`.
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, ValidationError, field_validator, model_serializer, model_validator

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
    devices: Union[list[Union[str, DeviceConfig]], None] = Field(
        None,
        description="one device per array of the training algorithm (array n gets devices[n]: e.g. the "
        "weight W and the fast array P of Tiki-Taka, TTv2 and residual learning, the n-th tile of the "
        "multi-tile cascade), instead of `device` for all; each as `device` takes it",
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

    @field_validator("devices", mode="before")
    @classmethod
    def _each_from_preset(cls, devices: object) -> object:
        if isinstance(devices, (list, tuple)):
            return [cls._from_preset(d) for d in devices]
        return devices

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

    @field_validator("devices")
    @classmethod
    def _known_devices(cls, devices: list | None) -> list | None:
        if devices is not None:
            if not devices:
                raise ValueError("give at least one device (or leave `devices` out and use `device`)")
            for n, d in enumerate(devices):
                try:
                    cls._known_device(d)
                except ValueError as err:
                    raise ValueError(f"devices[{n}]: {err}") from None
        return devices

    @model_validator(mode="after")
    def _device_or_devices(self) -> TileConfig:
        if self.devices is not None and "device" in self.model_fields_set:
            raise ValueError("give `device` (one for every array) or `devices` (one per array), not both")
        return self

    @model_serializer(mode="wrap")
    def _device_or_devices_dump(self, handler):
        """A dump holds `device` or `devices`, the one in use (so that it loads back): `devices` is left out
        while unset, and configs without it keep their canonical JSON (and the config hash of their runs)."""
        data = handler(self)
        data.pop("devices" if self.devices is None else "device", None)  # absent under exclude_defaults
        return data

    def resolved_device(self) -> DeviceConfig:
        """The device of array 0 (of every array, where `devices` is not given)."""
        return load_device(self.device if self.devices is None else self.devices[0])

    def resolved_devices(self) -> list[DeviceConfig]:
        """The device of each array where `devices` is given; empty otherwise (every array has `device`)."""
        return [] if self.devices is None else [load_device(d) for d in self.devices]
