"""One-hot column reads on a GPU, as the transfer algorithms read an array's columns: the twin of
devices.column_read.read_column, which a CUDA kernel calls as it is (Numba compiles it for the GPU).

The reads of a tile's stream follow one another: a read takes one stream counter per attempt, and bound
management's re-reads of a saturated column take more, so a column's counter depends on every read before
it. `column_reads_kernel` therefore reads the columns in order on one thread, each read's output noise drawn
in order over its outputs (as the CPU draws it), and returns the CPU's numbers bit for bit.
"""

from __future__ import annotations

import torch
from numba import cuda

from aimc.devices.column_read import read_column
from aimc.devices.gpu.runtime import launch


@cuda.jit
def column_reads_kernel(w, reference, cols, reader, values, out):
    """For m in order: values[m] = w[:, cols[m]] - reference[:, cols[m]] (float32), out[m] = its read
    (read_column: one-hot input, the reader's periphery and stream; its counts advance in place). One
    thread."""
    if cuda.grid(1) != 0:
        return
    for m in range(cols.shape[0]):
        c = cols[m]
        v = values[m]
        for i in range(w.shape[0]):
            v[i] = w[i, c] - reference[i, c]
        read_column(reader, v, out[m])


def read_columns(w: torch.Tensor, reference: torch.Tensor, cols: torch.Tensor, reader: tuple) -> torch.Tensor:
    """The reads of columns `cols` (int64, in this order) of an array's weights w - reference (out, in)
    float32, as a transfer kernel reads them one after another (devices.column_read.read_column): returns
    (len(cols), out) float32. reader: a ColumnReader's fields (devices.column_read.one_hot_settings(cfg),
    the stream's seed, the stream's counts as an int64 tensor on w's device, advanced in place)."""
    w = w.to(torch.float32).contiguous()
    reference = reference.to(torch.float32).contiguous()
    cols = cols.to(device=w.device, dtype=torch.int64)
    values = torch.empty((len(cols), w.shape[0]), dtype=torch.float32, device=w.device)
    out = torch.empty_like(values)
    launch(column_reads_kernel, 1, w, reference, cols, tuple(reader), values, out)
    return out
