"""The argument bundles of the devices' Numba kernels: an array's per-element parameters and the settings of
an update, each one typed named tuple (one argument) instead of their fields one by one.

Numba types a named tuple by its fields' types, so a kernel taking a bundle compiles once per combination of
field types, as it did with the fields as separate arguments; unpacked at the top of a kernel the fields are
the same locals as arguments, and the generated loops are those of the separate arguments.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class ElementKernelParams(NamedTuple):
    """An array's drawn element parameters as the kernels read them (devices.device_base.ElementParams)."""

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
