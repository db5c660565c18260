"""The crossbar's multiply-accumulate: y = W xq of a batch of DAC outputs xq, in float32, each output summed by one
thread in one order whatever the thread count (devices.periphery's reads)."""

from __future__ import annotations

import numpy as np
from numba import get_thread_id, njit, prange

from aimc.devices.converters import dac_input, dac_rows
from aimc.devices.threads import kernel_thread_count

SAMPLE_CHUNK = 64
"""Samples per chunk of dac_product: the DAC of 64 input rows (up to a few thousand floats each) stays in L2
while every block of outputs reads it. Against the DAC of the whole batch followed by one pass over it per
block of outputs (32768 rows of 576 inputs, 64 outputs: the first stage of a CIFAR ResNet-18 at batch 32),
2 threads on a Zen 4, 2026-12-06: 83.6 ms (DAC 45, product 38), 24.9 ms in chunks."""


@njit(cache=True, inline="always")
def _blocks(n, threads, width):
    """(number of blocks, block length) splitting n items for a parallel loop: blocks of `width` (an
    unrolled kernel's) where there are enough for every thread, else one block per thread."""
    n_blocks = max(min(n, threads), (n + width - 1) // width)
    return n_blocks, (n + n_blocks - 1) // n_blocks


@njit(cache=True, inline="always")
def _accumulate_rows(mat, xq, y, b, stop):
    """y[b:stop] += xq[b:stop] @ mat for mat (in, out), two samples per pass over mat's rows (each row
    loaded once for both; four were slower for rows of 400 and more, measured on a Zen 4); every output is
    summed over the rows in order, as one sample at a time."""
    while b + 2 <= stop:
        y0, y1 = y[b], y[b + 1]
        x0, x1 = xq[b], xq[b + 1]
        for k in range(mat.shape[0]):
            c0, c1 = x0[k], x1[k]
            row = mat[k]
            for o in range(mat.shape[1]):
                r = row[o]
                y0[o] += c0 * r
                y1[o] += c1 * r
        b += 2
    if b < stop:
        yb, xb = y[b], xq[b]
        for k in range(mat.shape[0]):
            c = xb[k]
            row = mat[k]
            for o in range(mat.shape[1]):
                yb[o] += c * row[o]


@njit(cache=True, inline="always")
def _dot_rows(mat, xq, y, o, stop):
    """y[:, o:stop] = xq @ mat[o:stop].T for mat (out, in), four outputs per pass over a sample's inputs
    (each input loaded once for the four); every output is one dot product, as one output at a time."""
    while o + 4 <= stop:
        r0, r1, r2, r3 = mat[o], mat[o + 1], mat[o + 2], mat[o + 3]
        for b in range(xq.shape[0]):
            xb = xq[b]
            a0 = a1 = a2 = a3 = np.float32(0.0)
            for k in range(mat.shape[1]):
                v = xb[k]
                a0 += v * r0[k]
                a1 += v * r1[k]
                a2 += v * r2[k]
                a3 += v * r3[k]
            y[b, o], y[b, o + 1], y[b, o + 2], y[b, o + 3] = a0, a1, a2, a3
        o += 4
    for i in range(o, stop):
        row = mat[i]
        for b in range(xq.shape[0]):
            xb = xq[b]
            acc = np.float32(0.0)
            for k in range(mat.shape[1]):
                acc += xb[k] * row[k]
            y[b, i] = acc


@njit(cache=True, parallel=True, fastmath={"reassoc", "contract"})
def product(mat, transposed, xq, y) -> None:
    """The crossbar's multiply-accumulate in float32 into y (batch, out), zero on entry: y = xq @ mat.T
    for mat (out, in), one dot product per output, four outputs per pass over a sample's inputs (parallel over
    blocks of outputs); transposed: y = xq @ mat for mat (in, out), the rows of mat accumulated per sample,
    two samples per pass over mat (parallel over blocks of samples); `_blocks`. Each output is summed by one
    thread in one order (reassociated so that it vectorizes) whatever the blocks, so the result does not
    depend on the thread count. (Callers allocate: in a parallel build an allocation is a parallel launch of
    its own.)"""
    n = xq.shape[0] if transposed else mat.shape[0]
    n_blocks, length = _blocks(n, kernel_thread_count(), 2 if transposed else 4)
    for blk in prange(n_blocks):
        start = blk * length
        stop = min(start + length, n)
        if transposed:
            _accumulate_rows(mat, xq, y, start, stop)
        else:
            _dot_rows(mat, xq, y, start, stop)


@njit(cache=True, parallel=True, fastmath={"reassoc", "contract"})
def dac_product(mat, transposed, x, scale, bound, bits, y) -> None:
    """product(mat, transposed, dac_input(x, bound, bits, scale), y), the same floats: for a batch of at
    least SAMPLE_CHUNK untransposed samples per thread, chunk by chunk of samples in parallel, each chunk's
    DAC (dac_rows) into a buffer of its thread that stays in cache and read there by every block of outputs;
    otherwise the DAC of the whole batch, then product."""
    threads = kernel_thread_count()
    batch = x.shape[0]
    n_chunks = (batch + SAMPLE_CHUNK - 1) // SAMPLE_CHUNK
    if transposed or n_chunks < threads:
        product(mat, transposed, dac_input(x, bound, bits, scale), y)
        return
    n = mat.shape[0]
    n_blocks, length = _blocks(n, threads, 4)
    buffers = np.empty((threads, SAMPLE_CHUNK, x.shape[1]), np.float32)
    for c in prange(n_chunks):
        first = c * SAMPLE_CHUNK
        stop = min(first + SAMPLE_CHUNK, batch)
        xq = buffers[get_thread_id()][: stop - first]
        dac_rows(x, first, stop, bound, bits, scale, xq)
        for blk in range(n_blocks):
            _dot_rows(mat, xq, y[first:stop], blk * length, min(blk * length + length, n))
