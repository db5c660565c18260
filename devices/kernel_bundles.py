"""The argument bundles of the devices' Numba kernels: an array's per-element parameters and the settings of
an update, each one argument instead of their fields one by one.

A named tuple here gives a bundle's fields their order and names. Python passes a bundle as a plain tuple of
those fields (ElementParams.kernel, update_settings): Numba's dispatcher types a plain tuple in its C code and
a named tuple in Python, 1 against 5 us a call for an array's handle (devices.array_update), which doubled the
fixed cost of an array's update call. A kernel unpacks a bundle at its top (`ep, code, ... = params`) or names
its fields with the named tuple (`ElementKernelParams(*params)`): the fields are then the same locals as
separate arguments, and the generated loops are those of separate arguments.
"""

from typing import NamedTuple

import numpy as np


class ElementKernelParams(NamedTuple):
    """An array's drawn element parameters as the kernels read them (devices.device_base.ElementParams.kernel)."""

    ep: np.ndarray  # (out, in, N_ELEMENT_PARAMS): columns DW_UP, DW_DOWN, W_MAX, W_MIN, GAMMA_UP, GAMMA_DOWN
    code: int  # the response family (devices.response_step)
    consts: np.ndarray  # family-wide constants
    grid: np.ndarray  # response table of the TABLE family: weights, up steps, down steps
    tab_up: np.ndarray
    tab_dn: np.ndarray
    sigma: float  # cycle-to-cycle noise std
    additive: bool  # noise sigma dw xi (True) or step (1 + sigma xi) (False)


class UpdateSettings(NamedTuple):
    """The settings of one update W -= lr d^T x (devices.update.UpdateConfig, with the array's granularity)."""

    lr: float
    granularity: float  # weight change one pulse counts for (DeviceBase.granularity)
    desired_bl: int  # longest pulse train (pulses per sample)
    update_management: bool
    bl_management: bool


def update_settings(lr: float, granularity: float, cfg) -> tuple:
    """The UpdateSettings of an update W -= lr d^T x with the update config `cfg` (devices.update.UpdateConfig)
    on an array of the given granularity, as the plain tuple Python passes to the kernels."""
    return (
        float(lr),
        float(granularity),
        int(cfg.desired_bl),
        bool(cfg.update_management),
        bool(cfg.update_bl_management),
    )
