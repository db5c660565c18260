"""What every response family of one resistive element shares: the layout of its drawn per-element
parameters, the codes that name the families' steps, the drawn parameters of an array and the config base class.

A pulse moves an element's weight w by `+dw_min * q_plus(w)` (up) or `-dw_min * q_minus(w)` (down), plus
cycle-to-cycle noise, then clips to the element's bounds ([R1] Wu et al., NeurIPS 2025, arXiv:2502.06309,
eq. 2). A family (a module of devices.families) gives the nominal response (no device-to-device spread) and
draws the per-element parameters of an array (`draw`), which the Numba kernels then evaluate pulse by pulse
(devices.response_step, which dispatches on the family's code to its step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field, field_validator

from aimc.common.validation import Float32Config

# response family codes: which family's step the kernels take (devices.response_step.element_step)
CONST, LINEAR, POWER, EXP_R1, EXP_STEP, TABLE, SOFT_REF = 0, 1, 2, 3, 4, 5, 6
# columns of the element parameter array `ep`
DW_UP, DW_DOWN, W_MAX, W_MIN, GAMMA_UP, GAMMA_DOWN = 0, 1, 2, 3, 4, 5
N_ELEMENT_PARAMS = 6
# the same columns as unsigned offsets: unsigned indices carry no negative-index wraparound code
U_DW_UP, U_W_MAX, U_W_MIN, U_GAMMA_UP = (np.uint64(c) for c in (DW_UP, W_MAX, W_MIN, GAMMA_UP))


@dataclass
class ElementParams:
    """Per-element parameters of an array, in the layout the kernels read.

    ep: (out, in, 6), float32 for an array's drawn elements (as aihwkit's float32 tiles: half the memory a
    pulse reads; 512 x 512 pulsed updates 6% to 11% faster, same-process A/B, 2026-12-03) in the read-only
    strided layout of `kernel_params`, float64 for `nominal()`; columns DW_UP, DW_DOWN (step magnitudes at
    the reference, weight units), W_MAX, W_MIN (element bounds), GAMMA_UP, GAMMA_DOWN (family shape
    parameters); code: family code; consts: family-wide constants; grid, tab_up, tab_dn: response table
    (TABLE family); sigma: cycle-to-cycle noise std; additive: noise `sigma * dw * xi` (True) or
    `step * (1 + sigma * xi)` (False); granularity: the weight change one pulse counts for when a desired
    change is converted into pulses (`DeviceBase.granularity`).
    """

    ep: np.ndarray
    code: int
    consts: np.ndarray
    grid: np.ndarray
    tab_up: np.ndarray
    tab_dn: np.ndarray
    sigma: float
    additive: bool
    granularity: float

    def __setstate__(self, state: dict) -> None:
        """A deep copy or an unpickled copy keeps the kernels' layout (copying a strided view gives a
        contiguous array, which would make Numba compile every kernel once more)."""
        ep = state["ep"]
        self.__dict__.update(state, ep=kernel_params(ep) if ep.dtype == np.float32 else ep)

    @property
    def kernel(self) -> tuple:
        """The parameters as the kernels take them: the fields of devices.kernel_bundles.ElementKernelParams, as
        a plain tuple (that module says why)."""
        return (
            self.ep,
            self.code,
            self.consts,
            self.grid,
            self.tab_up,
            self.tab_dn,
            self.sigma,
            self.additive,
        )  # devices.kernel_bundles.ElementKernelParams' fields


def kernel_params(ep: np.ndarray) -> np.ndarray:
    """A drawn array's parameters ep (out, in, N_ELEMENT_PARAMS) as the kernels read them: float32, read-only
    and strided, which Numba types as Array(float32, 3, 'A', readonly) for every array, so each kernel
    compiles once (30-60 s per kernel and argument type on a cold cache) instead of once per layout.

    Where every element has the same parameters (no device-to-device spread), a view of one element's row
    with zero strides: the pulse kernels then read one cache line instead of a multi-MB array (a 256 x 512
    tile's update 15% faster, cold caches, R1's FCN). Otherwise a view, with the parameter axis reversed,
    of a buffer of the same size: the same bytes per element, but never a contiguous array to Numba.
    """
    ep = np.asarray(ep, np.float32)
    first = ep[:1, :1]
    if ep.shape[0] * ep.shape[1] > 1 and (ep == first).all():
        return np.broadcast_to(first.copy(), ep.shape)  # read-only
    view = np.empty(ep.shape, np.float32)[..., ::-1]
    view[...] = ep
    view.flags.writeable = False
    return view


_EMPTY = np.zeros(2)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)
"""Smallest normal float32 (about 1.2e-38): a smaller step is 0 or subnormal in the float32 kernels."""


class DeviceBase(Float32Config):
    """Fields and methods common to all families."""

    dw_min: float = Field(
        0.001, gt=0, description="granularity: mean step of one pulse at the reference point (weight units)"
    )
    dw_min_dtod: float = Field(0.0, ge=0, lt=1, description="device-to-device relative std of the step size")
    dw_min_std: float = Field(
        0.0,
        ge=0,
        description="cycle-to-cycle std per pulse: relative to the mean step "
        "(multiplicative noise) or in units of the element's step "
        "(additive noise)",
    )

    @field_validator("dw_min")
    @classmethod
    def _dw_min_is_a_float32(cls, value: float) -> float:
        if value < FLOAT32_TINY:
            raise ValueError(f"{value:g} underflows float32 (smallest normal number {FLOAT32_TINY:.4g})")
        return value

    # -- hooks of each family ---------------------------------------------------------------------------
    def _code(self) -> int:
        raise NotImplementedError

    def _consts(self) -> np.ndarray:
        return np.zeros(8)

    def _consts_of(self, ep: np.ndarray) -> np.ndarray:
        """The family's constants for the drawn parameters ep (those that depend on them, where all
        elements share them); _consts() unless a family says otherwise."""
        return self._consts()

    def _after_fill(self, ep: np.ndarray, rng: np.random.Generator) -> None:
        """Changes of a drawn array's parameters after `_fill` (aihwkit's corrupt devices); none by default."""

    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _EMPTY, _EMPTY, _EMPTY

    def _additive(self) -> bool:
        raise NotImplementedError

    def _fill(self, ep: np.ndarray, rng: np.random.Generator | None) -> None:
        """Fill ep[..., :] for every element; rng None gives the nominal element (no spread)."""
        raise NotImplementedError

    # -- public API -------------------------------------------------------------------------------------
    @property
    def bounds(self) -> tuple[float, float]:
        """Nominal weight bounds (w_min, w_max)."""
        raise NotImplementedError

    @property
    def granularity(self) -> float:
        """Weight change one pulse counts for when a desired update is turned into pulses (the pulse-train
        probabilities, expected updates, programming, threshold transfers): aihwkit's
        `calcWeightGranularity`, the nominal mean step at the reference point. dw_min, except where a
        family says otherwise (PowStep, ExpStep, PiecewiseStep)."""
        return float(self.dw_min)

    @property
    def n_states(self) -> float:
        """Number of states (w_max - w_min) / dw_min ([R3] Li et al., arXiv:2510.02516)."""
        lo, hi = self.bounds
        return (hi - lo) / self.dw_min

    def draw(self, shape: tuple[int, int], rng: np.random.Generator) -> ElementParams:
        """Per-element parameters of an array of `shape`, device-to-device spread drawn from rng."""
        ep = np.zeros((*shape, N_ELEMENT_PARAMS))
        self._fill(ep, rng)
        self._after_fill(ep, rng)
        bad = ep[..., W_MIN] >= ep[..., W_MAX]  # dead element: stuck at its mid point (as aihwkit)
        if bad.any():
            mid = 0.5 * (ep[..., W_MIN] + ep[..., W_MAX])
            ep[..., W_MIN] = np.where(bad, mid, ep[..., W_MIN])
            ep[..., W_MAX] = np.where(bad, mid, ep[..., W_MAX])
            ep[..., DW_UP] = np.where(bad, 0.0, ep[..., DW_UP])
            ep[..., DW_DOWN] = np.where(bad, 0.0, ep[..., DW_DOWN])
        return self._element_params(kernel_params(ep))

    def nominal(self) -> ElementParams:
        """Parameters of one nominal element (shape (1, 1), float64), no spread."""
        ep = np.zeros((1, 1, N_ELEMENT_PARAMS))
        self._fill(ep, None)
        return self._element_params(ep)

    def _element_params(self, ep: np.ndarray) -> ElementParams:
        """The bundle of the per-element parameters ep with the family's code, constants and table."""
        grid, tab_up, tab_dn = self._table()
        consts = self._consts_of(ep)
        return ElementParams(
            ep, self._code(), consts, grid, tab_up, tab_dn, float(self.dw_min_std), self._additive(), self.granularity
        )

    def _q(self, w, up: bool) -> np.ndarray:
        # imported here: the kernels dispatch to the family modules, which import this module
        from aimc.devices.characteristics import element_steps_kernel

        w = np.asarray(w, dtype=float)
        p = self.nominal()
        flat = w.reshape(1, -1)
        ep = np.broadcast_to(p.ep, (1, flat.shape[1], N_ELEMENT_PARAMS))  # one shared row, as draw() gives
        step = element_steps_kernel(flat, up, (ep, *p.kernel[1:]))
        return (step / self.dw_min).reshape(w.shape)

    def q_plus(self, w) -> np.ndarray:
        """Up response: mean up step at w divided by dw_min (dimensionless)."""
        return self._q(w, True)

    def q_minus(self, w) -> np.ndarray:
        """Down response: mean down step magnitude at w divided by dw_min (dimensionless)."""
        return self._q(w, False)

    def F(self, w) -> np.ndarray:
        """Symmetric part (q_minus + q_plus) / 2."""
        return 0.5 * (self.q_minus(w) + self.q_plus(w))

    def G(self, w) -> np.ndarray:
        """Asymmetric part (q_minus - q_plus) / 2; zero at the symmetric point."""
        return 0.5 * (self.q_minus(w) - self.q_plus(w))

    def symmetric_point(self) -> float:
        """Weight where q_plus = q_minus (closed form where the family has one, else bisection).

        NaN when q_plus = q_minus everywhere (no asymmetry: every weight is symmetric); a bound when one
        direction dominates everywhere (alternating pulses drift to that bound).
        """
        from aimc.devices.characteristics import symmetric_point_kernel  # as in _q

        p = self.nominal()
        return float(symmetric_point_kernel(p.kernel)[0, 0])
