"""Response-function families of one resistive element (pydantic configs).

A pulse moves an element's weight w by `+dw_min * q_plus(w)` (up) or `-dw_min * q_minus(w)` (down), plus
cycle-to-cycle noise, then clips to the element's bounds (R1 eq. 2; DOMAIN.md section 1). Each family below
gives the nominal response (no device-to-device spread) as numpy functions and draws the per-element
parameters of an array (`draw`), which the Numba kernels of `devices.kernels` then evaluate pulse by pulse.

Two groups of families share one kernel representation:

- the paper families of R1 (Wu et al., NeurIPS 2025, Table 1 and DOMAIN.md): `ideal`, `linear`, `power`,
  `exponential`, written over [-tau, tau] with the up/down asymmetry `c` (q_plus scaled by 1 + c, q_minus by
  1 - c), additive cycle noise `dw_min * sigma_c * xi` as in R1;
- aihwkit's pulsed families with aihwkit's parameter names and update equations (aihwkit 1.1.0, see
  ../shared/AIHWKIT.md): `ConstantStep`, `LinearStep`, `SoftBounds`, `ExpStep`, `PowStep`, `PiecewiseStep`;
- `tabulated`: q_plus and q_minus measured on a grid of w, linearly interpolated.

Write noise, decay, drift and diffusion of aihwkit are not modelled (docs/devices.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, Union

import numpy as np
from pydantic import BaseModel, Field, TypeAdapter, ValidationError, model_validator

from aimc.common.errors import ConfigError
from aimc.common.validation import STRICT, format_validation_error
from aimc.devices import kernels as K


@dataclass
class ElementParams:
    """Per-element parameters of an array, in the layout the kernels read.

    ep: (out, in, 6), float32 for an array's drawn elements (as aihwkit's float32 tiles: half the memory a
    pulse reads; pulsed updates 6% to 11% faster), float64 for `nominal()`; columns DW_UP, DW_DOWN (step
    magnitudes at the reference, weight units),
    W_MAX, W_MIN (element bounds), GAMMA_UP, GAMMA_DOWN (family shape parameters); code: family code;
    consts: family-wide constants; grid, tab_up, tab_dn: response table (TABLE family); sigma: cycle-to-cycle
    noise std; additive: noise `sigma * dw * xi` (True) or `step * (1 + sigma * xi)` (False); granularity: the
    weight change one pulse counts for when a desired change is converted into pulses (`_Device.granularity`).
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

    @property
    def response(self) -> tuple:
        """Arguments (ep, code, consts, grid, tab_up, tab_dn) of the kernels' mean step."""
        return (self.ep, self.code, self.consts, self.grid, self.tab_up, self.tab_dn)

    @property
    def noise(self) -> tuple:
        """Arguments (sigma, additive) of the kernels' cycle-to-cycle noise."""
        return (self.sigma, self.additive)


def _shared_if_uniform(ep: np.ndarray) -> np.ndarray:
    """ep itself, or, where every element has the same parameters (no device-to-device spread), a view
    of one element's row with zero strides: the pulse kernels then read one cache line instead of 48
    bytes per element of a multi-MB array (a 256 x 512 tile's update 15% faster, cold caches, R1's FCN).
    Kernels only read ep; the view is read-only."""
    first = ep[:1, :1]
    if ep.size == 0 or not (ep == first).all():
        return ep
    return np.broadcast_to(first.copy(), ep.shape)  # read-only


_EMPTY = np.zeros(2)


class _Device(BaseModel):
    """Fields and methods common to all families."""

    model_config = STRICT

    dw_min: float = Field(0.001, gt=0, description="granularity: mean step of one pulse at the reference point "
                                                   "(weight units)")
    dw_min_dtod: float = Field(0.0, ge=0, lt=1, description="device-to-device relative std of the step size")
    dw_min_std: float = Field(0.0, ge=0, description="cycle-to-cycle std per pulse: relative to the mean step "
                                                     "(multiplicative noise) or in units of the element's step "
                                                     "(additive noise)")

    # -- hooks of each family ---------------------------------------------------------------------------
    def _code(self) -> int:
        raise NotImplementedError

    def _consts(self) -> np.ndarray:
        return np.zeros(8)

    def _consts_of(self, ep: np.ndarray) -> np.ndarray:
        """The family's constants for the drawn parameters ep (those that depend on them, where all
        elements share them); _consts() unless a family says otherwise."""
        return self._consts()

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
        """Number of states (w_max - w_min) / dw_min (R3's definition)."""
        lo, hi = self.bounds
        return (hi - lo) / self.dw_min

    def draw(self, shape: tuple[int, int], rng: np.random.Generator) -> ElementParams:
        """Per-element parameters of an array of `shape`, device-to-device spread drawn from rng."""
        ep = np.zeros((*shape, K.N_ELEMENT_PARAMS))
        self._fill(ep, rng)
        bad = ep[..., K.W_MIN] >= ep[..., K.W_MAX]  # dead element: stuck at its mid point (as aihwkit)
        if bad.any():
            mid = 0.5 * (ep[..., K.W_MIN] + ep[..., K.W_MAX])
            ep[..., K.W_MIN] = np.where(bad, mid, ep[..., K.W_MIN])
            ep[..., K.W_MAX] = np.where(bad, mid, ep[..., K.W_MAX])
            ep[..., K.DW_UP] = np.where(bad, 0.0, ep[..., K.DW_UP])
            ep[..., K.DW_DOWN] = np.where(bad, 0.0, ep[..., K.DW_DOWN])
        grid, tab_up, tab_dn = self._table()
        ep = _shared_if_uniform(ep.astype(np.float32))
        return ElementParams(ep, self._code(), self._consts_of(ep), grid,
                             tab_up, tab_dn, float(self.dw_min_std), self._additive(), self.granularity)

    def nominal(self) -> ElementParams:
        """Parameters of one nominal element (shape (1, 1)), no spread."""
        ep = np.zeros((1, 1, K.N_ELEMENT_PARAMS))
        self._fill(ep, None)
        grid, tab_up, tab_dn = self._table()
        return ElementParams(ep, self._code(), self._consts_of(ep), grid, tab_up, tab_dn,
                             float(self.dw_min_std), self._additive(), self.granularity)

    def _q(self, w, up: bool) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        p = self.nominal()
        flat = w.reshape(1, -1)
        ep = np.broadcast_to(p.ep, (1, flat.shape[1], K.N_ELEMENT_PARAMS))  # one shared row, as draw() gives
        step = K.mean_step_kernel(flat, up, ep, p.code, p.consts, p.grid, p.tab_up, p.tab_dn)
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
        p = self.nominal()
        return float(K.symmetric_point_kernel(*p.response)[0, 0])


# ---------------------------------------------------------------------------------------------------------
# R1's paper families over [-tau, tau]
# ---------------------------------------------------------------------------------------------------------


class _PaperDevice(_Device):
    tau: float = Field(0.6, gt=0, description="weight bound: the element lives in [-tau, tau] (weight units)")
    c: float = Field(0.0, gt=-1, lt=1, description="up/down asymmetry: q_plus scaled by (1 + c), q_minus by "
                                                   "(1 - c); shifts the symmetric point (R1's c_Lin)")
    c_dtod: float = Field(0.0, ge=0, description="device-to-device std of c")
    tau_dtod: float = Field(0.0, ge=0, lt=1, description="device-to-device relative std of each bound")
    noise: Literal["additive", "multiplicative"] = Field(
        "additive", description="cycle noise: additive dw_min * sigma * xi (R1), or multiplicative")

    def _additive(self) -> bool:
        return self.noise == "additive"

    @property
    def bounds(self) -> tuple[float, float]:
        return (-self.tau, self.tau)

    def _draw_common(self, ep, rng) -> None:
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = np.maximum(1.0 + self.dw_min_dtod * z(), 0.0)
        c = np.clip(self.c + self.c_dtod * z(), -1.0, 1.0)
        ep[..., K.DW_UP] = self.dw_min * gain * (1.0 + c)
        ep[..., K.DW_DOWN] = self.dw_min * gain * (1.0 - c)
        ep[..., K.W_MAX] = self.tau * (1.0 + self.tau_dtod * z())
        ep[..., K.W_MIN] = -self.tau * (1.0 + self.tau_dtod * z())

    def _draw_gamma(self, ep, rng, gamma: float, gamma_dtod: float) -> None:
        shape = ep.shape[:-1]
        spread = rng.standard_normal(shape) if rng is not None else np.zeros(shape)
        g = np.maximum(gamma * (1.0 + gamma_dtod * spread), 0.0)
        ep[..., K.GAMMA_UP] = g
        ep[..., K.GAMMA_DOWN] = g


class Ideal(_PaperDevice):
    """Constant step: q_plus = 1 + c, q_minus = 1 - c (c = 0: the ideal symmetric device)."""

    kind: Literal["ideal"] = "ideal"

    def _code(self) -> int:
        return K.CONST

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)


class Linear(_PaperDevice):
    """Linear response (soft bounds): q_plus = (1 + c)(1 - w/tau), q_minus = (1 - c)(1 + w/tau).

    Symmetric point c * tau; F = 1 - c w/tau, G = w/tau - c (R1 Table 1, c_Lin).
    """

    kind: Literal["linear"] = "linear"

    def _code(self) -> int:
        return K.LINEAR

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)
        ep[..., K.GAMMA_UP] = 1.0 / ep[..., K.W_MAX]
        ep[..., K.GAMMA_DOWN] = 1.0 / ep[..., K.W_MIN]

    def symmetric_point(self) -> float:
        return self.c * self.tau


class Power(_PaperDevice):
    """Power response: q_plus = (1 + c)(1 - w/tau)^gamma, q_minus = (1 - c)(1 + w/tau)^gamma (R1 Table 1)."""

    kind: Literal["power"] = "power"
    gamma: float = Field(1.0, gt=0, description="exponent of the response (R1 uses 0.5 to 4)")
    gamma_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of gamma")

    def _code(self) -> int:
        return K.POWER

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 2.0  # distances to the bound measured in units of tau = span / 2
        return out

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)
        self._draw_gamma(ep, rng, self.gamma, self.gamma_dtod)

    def symmetric_point(self) -> float:
        # (1 + c)(1 - u)^g = (1 - c)(1 + u)^g  =>  u = (r - 1) / (r + 1),  r = ((1 + c) / (1 - c))^(1/g)
        r = ((1.0 + self.c) / (1.0 - self.c)) ** (1.0 / self.gamma)
        return self.tau * (r - 1.0) / (r + 1.0)


class Exponential(_PaperDevice):
    """Exponential response: q_plus = (1 + c)(exp(g(1 - w/tau)) - 1)/(exp(g) - 1), q_minus likewise with
    1 + w/tau and (1 - c) (R1 Table 1). Symmetric point 0 for c = 0, else found by bisection."""

    kind: Literal["exponential"] = "exponential"
    gamma: float = Field(1.0, gt=0, le=700, description="curvature g of the response (R1 uses 0.5 to 4; at most "
                                                        "700: expm1(g) overflows float64 above 709.8)")
    gamma_dtod: float = Field(0.0, ge=0, description="device-to-device relative std of gamma")

    def _code(self) -> int:
        return K.EXP_R1

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 2.0
        return out

    def _consts_of(self, ep: np.ndarray) -> np.ndarray:
        """consts[1 + k] = expm1(g) of direction k (0 up, 1 down) where all elements share g, else NaN: the
        mean step's denominator, which otherwise costs a second expm1 per step (an expected update of
        r1_exp_2 0.80-0.96 of the time with it, docs/performance.md)."""
        out = self._consts()
        for k, column in enumerate((K.GAMMA_UP, K.GAMMA_DOWN)):
            g = ep[..., column]
            shared = g.size > 0 and bool((g == g.flat[0]).all())
            out[1 + k] = K.expm1(float(g.flat[0])) if shared else np.nan
        return out

    def _fill(self, ep, rng) -> None:
        self._draw_common(ep, rng)
        self._draw_gamma(ep, rng, self.gamma, self.gamma_dtod)


# ---------------------------------------------------------------------------------------------------------
# aihwkit's pulsed families (names and equations of aihwkit 1.1.0; defaults of its PulsedDevice)
# ---------------------------------------------------------------------------------------------------------


class _AihwkitDevice(_Device):
    dw_min_dtod: float = Field(0.3, ge=0, lt=1, description="device-to-device relative std of the step size")
    dw_min_std: float = Field(0.3, ge=0, description="cycle-to-cycle std per pulse (relative to the step)")
    w_max: float = Field(0.6, description="mean upper bound (weight units)")
    w_min: float = Field(-0.6, description="mean lower bound (weight units)")
    w_max_dtod: float = Field(0.3, ge=0, description="device-to-device relative std of the upper bound")
    w_min_dtod: float = Field(0.3, ge=0, description="device-to-device relative std of the lower bound")
    up_down: float = Field(0.0, gt=-1, lt=1, description="mean up/down bias: > 0 shrinks down steps, "
                                                         "< 0 shrinks up steps (fraction of dw_min)")
    up_down_dtod: float = Field(0.01, ge=0, description="device-to-device std of the up/down bias")
    enforce_consistency: bool = Field(True, description="use |dw_up|, |dw_down| so steps keep their sign")

    @model_validator(mode="after")
    def _check_bounds(self):
        if not self.w_min < self.w_max:
            raise ValueError(f"w_min ({self.w_min}) must be below w_max ({self.w_max})")
        return self

    def _additive(self) -> bool:
        return False

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.w_min, self.w_max)

    def _fill(self, ep, rng) -> None:
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = 1.0 + self.dw_min_dtod * z()
        r = self.up_down_dtod * z()
        dw_up = (min(self.up_down, 0.0) + gain + r) * self.dw_min
        dw_down = (-max(self.up_down, 0.0) + gain - r) * self.dw_min
        if self.enforce_consistency:
            dw_up, dw_down = np.abs(dw_up), np.abs(dw_down)
        ep[..., K.DW_UP] = np.maximum(dw_up, 0.0)
        ep[..., K.DW_DOWN] = np.maximum(dw_down, 0.0)
        ep[..., K.W_MAX] = self.w_max * (1.0 + self.w_max_dtod * z())
        ep[..., K.W_MIN] = self.w_min * (1.0 + self.w_min_dtod * z())


class ConstantStep(_AihwkitDevice):
    """aihwkit ConstantStep: up + dw_up (1 + sigma xi), down - dw_down (1 + sigma xi)."""

    kind: Literal["ConstantStep"] = "ConstantStep"

    def _code(self) -> int:
        return K.CONST


class LinearStep(_AihwkitDevice):
    """aihwkit LinearStep: up + dw_up (1 - |gamma_up| w / w_ref_up), down - dw_down (1 - |gamma_down| w / w_ref_down).

    w_ref are the mean bounds (mean_bound_reference) or each element's own bounds; mult_noise False puts the
    noise on the constant part only (additive sigma * dw xi). Steps are clipped at zero.
    """

    kind: Literal["LinearStep"] = "LinearStep"
    gamma_up: float = Field(0.0, description="relative slope of the up step: 1 gives soft bounds")
    gamma_down: float = Field(0.0, description="relative slope of the down step")
    gamma_up_dtod: float = Field(0.05, ge=0, description="device-to-device std of gamma_up (relative)")
    gamma_down_dtod: float = Field(0.05, ge=0, description="device-to-device std of gamma_down (relative)")
    mean_bound_reference: bool = Field(True, description="slopes refer to the mean bounds, not each element's")
    mult_noise: bool = Field(True, description="multiplicative cycle noise (else on the constant part only)")

    def _code(self) -> int:
        return K.LINEAR

    def _additive(self) -> bool:
        return not self.mult_noise

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        g_up = np.abs(self.gamma_up * (1.0 + self.gamma_up_dtod * z()))
        g_dn = np.abs(self.gamma_down * (1.0 + self.gamma_down_dtod * z()))
        ref_up = self.w_max if self.mean_bound_reference else ep[..., K.W_MAX]
        ref_dn = self.w_min if self.mean_bound_reference else ep[..., K.W_MIN]
        ep[..., K.GAMMA_UP] = g_up / ref_up
        ep[..., K.GAMMA_DOWN] = g_dn / ref_dn


class SoftBounds(LinearStep):
    """aihwkit SoftBounds: up + dw_up (1 - w/b_max), down - dw_down (1 - w/b_min), each element's own bounds.

    Symmetric point (dw_up - dw_down) / (dw_up/b_max - dw_down/b_min) (AIHWKIT.md).
    """

    kind: Literal["SoftBounds"] = "SoftBounds"
    gamma_up: Literal[1.0] = Field(1.0, description="fixed at 1 (soft bounds)")
    gamma_down: Literal[1.0] = Field(1.0, description="fixed at 1 (soft bounds)")
    gamma_up_dtod: Literal[0.0] = Field(0.0, description="fixed at 0")
    gamma_down_dtod: Literal[0.0] = Field(0.0, description="fixed at 0")
    mean_bound_reference: Literal[False] = Field(False, description="fixed: own bounds")

    def symmetric_point(self) -> float:
        p = self.nominal().ep[0, 0]
        up, dn, hi, lo = p[K.DW_UP], p[K.DW_DOWN], p[K.W_MAX], p[K.W_MIN]
        return float((up - dn) / (up / hi - dn / lo))


class ExpStep(_AihwkitDevice):
    """aihwkit ExpStep: up + max(1 - A_up exp(gamma_up z), 0) dw_up, down - max(1 - A_down exp(-gamma_down z), 0)
    dw_down, with z = 2 a w / (b_max - b_min) + b. Defaults are aihwkit's (AIHWKIT.md)."""

    kind: Literal["ExpStep"] = "ExpStep"
    A_up: float = Field(0.00081, description="amplitude of the up non-linearity")
    A_down: float = Field(0.36833, description="amplitude of the down non-linearity")
    gamma_up: float = Field(12.44625, description="exponent of the up non-linearity")
    gamma_down: float = Field(12.78785, description="exponent of the down non-linearity")
    a: float = Field(0.244, description="slope of z in w")
    b: float = Field(0.2425, description="offset of z")

    @property
    def granularity(self) -> float:
        """The nominal down step at w = 0, (1 - max(up_down, 0)) dw_min max(1 - A_down e^(-gamma_down b), 0),
        or dw_min where that is 0 (aihwkit 1.1.0, rpu_expstep_device.h: its granularity takes the down step
        at zero only)."""
        shape = max(1.0 - self.A_down * np.exp(-self.gamma_down * self.b), 0.0)
        down = (1.0 - max(self.up_down, 0.0)) * self.dw_min * shape
        return float(down) if down > 0 else float(self.dw_min)

    def _code(self) -> int:
        return K.EXP_STEP

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[:4] = (self.A_up, self.A_down, self.a, self.b)
        return out

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        ep[..., K.GAMMA_UP] = self.gamma_up
        ep[..., K.GAMMA_DOWN] = self.gamma_down


class PowStep(_AihwkitDevice):
    """aihwkit PowStep: up + dw_up ((b_max - w)/r)^gamma_up, down - dw_down ((w - b_min)/r)^gamma_down,
    r = b_max - b_min.

    gamma = pow_gamma (1 + pow_gamma_dtod xi); gamma_up/down = gamma (1 +- (pow_up_down + pow_up_down_dtod xi)).
    """

    kind: Literal["PowStep"] = "PowStep"
    pow_gamma: float = Field(1.0, gt=0, description="exponent of the response")
    pow_gamma_dtod: float = Field(0.1, ge=0, description="device-to-device relative std of the exponent")
    pow_up_down: float = Field(0.0, gt=-1, lt=1, description="relative up/down split of the exponent")
    pow_up_down_dtod: float = Field(0.0, ge=0, description="device-to-device std of the exponent split")

    @property
    def granularity(self) -> float:
        """dw_min 0.5^pow_gamma: the mean step at the midpoint of the bounds (aihwkit 1.1.0,
        rpu_powstep_device.h), so a desired change of lr |x| |d| fires the pulses that move a midpoint
        element by that much."""
        return float(self.dw_min * 0.5 ** self.pow_gamma)

    def _code(self) -> int:
        return K.POWER

    def _consts(self) -> np.ndarray:
        out = np.zeros(8)
        out[0] = 1.0  # distances to the bound in units of r = b_max - b_min
        return out

    def _fill(self, ep, rng) -> None:
        super()._fill(ep, rng)
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        g = np.maximum(self.pow_gamma * (1.0 + self.pow_gamma_dtod * z()), 0.0)
        split = self.pow_up_down + self.pow_up_down_dtod * z()
        ep[..., K.GAMMA_UP] = np.maximum(g * (1.0 + split), 0.0)
        ep[..., K.GAMMA_DOWN] = np.maximum(g * (1.0 - split), 0.0)


class PiecewiseStep(_AihwkitDevice):
    """aihwkit PiecewiseStep: the steps are dw_up, dw_down times a piecewise-linear function given at N+1
    equally spaced nodes over [b_min, b_max]."""

    kind: Literal["PiecewiseStep"] = "PiecewiseStep"
    piecewise_up: list[float] = Field([1.0, 1.0], min_length=2, description="relative up step at the nodes")
    piecewise_down: list[float] = Field([1.0, 1.0], min_length=2, description="relative down step at the nodes")

    @model_validator(mode="after")
    def _check_nodes(self):
        if len(self.piecewise_up) != len(self.piecewise_down):
            raise ValueError("piecewise_up and piecewise_down need the same number of nodes")
        if min(self.piecewise_up + self.piecewise_down) < 0:
            raise ValueError("piecewise nodes must be >= 0")
        return self

    @property
    def granularity(self) -> float:
        """dw_min times the up node in the middle, piecewise_up[N // 2] (aihwkit 1.1.0,
        rpu_piecewisestep_device.h); dw_min where that node is 0."""
        middle = self.piecewise_up[len(self.piecewise_up) // 2]
        return float(self.dw_min * middle) if middle > 0 else float(self.dw_min)

    def _code(self) -> int:
        return K.TABLE

    def _table(self):
        n = len(self.piecewise_up)
        return np.linspace(0.0, 1.0, n), np.array(self.piecewise_up, float), np.array(self.piecewise_down, float)


# ---------------------------------------------------------------------------------------------------------
# measured response on a grid
# ---------------------------------------------------------------------------------------------------------


class Tabulated(_Device):
    """q_plus and q_minus measured at weights `w` (increasing), interpolated linearly, constant beyond the
    grid. Element spread stretches the table with the element's bounds."""

    kind: Literal["tabulated"] = "tabulated"
    w: list[float] = Field(..., min_length=2, description="grid of weights, strictly increasing (weight units)")
    q_plus_values: list[float] = Field(..., min_length=2, description="q_plus at the grid points (>= 0)")
    q_minus_values: list[float] = Field(..., min_length=2, description="q_minus at the grid points (>= 0)")
    w_min: float | None = Field(None, description="lower bound; default the first grid point")
    w_max: float | None = Field(None, description="upper bound; default the last grid point")
    w_bound_dtod: float = Field(0.0, ge=0, lt=1, description="device-to-device relative std of each bound")
    up_down_dtod: float = Field(0.0, ge=0, description="device-to-device std of the up/down split")
    noise: Literal["additive", "multiplicative"] = Field("additive", description="form of the cycle noise")

    @model_validator(mode="after")
    def _check_table(self):
        n = len(self.w)
        if len(self.q_plus_values) != n or len(self.q_minus_values) != n:
            raise ValueError(f"w, q_plus_values and q_minus_values need the same length (w has {n})")
        if np.any(np.diff(self.w) <= 0):
            raise ValueError("w must be strictly increasing")
        if min(self.q_plus_values + self.q_minus_values) < 0:
            raise ValueError("response values must be >= 0")
        lo, hi = self.bounds
        if not lo < hi:
            raise ValueError(f"w_min ({lo}) must be below w_max ({hi})")
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        lo = self.w[0] if self.w_min is None else self.w_min
        hi = self.w[-1] if self.w_max is None else self.w_max
        return (float(lo), float(hi))

    def _code(self) -> int:
        return K.TABLE

    def _additive(self) -> bool:
        return self.noise == "additive"

    def _table(self):
        lo, hi = self.bounds
        grid = (np.array(self.w, float) - lo) / (hi - lo)
        return grid, np.array(self.q_plus_values, float), np.array(self.q_minus_values, float)

    def _fill(self, ep, rng) -> None:
        shape = ep.shape[:-1]
        z = (lambda: rng.standard_normal(shape)) if rng is not None else (lambda: np.zeros(shape))
        gain = np.maximum(1.0 + self.dw_min_dtod * z(), 0.0)
        r = self.up_down_dtod * z()
        ep[..., K.DW_UP] = self.dw_min * np.maximum(gain + r, 0.0)
        ep[..., K.DW_DOWN] = self.dw_min * np.maximum(gain - r, 0.0)
        lo, hi = self.bounds
        ep[..., K.W_MAX] = hi + abs(hi) * self.w_bound_dtod * z()
        ep[..., K.W_MIN] = lo - abs(lo) * self.w_bound_dtod * z()


DeviceConfig = Annotated[
    Union[Ideal, Linear, Power, Exponential, ConstantStep, LinearStep, SoftBounds, ExpStep, PowStep,
          PiecewiseStep, Tabulated],
    Field(discriminator="kind"),
]
DEVICE_KINDS = ("ideal", "linear", "power", "exponential", "ConstantStep", "LinearStep", "SoftBounds",
                "ExpStep", "PowStep", "PiecewiseStep", "tabulated")
_ADAPTER = TypeAdapter(DeviceConfig)


def parse_device(data: dict, where: str = "device") -> DeviceConfig:
    """Validate a device config dict (with its `kind`); errors name the field, e.g. `device.tau`."""
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as err:
        raise ConfigError(f"invalid device config:\n{format_validation_error(err, where)}") from None


def device_schema() -> dict:
    """JSON schema of the device config union."""
    return _ADAPTER.json_schema()
