"""Unit cells of several pulsed devices per cross point (aihwkit 1.1.0's VectorUnitCell and ReferenceUnitCell).

W = sum_k gamma_k w_k over the cell's devices (gamma_k = 1/n where gamma_vec is empty). Each update cycle (one
sample of a mini-batch) goes to the devices the update policy picks: ALL (every device, with the same pulse
coincidences), SINGLE_FIXED (device first_update_idx), SINGLE_SEQUENTIAL (devices first_update_idx + 1,
first_update_idx + 2, ... mod n, one per cycle), SINGLE_RANDOM (one uniformly drawn device per cycle). One pulse
counts for the mean of the devices' granularities (gamma does not enter it). Setting weights writes W into every
device's w_k, except under SINGLE_FIXED, where device first_update_idx gets W and the others 0; W reads back as
sum_k gamma_k w_k, not as the value written. Equations as aihwkit 1.1.0's binary computes them; the array is
devices.unit_cell_array.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from aimc.common.validation import Float32Config
from aimc.devices.families.constant import ConstantStep
from aimc.devices.families.exp_step import ExpStep
from aimc.devices.families.linear import LinearStep, SoftBounds
from aimc.devices.families.power import PowStep, PowStepReference
from aimc.devices.families.soft_bounds_reference import SoftBoundsReference
from aimc.devices.families.table import PiecewiseStep

CellDevice = Annotated[
    Union[ConstantStep, LinearStep, SoftBounds, ExpStep, PowStep, PiecewiseStep, SoftBoundsReference, PowStepReference],
    Field(discriminator="kind"),
]
"""The devices a unit cell can hold: aihwkit's pulsed families."""
UpdatePolicy = Literal["ALL", "SINGLE_FIXED", "SINGLE_SEQUENTIAL", "SINGLE_RANDOM"]


class VectorUnitCell(Float32Config):
    """aihwkit 1.1.0's VectorUnitCell: `devices` per cross point, W = sum_k gamma_vec[k] w_k; field names and
    defaults are aihwkit's (its unit_cell_devices is `devices`)."""

    kind: Literal["VectorUnitCell"] = "VectorUnitCell"
    devices: list[CellDevice] = Field(min_length=1, description="the devices of one cross point")
    update_policy: UpdatePolicy = Field("ALL", description="which device(s) each update cycle (sample) goes to")
    first_update_idx: int = Field(0, ge=0, description="the SINGLE_FIXED device; SINGLE_SEQUENTIAL starts after it")
    gamma_vec: list[float] = Field(
        default_factory=list, description="weight of each device in W; empty: 1/n each (n devices)"
    )

    @model_validator(mode="after")
    def _check(self):
        if self.gamma_vec and len(self.gamma_vec) != len(self.devices):
            raise ValueError(f"gamma_vec: {len(self.gamma_vec)} factors for {len(self.devices)} devices")
        if self.first_update_idx >= len(self.devices):
            raise ValueError(f"first_update_idx: {self.first_update_idx} is no device index (n = {len(self.devices)})")
        return self

    # -- what the array and the tools read of a device config ---------------------------------------------
    @property
    def cell_devices(self) -> list:
        """The device of each element array, in order."""
        return list(self.devices)

    @property
    def gammas(self) -> list[float]:
        """gamma_k of each device (1/n where gamma_vec is empty)."""
        n = len(self.cell_devices)
        return list(self.gamma_vec) if self.gamma_vec else [1.0 / n] * n

    @property
    def dw_min(self) -> float:
        """Mean dw_min of the devices (weight units of one device)."""
        return sum(dev.dw_min for dev in self.cell_devices) / len(self.cell_devices)

    @property
    def granularity(self) -> float:
        """Weight change one pulse counts for: the mean of the devices' granularities."""
        return sum(dev.granularity for dev in self.cell_devices) / len(self.cell_devices)

    @property
    def bounds(self) -> tuple[float, float]:
        """Nominal range of W: sum_k gamma_k [w_min_k, w_max_k] (ends swapped where gamma_k < 0)."""
        lo = hi = 0.0
        for g, dev in zip(self.gammas, self.cell_devices):
            a, b = g * dev.bounds[0], g * dev.bounds[1]
            lo, hi = lo + min(a, b), hi + max(a, b)
        return (lo, hi)

    @property
    def n_states(self) -> float:
        """States of the range of W in steps of the cell's granularity."""
        lo, hi = self.bounds
        return (hi - lo) / self.granularity

    def symmetric_point(self) -> float:
        """sum_k gamma_k of each device's symmetric point."""
        return float(sum(g * dev.symmetric_point() for g, dev in zip(self.gammas, self.cell_devices)))


class ReferenceUnitCell(VectorUnitCell):
    """aihwkit 1.1.0's ReferenceUnitCell: two devices, W = w_0 - w_1 (gamma_vec [1, -1]); updates go to device
    0 only (SINGLE_FIXED), device 1 is a fixed reference, written 0 by set_weights. One device given: both are
    that device (drawn independently), as aihwkit copies it."""

    kind: Literal["ReferenceUnitCell"] = "ReferenceUnitCell"
    devices: list[CellDevice] = Field(min_length=1, max_length=2, description="device 0 and the reference device")
    update_policy: UpdatePolicy = Field("SINGLE_FIXED", description="keep SINGLE_FIXED (aihwkit's advice)")
    gamma_vec: list[float] = Field(default_factory=lambda: [1.0, -1.0], description="weight of each device in W")

    @model_validator(mode="after")
    def _check(self):
        if len(self.gamma_vec) != 2:
            raise ValueError(f"gamma_vec: a reference cell takes 2 factors, not {len(self.gamma_vec)}")
        if self.first_update_idx >= 2:
            raise ValueError(f"first_update_idx: {self.first_update_idx} is no device index (n = 2)")
        return self

    @property
    def cell_devices(self) -> list:
        """Device 0 and the reference device (device 0 again where one is given)."""
        return list(self.devices) * 2 if len(self.devices) == 1 else list(self.devices)
