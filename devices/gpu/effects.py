"""The device effects on a GPU: the twins of devices.effects.redraw_kernel (write noise, diffusion, reset) and
decay_kernel (the decay of post_update_step), as devices.array.ConductanceArray calls them.

The redraw gives the k-th chosen element of a row normal k of the row's stream (devices.normals: a normal
depends only on the stream's key and its index), so one thread takes one block of BLOCK normals of a row:
it fills them (devices.normals.fill_normals) into its slice of a scratch tensor and redraws the elements of
ranks BLOCK b .. BLOCK b + BLOCK - 1 of the row. The decay is one thread per element.
"""

from __future__ import annotations

import torch
from numba import cuda, njit, types, uint64
from numba.extending import intrinsic

from aimc.devices.bits import lowest_bit
from aimc.devices.effects import redraw_element, row_key
from aimc.devices.gpu.runtime import launch
from aimc.devices.normals import BLOCK, fill_normals


@intrinsic
def bit_count(typingctx, v):
    """Number (int64) of set bits of the uint64 v (LLVM's ctpop: one popc instruction on a GPU)."""
    if v != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return types.int64(v), codegen


@njit(cache=True)
def redraw_block(w, base, pulsed, scale, lo, hi, clip, seed, counter, stream, i, b, xi) -> None:
    """The chosen elements of ranks BLOCK b .. BLOCK b + BLOCK - 1 of row i (in column order; every element
    for a set without rows) redrawn with normals BLOCK b .. of the row's stream, filled into xi[BLOCK b:]."""
    cols = w.shape[1]
    first = BLOCK * b
    if pulsed.shape[0] == 0:
        fill_normals(xi, first, BLOCK, row_key(seed, counter, stream, i), first)
        for j in range(first, min(first + BLOCK, cols)):
            redraw_element(w, base, scale, lo, hi, clip, i, j, xi[j])
        return
    rank = 0
    for k in range(pulsed.shape[1]):
        word = pulsed[i, k]
        ones = bit_count(word)
        if rank + ones <= first:
            rank += ones
            continue
        while word != uint64(0) and rank < first + BLOCK:
            if rank == first:
                fill_normals(xi, first, BLOCK, row_key(seed, counter, stream, i), first)
            if rank >= first:
                redraw_element(w, base, scale, lo, hi, clip, i, 64 * k + lowest_bit(word), xi[rank])
            word &= word - uint64(1)
            rank += 1
        if rank >= first + BLOCK:
            return


@cuda.jit
def redraw_kernel(w, base, pulsed, scale, lo, hi, clip, seed, counter, stream, xi):
    """Thread t: block t % blocks of row t // blocks (redraw_block), xi the (out, blocks BLOCK) scratch."""
    t = cuda.grid(1)
    blocks = xi.shape[1] // BLOCK
    if t >= w.shape[0] * blocks:
        return
    i = t // blocks
    redraw_block(w, base, pulsed, scale, lo, hi, clip, seed, counter, stream, i, t - i * blocks, xi[i])


def redraw(
    w: torch.Tensor,
    base: torch.Tensor,
    pulsed: torch.Tensor,
    scale: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    clip: bool,
    seed: int,
    counter: int,
    stream: int,
) -> None:
    """devices.effects.redraw_kernel on tensors: w[i, j] = base[i, j] + scale[i, j] xi, clipped to [lo, hi]
    where `clip`, for the elements of the set `pulsed` (uint64, devices.pulsed_set; every element for a set
    without rows), with the CPU kernel's normals. Tensors (out, in) float32; scale, lo, hi may be expanded."""
    rows, cols = w.shape
    blocks = (cols + BLOCK - 1) // BLOCK
    xi = torch.empty((rows, blocks * BLOCK), dtype=torch.float32, device=w.device)
    launch(
        redraw_kernel,
        rows * blocks,
        w,
        base,
        pulsed,
        scale,
        lo,
        hi,
        bool(clip),
        int(seed),
        int(counter),
        int(stream),
        xi,
    )


@cuda.jit
def decay_kernel(w, bias, scale, lo, hi, clip):
    """Thread t: element (t // in, t % in) of decay (float32 arithmetic, as devices.effects.decay_kernel)."""
    t = cuda.grid(1)
    rows, cols = w.shape
    if t >= rows * cols:
        return
    i = t // cols
    j = t - i * cols
    b = bias[i, j]
    v = b + (w[i, j] - b) * scale[i, j]
    if clip:
        v = min(max(v, lo[i, j]), hi[i, j])
    w[i, j] = v


def decay(
    w: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, clip: bool
) -> None:
    """devices.effects.decay_kernel on tensors: w <- bias + (w - bias) scale per element, clipped to [lo, hi]
    where `clip`; tensors (out, in) float32, bias, scale, lo, hi may be expanded."""
    launch(decay_kernel, w.numel(), w, bias, scale, lo, hi, bool(clip))
