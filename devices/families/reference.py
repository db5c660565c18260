"""What aihwkit's reference devices share: a pulsed element g read against a fixed per-element reference, with
aihwkit's parameter names and defaults (IBM aihwkit 1.1.0's SoftBoundsReferenceDevice and
PowStepReferenceDevice; where its docstring and its binary disagree, these follow the binary).

The weight the array stores and reads is w = g - ref, with ref = reference_mean + reference_std xi, plus the
element's symmetric point sp where subtract_symmetry_point (then w = 0 sits at the symmetric point). A pulse
acts on g: its step is the family's step at g = w + ref and g is clipped to the element's bounds
[b_min, b_max]. Here that is the same rule in w: the element's bounds are stored shifted, b - ref, and the
steps are written in distances to them. subtract_symmetry_point also adds sp to the element's reset value
(aihwkit 1.1.0's binary), so reset and decay drive w to sp, not to 0.

A reference device is fitted as its element's family: a reference only shifts the weight that is read.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field, PrivateAttr

from aimc.devices.device_base import W_MAX, W_MIN
from aimc.devices.effects import ElementEffects


class Reference(BaseModel):
    """The reference fields both devices share, and the shift of the drawn bounds by the reference (a mixin
    listed before the element's family among a device's bases)."""

    reference_mean: float = Field(0.0, description="mean reference subtracted from every element (weight units)")
    reference_std: float = Field(0.0, ge=0, description="device-to-device std of the reference (weight units)")
    subtract_symmetry_point: bool = Field(
        False, description="add each element's symmetric point to its reference (and to its reset value)"
    )
    _drawn_sp: np.ndarray | None = PrivateAttr(None)

    @property
    def bounds(self) -> tuple[float, float]:
        """Nominal bounds of the stored weight w = g - ref: (w_min - ref, w_max - ref) of the nominal
        element."""
        ep = self.nominal().ep[0, 0]
        return (float(ep[W_MIN]), float(ep[W_MAX]))

    def _symmetric_points(self, ep) -> np.ndarray:
        raise NotImplementedError

    def _refer(self, ep, rng) -> None:
        """Draw the references and shift the bounds by them; with rng (an array's draw, after its corrupt
        devices, as aihwkit) keep the symmetric points for the draw_effects call that follows."""
        shape = ep.shape[:-1]
        ref = np.full(shape, self.reference_mean)
        if rng is not None and self.reference_std > 0:
            ref = ref + self.reference_std * rng.standard_normal(shape)
        sp = np.zeros(shape)
        if self.subtract_symmetry_point:
            ok = (ep[..., W_MAX] > 0) & (ep[..., W_MIN] < 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                sp = np.where(ok, self._symmetric_points(ep), 0.0)
            ref = ref + sp
        ep[..., W_MAX] -= ref
        ep[..., W_MIN] -= ref
        self._drawn_sp = sp if rng is not None else None

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        self._shape(ep, rng)
        if rng is None:  # the nominal element (an array's draw refers in _after_fill, after corrupt devices)
            self._refer(ep, None)

    def _shape(self, ep, rng) -> None:
        """The family's own draws on the unshifted bounds."""

    def _after_fill(self, ep, rng) -> None:
        super()._after_fill(ep, rng)
        self._refer(ep, rng)

    def draw_effects(self, shape: tuple[int, int], rng: np.random.Generator) -> ElementEffects:
        """The effects of DeviceEffects, the reset values shifted by the symmetric points just drawn."""
        fx = super().draw_effects(shape, rng)
        sp, self._drawn_sp = self._drawn_sp, None
        if sp is not None and sp.shape == tuple(shape) and sp.any():
            fx.reset_bias = (fx.reset_bias + sp).astype(np.float32)
        return fx
