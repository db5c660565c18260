"""How the GPU kernels get their arrays and their launch: torch tensors without copies, one launch shape.

A kernel takes a torch CUDA tensor through its `__cuda_array_interface__` (numba.cuda.as_cuda_array: no
copy) and runs on torch's current stream, so kernels and torch operations are ordered as torch orders its
own. Under Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, the tests without a GPU) the kernels run on the
CPU and take CPU tensors as numpy views: the same code paths on the same data.
"""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import numpy as np
import torch
from numba import config, cuda, typeof
from numba.cuda.simulator.args import ArgHint

THREADS = 128
"""Threads per block of a one-dimensional launch (a multiple of the 32-thread warp)."""

PTX_CAPABILITY = (9, 0)
"""The compute capability compile_ptx targets in the tests (Hopper: H100, H200)."""


def simulated() -> bool:
    """True where Numba's CUDA simulator stands in for a GPU (NUMBA_ENABLE_CUDASIM=1)."""
    return bool(config.ENABLE_CUDASIM)


def available() -> bool:
    """True where GPU kernels can run: a CUDA GPU torch can use, or the simulator."""
    return simulated() or torch.cuda.is_available()


def kernel_array(t: torch.Tensor):
    """The array a kernel takes for tensor t, sharing its memory: a CUDA tensor's device array, or under the
    simulator a CPU tensor's numpy view. Raises ValueError for a CPU tensor on a real GPU path."""
    t = t.detach()
    if t.is_cuda:
        return cuda.as_cuda_array(t)
    if simulated():
        return t.numpy()
    raise ValueError(f"a GPU kernel got a tensor on {t.device}: move the model with .to('cuda')")


def kernel_args(*args) -> tuple:
    """args with every torch tensor (also inside tuples, such as a parameter bundle) replaced by its
    kernel_array; other values as they are."""
    return tuple(
        kernel_array(a) if isinstance(a, torch.Tensor) else kernel_args(*a) if isinstance(a, tuple) else a for a in args
    )


def launch(kernel, n: int, *args) -> None:
    """Run `kernel` over n threads (blocks of THREADS; a thread with cuda.grid(1) >= n must return at once)
    on torch's current stream; tensors in args are passed by kernel_args."""
    if n <= 0:
        return
    # the simulator runs each thread of a block as a Python thread: no more than n of them
    threads = min(n, THREADS) if simulated() else THREADS
    blocks = (n + threads - 1) // threads
    if simulated():
        kernel[blocks, threads](*(_Shared(a) if isinstance(a, np.ndarray) else a for a in kernel_args(*args)))
        return
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    kernel[blocks, THREADS, stream](*kernel_args(*args))


class _Shared(ArgHint):
    """A numpy array the simulator hands to the kernel as it is, not as a copy wrapped in its own array type:
    the kernel may then pass it to the @njit functions it calls (the simulator runs them compiled for the
    CPU, which takes numpy arrays only), and two arguments that share memory (w as its own base) stay one."""

    def to_device(self, retr, stream=0):
        return self.value


def to_device(a: np.ndarray | torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """A tensor on `device` holding a copy of a (numpy array or tensor), dtype kept."""
    return torch.from_numpy(np.array(a)).to(device) if isinstance(a, np.ndarray) else a.to(device).clone()


def ptx(kernel, *args) -> str:
    """The PTX of a cuda.jit `kernel` for arguments like args (numpy arrays and scalars, typed as Numba
    types them), compiled for PTX_CAPABILITY without a GPU (needs NVVM: numba-cuda's cu12 extra).
    A kernel that does not compile for the GPU raises here, on a machine without one. The @njit functions
    the kernel calls compile for the GPU of the current context, which a machine without one lacks: they
    compile for PTX_CAPABILITY too."""
    from numba.cuda import dispatcher

    target = SimpleNamespace(compute_capability=PTX_CAPABILITY)
    with mock.patch.object(dispatcher, "get_current_device", lambda: target):  # the @njit functions it calls
        code, _ = cuda.compile_ptx(kernel.py_func, tuple(typeof(a) for a in args), cc=PTX_CAPABILITY)
    return code
