"""Shared pieces of the GPU kernels' tests: skip conditions and the tensors a kernel test starts from."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aimc.devices.gpu import runtime


def _nvvm() -> bool:
    """True where numba-cuda can compile PTX here (its NVVM library is installed)."""
    try:
        from numba import cuda

        @cuda.jit
        def probe(a):
            a[0] = 1.0

        runtime.ptx(probe, np.zeros(1, np.float32))
    except Exception:
        return False
    return True


needs_kernels = pytest.mark.skipif(not runtime.available(), reason="no GPU and no CUDA simulator")
"""Tests that launch kernels: on a GPU, or under NUMBA_ENABLE_CUDASIM=1."""

needs_ptx = pytest.mark.skipif(runtime.simulated() or not _nvvm(), reason="the simulator is on, or no NVVM")
"""Tests that compile kernels to PTX (runtime.ptx), without the simulator."""

DEVICE = "cuda" if torch.cuda.is_available() and not runtime.simulated() else "cpu"
"""Where the GPU path's tensors live in these tests: the GPU, or the CPU under the simulator."""


def on_device(a: np.ndarray) -> torch.Tensor:
    """A copy of a as a tensor on DEVICE."""
    return runtime.to_device(a, DEVICE)
