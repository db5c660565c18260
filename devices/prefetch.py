"""Software prefetch for the Numba kernels: ask the CPU to bring a cache line in before it is needed.

A small pulsed update fires a few pulses per row at scattered elements; each pulse reads the element's
weight and parameters from arrays far larger than the caches, and without a hint the CPU has only a few
of those misses in flight (docs/performance.md). `prefetch(address)` emits LLVM's `llvm.prefetch` (read,
high locality, data); it never faults, whatever the address.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, address):
    """Prefetch the cache line holding byte `address` (an integer, e.g. `a.ctypes.data + offset`)."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        ptr = builder.inttoptr(context.cast(builder, args[0], signature.args[0], types.uintp), i8p)
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(address), codegen
