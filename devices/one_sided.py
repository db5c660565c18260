"""The one-sided unit cell's config: a weight stored as the difference of two devices that are only ever
potentiated, with a periodic refresh (aihwkit 1.1.0's OneSidedUnitCell, the way PCM trains).

W = G+ - G-. A pulse that would raise W is an up pulse on G+, one that would lower W an up pulse on G-.
Setting weights writes G+ = max(W, 0) and G- = max(-W, 0). Every `refresh_every` update cycles (one cycle per
sample of a mini-batch; `units_in_mbatch` counts mini-batches instead) each column of both devices is read
through the `refresh_forward` periphery with a one-hot input, giving g+ and g- per element; with
m+ = |w_max|, m- = |w_max| of the device parameters (the same device for both here), an element is refreshed
where g+ > g- and g+/m+ > refresh_upper_thres and g-/m- > refresh_lower_thres, or where g+ <= g- and
g+/m+ > refresh_lower_thres and g-/m- > refresh_upper_thres. A refreshed element has both devices reset
(w = clip(b + reset_std xi), the device's reset), then |g+ - g-| written onto the side that was larger with
a pulsed update of `refresh_update` settings (learning rate -1, input the one-hot column). Equations as
aihwkit 1.1.0's binary computes them; the array is devices.one_sided_array.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from aimc.common.validation import Float32Config
from aimc.devices.families.constant import ConstantStep
from aimc.devices.families.exp_step import ExpStep
from aimc.devices.families.linear import LinearStep, SoftBounds
from aimc.devices.families.power import PowStep
from aimc.devices.families.table import PiecewiseStep
from aimc.devices.periphery import PeripheryConfig
from aimc.devices.update import UpdateConfig

PulsedDevice = Annotated[
    Union[ConstantStep, LinearStep, SoftBounds, ExpStep, PowStep, PiecewiseStep], Field(discriminator="kind")
]
"""The devices a one-sided cell can hold: aihwkit's pulsed families (as aihwkit 1.1.0 requires)."""


class OneSided(Float32Config):
    """aihwkit 1.1.0's OneSidedUnitCell: two devices of config `device`, G- drawn first, then G+; the
    parameter names and defaults are aihwkit's (its refresh_forward is its IOParameters(), which are this
    project's PeripheryConfig() defaults; refresh_update its UpdateParameters(), UpdateConfig())."""

    kind: Literal["OneSided"] = "OneSided"
    device: PulsedDevice = Field(description="the device of both G+ and G- (an aihwkit pulsed family)")
    refresh_every: int = Field(
        0,
        ge=0,
        description="refresh after this many update cycles (samples, or mini-batches with units_in_mbatch); 0 = never",
    )
    units_in_mbatch: bool = Field(True, description="refresh_every counts mini-batches, not samples")
    refresh_upper_thres: float = Field(
        0.75, description="the larger device, relative to |w_max|, must exceed this for a refresh"
    )
    refresh_lower_thres: float = Field(
        0.25, description="the smaller device, relative to |w_max|, must exceed this for a refresh"
    )
    refresh_forward: PeripheryConfig = Field(
        PeripheryConfig(), description="read periphery of the refresh reads (noisy by default)"
    )
    refresh_update: UpdateConfig = Field(UpdateConfig(), description="pulsed update of the refresh rewrite")
    copy_inverted: bool = Field(
        False,
        description="G+ swaps its own up and down steps and mirrors its own bounds (b_max <- -b_min, b_min <- -b_max)",
    )

    @model_validator(mode="after")
    def _check(self):
        if self.device.write_noise_std > 0:
            raise ValueError(
                "device.write_noise_std: a one-sided cell's devices take no write noise (aihwkit "
                "1.1.0 refuses a refresh reset with write noise)"
            )
        if self.refresh_update.mode != "pulsed":
            raise ValueError("refresh_update.mode: the refresh rewrite is a pulsed update")
        return self

    # -- what the tools read of a device config -----------------------------------------------------------
    @property
    def dw_min(self) -> float:
        """The device's dw_min (weight units)."""
        return self.device.dw_min

    @property
    def granularity(self) -> float:
        """Weight change one pulse counts for: the device's granularity."""
        return self.device.granularity

    @property
    def bounds(self) -> tuple[float, float]:
        """Nominal range of W = G+ - G-: (w_min - w_max, w_max - w_min) of the device."""
        lo, hi = self.device.bounds
        return (lo - hi, hi - lo)

    @property
    def n_states(self) -> float:
        """States of one device, (w_max - w_min) / dw_min."""
        return self.device.n_states

    def symmetric_point(self) -> float:
        """NaN: no weight is a symmetric point, as both directions are up pulses (on different devices)."""
        return float("nan")
