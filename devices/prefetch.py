"""Software prefetch for the Numba kernels: ask the CPU to bring a cache line in before it is needed.

A small pulsed update fires a few pulses per row at scattered elements; each pulse reads the element's
weight and parameters from arrays far larger than the caches, and without a hint the CPU has only a few
of those misses in flight (docs/performance.md). `prefetch(a, i, j)` emits LLVM's `llvm.prefetch` (read,
high locality, data) for the element a[i, j] (a[i, j, 0, ...] for arrays of more dimensions); a prefetch
never faults and changes no result.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

PREFETCH_PULSES = 32
"""The coincidence stage (devices.coincidences) prefetches the weights and parameters of a slot's list of at most
PREFETCH_PULSES elements before it fires them, and the write-noise redraw (devices.pulsed_redraw) the apparent
weights of a row's at most PREFETCH_PULSES pulsed elements: a small update fires a few pulses per row at
scattered elements of arrays larger than the caches (512 x 512 SoftBounds: 1 MB of weights, 6.3 MB of float32
parameters), and the hint puts their cache misses in flight together. Longer lists (large updates) touch most
of the row, which stays in cache: there the hint only costs instructions."""


@intrinsic
def prefetch(typingctx, a, i, j):
    """Prefetch the cache line of a[i, j] (no bounds check: a hint only)."""
    if not (
        isinstance(a, types.Array) and a.ndim >= 2 and isinstance(i, types.Integer) and isinstance(j, types.Integer)
    ):
        return None

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        arr = context.make_array(array_type)(context, builder, value=args[0])
        index = [context.cast(builder, v, t, types.intp) for v, t in zip(args[1:], signature.args[1:])]
        index += [context.get_constant(types.intp, 0)] * (array_type.ndim - 2)
        ptr = cgutils.get_item_pointer2(
            context,
            builder,
            data=arr.data,
            shape=cgutils.unpack_tuple(builder, arr.shape),
            strides=cgutils.unpack_tuple(builder, arr.strides),
            layout=array_type.layout,
            inds=index,
        )
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        # declare_intrinsic mangles the name for the pointer type of this llvmlite (llvm.prefetch.p0i8; newer
        # LLVMs upgrade it to the opaque-pointer llvm.prefetch.p0)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", [i8p], ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        )
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(a, i, j), codegen
