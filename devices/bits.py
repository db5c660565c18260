"""Bit scans for the Numba kernels.

`lowest_bit(v)` is the index of the lowest set bit of an unsigned word, as LLVM's `cttz` intrinsic: one
`tzcnt` (or `bsf`) instruction on x86, where a scan by arithmetic takes a dozen. The pulsed update walks
the set bits of every pulse train and of every row's mask of firing samples with it.

`float_bits(v)` and `bits_float(b)` reinterpret a float32 as its 32 bits and back (LLVM's `bitcast`: no
instruction in a vector loop), for the exponent and sign arithmetic of devices.normals.
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


@intrinsic
def float_bits(typingctx, v):
    """The 32 bits of the float32 v, as uint32."""
    if v != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(v), codegen


@intrinsic
def bits_float(typingctx, b):
    """The float32 whose bits are the low 32 bits of the integer b (Numba widens 32-bit arithmetic, so b
    may arrive as a 64-bit integer)."""
    if not isinstance(b, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        width = signature.args[0].bitwidth
        i32 = ir.IntType(32)
        low = args[0] if width == 32 else (builder.trunc(args[0], i32) if width > 32 else builder.zext(args[0], i32))
        return builder.bitcast(low, ir.FloatType())

    return types.float32(b), codegen
