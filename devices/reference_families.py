"""aihwkit's reference devices: a pulsed element g read against a fixed per-element reference, with aihwkit's
parameter names and defaults (IBM aihwkit 1.1.0's SoftBoundsReferenceDevice and PowStepReferenceDevice;
where its docstring and its binary disagree, these follow the binary).

The weight the array stores and reads is w = g - ref, with ref = reference_mean + reference_std xi, plus the
element's symmetric point sp where subtract_symmetry_point (then w = 0 sits at the symmetric point). A pulse
acts on g: its step is the family's step at g = w + ref and g is clipped to the element's bounds
[b_min, b_max]. Here that is the same rule in w: the element's bounds are stored shifted, b - ref, and the
steps are written in distances to them. subtract_symmetry_point also adds sp to the element's reset value
(aihwkit 1.1.0's binary), so reset and decay drive w to sp, not to 0.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numba import njit
from pydantic import BaseModel, Field, PrivateAttr

from aimc.devices.aihwkit_families import PowStep, PulsedDevice
from aimc.devices.effects import ElementEffects
from aimc.devices.response_step import DW_DOWN, DW_UP, GAMMA_DOWN, GAMMA_UP, SOFT_REF, W_MAX, W_MIN


class _Reference(BaseModel):
    """The reference fields both devices share, and the shift of the drawn bounds by the reference."""

    reference_mean: float = Field(0.0, description="mean reference subtracted from every element (weight units)")
    reference_std: float = Field(0.0, ge=0, description="device-to-device std of the reference (weight units)")
    subtract_symmetry_point: bool = Field(False, description="add each element's symmetric point to its "
                                                             "reference (and to its reset value)")
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


class SoftBoundsReference(_Reference, PulsedDevice):
    """aihwkit SoftBoundsReference: soft bounds on g = w + ref, up g + dw_up (1 - g/b_max), down
    g - dw_down (1 - g/b_min), g clipped to [b_min, b_max].

    Per element (bounds sign-consistent, b_max > 0 > b_min): the slopes dw_up / b_max and dw_down / |b_min|
    scale by |1 + slope_up_dtod xi| and |1 + slope_down_dtod xi|, which moves the bounds to
    b_max = dw_up / slope_up and b_min = -dw_down / slope_down; the symmetric point is
    sp = (dw_up - dw_down) / (dw_up / b_max - dw_down / b_min). Cycle noise additive by default
    (mult_noise False): the step is dw (1 - g/b + dw_min_std xi).
    """

    kind: Literal["SoftBoundsReference"] = "SoftBoundsReference"
    mult_noise: bool = Field(False, description="multiplicative cycle noise (else additive: dw_min_std dw xi)")
    slope_up_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of the up slope")
    slope_down_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of the down slope")

    def _code(self) -> int:
        return SOFT_REF

    def _additive(self) -> bool:
        return not self.mult_noise

    def _consts(self) -> np.ndarray:
        return np.ones(8)  # unused by SOFT_REF; span units of the shared distance

    def _shape(self, ep, rng) -> None:
        shape = ep.shape[:-1]
        factor = lambda dtod: (np.abs(1.0 + dtod * rng.standard_normal(shape))  # noqa: E731
                               if rng is not None and dtod > 0 else 1.0)
        up, dn, hi, lo = ep[..., DW_UP], ep[..., DW_DOWN], ep[..., W_MAX], ep[..., W_MIN]
        ok = (hi > 0) & (lo < 0)
        slope_dn = factor(self.slope_down_dtod) * dn / np.where(ok, -lo, 1.0)  # drawn first, as aihwkit
        slope_up = factor(self.slope_up_dtod) * up / np.where(ok, hi, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ep[..., W_MAX] = np.where(ok & (slope_up > 0), up / slope_up, hi)
            ep[..., W_MIN] = np.where(ok & (slope_dn > 0), -dn / slope_dn, lo)
            hi, lo = ep[..., W_MAX], ep[..., W_MIN]
            ep[..., GAMMA_UP] = np.where(hi > 0, 1.0 / np.abs(hi), 0.0)
            ep[..., GAMMA_DOWN] = np.where(lo < 0, 1.0 / np.abs(lo), 0.0)

    def _symmetric_points(self, ep) -> np.ndarray:
        up, dn, hi, lo = ep[..., DW_UP], ep[..., DW_DOWN], ep[..., W_MAX], ep[..., W_MIN]
        return (up - dn) / (up / hi - dn / lo)


@njit(cache=True)
def pow_symmetric_points(su, sd, bu, bd, gu, gd, n_steps):
    """aihwkit 1.1.0's PowStepReference estimate of each element's symmetric point, in float32 as there:
    from sp = 0, n times sp += -sd ((sp - bd)/r)^gd + su ((bu - sp)/r)^gu, r = bu - bd; n = n_steps where
    > 0, else min(round(10 r / min(|sd|, |su|)), 10000). Arrays (out, in) of the drawn steps, bounds and
    exponents; returns float64 (out, in)."""
    out = np.zeros(su.shape)
    for i in range(su.shape[0]):
        for j in range(su.shape[1]):
            u, d = np.float32(su[i, j]), np.float32(sd[i, j])
            hi, lo = np.float32(bu[i, j]), np.float32(bd[i, j])
            g_up, g_dn = np.float32(gu[i, j]), np.float32(gd[i, j])
            r = hi - lo
            n = n_steps
            if n <= 0:
                smallest = min(abs(d), abs(u))
                n = 10000 if smallest == 0 else min(int(np.floor(np.float32(10.0) * (r / smallest) + 0.5)), 10000)
            sp = np.float32(0.0)
            for _ in range(n):
                sp += -d * ((sp - lo) / r) ** g_dn + u * ((hi - sp) / r) ** g_up
            out[i, j] = sp
    return out


class PowStepReference(_Reference, PowStep):
    """aihwkit PowStepReference: the PowStep rule on g = w + ref (up + dw_up ((b_max - g)/r)^gamma_up, down
    - dw_down ((g - b_min)/r)^gamma_down, r = b_max - b_min), g clipped to [b_min, b_max]; the symmetric point
    is the fixed-point estimate of pow_symmetric_points. No write noise (aihwkit 1.1.0 refuses it)."""

    kind: Literal["PowStepReference"] = "PowStepReference"
    n_estimation_steps: int = Field(-1, description="fixed-point steps of the symmetric-point estimate; "
                                                    "<= 0: min(round(10 r / min step), 10000)")
    write_noise_std: Literal[0.0] = Field(0.0, description="fixed at 0: aihwkit's PowStepReference has no "
                                                           "write noise")

    def _symmetric_points(self, ep) -> np.ndarray:
        cols = [np.ascontiguousarray(np.broadcast_to(ep[..., c], ep.shape[:-1]))
                for c in (DW_UP, DW_DOWN, W_MAX, W_MIN, GAMMA_UP, GAMMA_DOWN)]
        return pow_symmetric_points(*cols, int(self.n_estimation_steps))
