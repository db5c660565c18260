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


GPU_ATOL = 1e-4
"""How far a weight or a read on a real GPU may lie from the CPU's: its compiler fuses a * b + c (the noise factor
1 + sigma xi, the step w + s, the normals' polynomials) and its exp, log, expm1 and pow are libdevice's, each a
few float32 ulps (2.4e-7 at |w| ~ 1.25) per pulse, over the at most a hundred pulses an element gets in these
tests."""


def assert_twins(got, want) -> None:
    """Bit for bit under the simulator (the same compiled functions on the CPU); within GPU_ATOL on a GPU."""
    got, want = (v.cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v) for v in (got, want))
    if runtime.simulated():
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=GPU_ATOL)
