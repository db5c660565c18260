"""The CPU's @njit functions as GPU kernels call them.

On a GPU (and when a kernel compiles to PTX) a kernel calls an @njit function of aimc.devices as it is:
Numba compiles it for the GPU target. Under Numba's CUDA simulator a kernel runs as Python, its arrays
wrapped in the simulator's array classes, which a compiled CPU function does not take; `kernel_callable`
gives such a kernel the function with those arrays unwrapped to the numpy arrays they hold.
"""

from __future__ import annotations

from aimc.devices.gpu.runtime import simulated


def kernel_callable(f):
    """f for a kernel to call: f itself, or under the simulator a wrapper that passes f the numpy arrays
    behind the simulator's arrays (also inside tuples)."""
    if not simulated():
        return f
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    def unwrap(a):
        if isinstance(a, FakeWithinKernelCUDAArray):
            a = a._item
        if isinstance(a, FakeCUDAArray):
            return a._ary
        if isinstance(a, tuple):
            return tuple(unwrap(v) for v in a)
        return a

    def call(*args):
        return f(*(unwrap(a) for a in args))

    return call
