"""The device config: every response family of one resistive element under one tagged union (`kind`).

The families (devices.families, one module per step law): R1's paper families (`ideal`, `linear`, `power`,
`exponential`), aihwkit 1.1.0's pulsed families (`ConstantStep`, `LinearStep`, `SoftBounds`, `ExpStep`,
`PowStep`, `PiecewiseStep`) and reference devices (`SoftBoundsReference`, `PowStepReference`), a measured
response on a grid (`tabulated`), aihwkit's one-sided unit cell of two such devices (devices.one_sided:
`OneSided`) and its unit cells of several devices (devices.unit_cells: `VectorUnitCell`, `ReferenceUnitCell`).
aihwkit's families carry its write noise, decay, diffusion, reset, corrupt devices (devices.effects) and
drift of an idle array (devices.drift).
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field, TypeAdapter, ValidationError

from aimc.common.errors import ConfigError
from aimc.common.validation import format_validation_error
from aimc.devices.families.constant import ConstantStep, Ideal
from aimc.devices.families.exp_step import ExpStep
from aimc.devices.families.exponential import Exponential
from aimc.devices.families.linear import Linear, LinearStep, SoftBounds
from aimc.devices.families.power import Power, PowStep, PowStepReference
from aimc.devices.families.soft_bounds_reference import SoftBoundsReference
from aimc.devices.families.table import PiecewiseStep, Tabulated
from aimc.devices.one_sided import OneSided
from aimc.devices.unit_cells import ReferenceUnitCell, VectorUnitCell

DEVICE_CLASSES = (
    Ideal,
    Linear,
    Power,
    Exponential,
    ConstantStep,
    LinearStep,
    SoftBounds,
    ExpStep,
    PowStep,
    PiecewiseStep,
    SoftBoundsReference,
    PowStepReference,
    Tabulated,
    OneSided,
    VectorUnitCell,
    ReferenceUnitCell,
)
"""Every device config class, one per `kind`."""
DeviceConfig = Annotated[Union[DEVICE_CLASSES], Field(discriminator="kind")]
DEVICE_KINDS = (
    "ideal",
    "linear",
    "power",
    "exponential",
    "ConstantStep",
    "LinearStep",
    "SoftBounds",
    "ExpStep",
    "PowStep",
    "PiecewiseStep",
    "SoftBoundsReference",
    "PowStepReference",
    "tabulated",
)
"""The response families of one element (a OneSided cell holds two elements of one of them)."""
DEVICE_TAGS = (*DEVICE_KINDS, "OneSided", "VectorUnitCell", "ReferenceUnitCell")
"""Every `kind` of the device union, left out of error paths (`tile.device.tau`, not `tile.device.power.tau`)."""
_ADAPTER = TypeAdapter(DeviceConfig)
_FAMILIES = {cls.model_fields["kind"].default: cls for cls in DEVICE_CLASSES}


def parse_device(data: dict, where: str = "device") -> DeviceConfig:
    """Validate a device config dict (with its `kind`); errors name the field as an experiment config does,
    e.g. `tile.device.tau` (the family's tag is not part of the path)."""
    family = _FAMILIES.get(data.get("kind")) if isinstance(data, dict) else None
    try:
        return family.model_validate(data) if family else _ADAPTER.validate_python(data)
    except ValidationError as err:
        raise ConfigError(f"invalid device config:\n{format_validation_error(err, where, DEVICE_TAGS)}") from None


def device_schema() -> dict:
    """JSON schema of the device config union."""
    return _ADAPTER.json_schema()
