"""Shared pieces of the GPU kernels' tests: skip conditions and the tensors a kernel test starts from."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import tempfile
from pathlib import Path

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


def _ptxas() -> str | None:
    """The PTX assembler of the nvidia-cuda-nvcc wheel (numba-cuda's cu12 extra), which also holds the NVVM
    that wrote the PTX, so the two agree on the PTX version; None where that wheel is absent."""
    spec = importlib.util.find_spec("nvidia.cuda_nvcc")
    for folder in spec.submodule_search_locations if spec else ():
        if (Path(folder) / "bin" / "ptxas").is_file():
            return str(Path(folder) / "bin" / "ptxas")
    return None


def gpu_code(kernel, *args) -> str:
    """The PTX of a cuda.jit kernel (runtime.ptx), also assembled by ptxas for the same capability where the
    wheel with ptxas is installed, as a GPU's driver does before the first launch: an AssertionError with
    ptxas's message if it does not assemble, or if the kernel spills registers to local memory."""
    code = runtime.ptx(kernel, *args)
    ptxas = _ptxas()
    if ptxas is None:
        return code
    major, minor = runtime.PTX_CAPABILITY
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(code)
        done = subprocess.run(
            [ptxas, f"-arch=sm_{major}{minor}", "-v", str(src), "-o", str(Path(tmp) / "kernel.cubin")],
            capture_output=True,
            text=True,
        )
    report = done.stdout + done.stderr
    assert done.returncode == 0, f"ptxas rejects the PTX of {kernel.__name__}: {report[-2000:]}"
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", report)]
    assert spills, f"ptxas gave no spill count for {kernel.__name__}: {report[-2000:]}"
    assert max(spills) == 0, f"{kernel.__name__} spills registers: {report[-2000:]}"
    return code


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
