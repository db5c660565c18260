"""How a response family is fitted to measured pulse traces (aimc.calibration): its free parameters, their box
and starting points from the data, the fields held fixed, and how each device-to-device spread is measured.

Every family module of this package holds the `Family` specifications of its configs beside them
(`fit_families`); aimc.calibration.families gathers them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from aimc.devices.device_base import DeviceBase


class MeasuredRange(Protocol):
    """What a box or a start reads of the data (aimc.calibration.pulse_data.PulseData): the plateau estimates
    of the bounds lo, hi and the typical step dw0 (weight units)."""

    lo: float
    hi: float
    dw0: float


@dataclass(frozen=True)
class Family:
    """How one response family is fitted.

    kind: the family's name (that of its device family, unless `fixed` names the device family under "kind",
    as the up/down families power_ud and exponential_ud do); params: the fitted parameters; fixed: the other
    fields of the config during the fit; box: (lower, upper) limits from the data; starts: starting points (the
    best of them wins); spread: field of a device-to-device spread -> (per-device quantity, scaling), the
    quantity a function (fitted parameters by name, nominal dw_min) -> float, the scaling how its between-device
    std becomes the field: "abs" as is, "rel" over |mean|, "rel2" over |mean| times sqrt(2) (tau: the simulator
    draws the two bounds independently, a symmetric fit of one element sees their mean); fields: parameter
    vector -> config fields (default: by name).
    """

    kind: str
    cls: type
    params: tuple[str, ...]
    box: Callable[[MeasuredRange], tuple[list[float], list[float]]]
    starts: Callable[[MeasuredRange], list[list[float]]]
    fixed: dict = field(default_factory=dict)
    spread: dict = field(default_factory=dict)
    fields: Callable[[np.ndarray], dict] | None = None

    def config_fields(self, theta: np.ndarray) -> dict:
        out = {"kind": self.kind, **self.fixed}
        out.update(self.fields(theta) if self.fields else {k: float(v) for k, v in zip(self.params, theta)})
        return out

    def fast_config(self, theta: np.ndarray) -> DeviceBase:
        """Config without validation (inside the optimiser, where the box keeps parameters valid): a copy of
        `_template` with the fields of theta (pydantic's model_copy, a tenth of model_construct's time, which
        resolves every default again)."""
        return self._template.model_copy(update=self.config_fields(theta))

    @functools.cached_property
    def _template(self) -> DeviceBase:
        """The family's config with every field at its default but the fixed ones, unvalidated."""
        return self.cls.model_construct(**self.config_fields(np.zeros(len(self.params))))


def by_field(name: str) -> Callable[[dict, float], float]:
    """A spread's per-device quantity: the fitted parameter `name` as is."""
    return lambda p, dw: p[name]


def span(d: MeasuredRange) -> float:
    """The measured range hi - lo (weight units)."""
    return d.hi - d.lo
