"""Bit scans for the Numba kernels.

`lowest_bit(v)` is the index of the lowest set bit of an unsigned word, as LLVM's `cttz` intrinsic: one
`tzcnt` (or `bsf`) instruction on x86, where a scan by arithmetic takes a dozen. The pulsed update walks
the set bits of every pulse train and of every row's mask of firing samples with it.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def lowest_bit(typingctx, v):
    """Index (int64) of the lowest set bit of the unsigned integer v; the bit width of v where v = 0."""
    if not (isinstance(v, types.Integer) and not v.signed):
        return None

    def codegen(context, builder, signature, args):
        count = builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))  # flag 0: defined at v = 0
        return builder.zext(count, ir.IntType(64)) if signature.args[0].bitwidth < 64 else count

    return types.int64(v), codegen
