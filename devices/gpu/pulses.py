"""Pulses fired one at a time into chosen elements on a GPU: the twins of devices.pulses.pulse_kernel and
pulse_columns_kernel (column transfers, threshold pulses, programming), one thread per row.

A row draws the cycle-to-cycle noise of its pulses from its own stream (seed, counter, row), element after
element in column order, so a row is one thread; a pulse is devices.pulses.noisy_pulse in float32, as on
the CPU.
"""

from __future__ import annotations

import torch
from numba import cuda

from aimc.devices.gpu.runtime import launch
from aimc.devices.pulses import row_pulses


@cuda.jit
def pulse_kernel(w, counts, cols, params, seed, counter, fired):
    """Thread i: the pulses of row i (row_pulses), their number into fired[i]."""
    i = cuda.grid(1)
    if i >= w.shape[0]:
        return
    ep, code, consts, grid, tab_up, tab_dn, sigma, additive = params
    fired[i] = row_pulses(w, counts, cols, ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter, i)


def pulse(w: torch.Tensor, counts: torch.Tensor, params: tuple, seed: int, counter: int) -> int:
    """devices.pulses.pulse_kernel on tensors: counts[i, j] (int64) signed pulses into every element of w
    (out, in) float32, in place; params the ElementKernelParams with tensors for arrays. Returns pulses fired."""
    cols = torch.arange(w.shape[1], dtype=torch.int64, device=w.device)
    return pulse_columns(w, counts, cols, params, seed, counter)


def pulse_columns(
    w: torch.Tensor, counts: torch.Tensor, cols: torch.Tensor, params: tuple, seed: int, counter: int
) -> int:
    """devices.pulses.pulse_columns_kernel on tensors: pulse where only the columns `cols` (int64, increasing)
    of counts may be nonzero (the same weights). Returns pulses fired."""
    fired = torch.empty(w.shape[0], dtype=torch.int64, device=w.device)
    launch(pulse_kernel, w.shape[0], w, counts, cols, params, int(seed), int(counter), fired)
    return int(fired.sum())
