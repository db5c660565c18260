"""The expected update on a GPU: the twin of devices.expected_update.expected_update_kernel, one thread per row.

A row draws its stochastic rounding and its noise from its own stream (seed, counter, row), in column order
and as many draws as the row needs (a ziggurat normal takes a variable number), so a row is one thread and
runs the CPU kernel's row function, devices.expected_update.expected_update_row.
"""

from __future__ import annotations

import torch
from numba import cuda

from aimc.devices.expected_update import expected_update_row
from aimc.devices.gpu.runtime import launch


@cuda.jit
def expected_update_kernel(w, dw, granularity, params, seed, counter, pulsed, fired):
    """Thread i: row i of the expected update (expected_update_row), its pulses into fired[i]."""
    i = cuda.grid(1)
    if i >= w.shape[0]:
        return
    ep, code, consts, grid, tab_up, tab_dn, sigma, additive = params
    fired[i] = expected_update_row(
        w, dw, granularity, ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter, pulsed, i
    )


def expected_update(
    w: torch.Tensor,
    dw: torch.Tensor,
    granularity: float,
    params: tuple,
    seed: int,
    counter: int,
    pulsed: torch.Tensor,
) -> int:
    """devices.expected_update.expected_update_kernel on tensors: w (out, in) float32 in place, dw (out, in)
    float64, params the ElementKernelParams with tensors for arrays, pulsed the set (uint64, devices.pulsed_set;
    without rows: no marking) the moved elements are added to. Returns pulses fired."""
    fired = torch.empty(w.shape[0], dtype=torch.int64, device=w.device)
    launch(
        expected_update_kernel,
        w.shape[0],
        w,
        dw,
        float(granularity),
        params,
        int(seed),
        int(counter),
        pulsed,
        fired,
    )
    return int(fired.sum())
