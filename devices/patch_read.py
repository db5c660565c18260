"""A convolution's forward read through the periphery, its input patches gathered block by block.

The read of the patch rows (B h w, C kh kw) of an image batch x (B, C, H, W) by a tile's weights (out,
C kh kw), bit-identical to `analog_mvm` of the whole patch matrix, without that matrix: the rows are
gathered from x a block at a time into a buffer that stays in the cache and read there (`read_rows`: DAC,
product, output noise, ADC), so each block's inputs are written and read once, in the cache, where a
patch matrix of the whole batch (10 MB for the second convolution of R1's CNN at batch 100) goes through
memory for the gather, the DAC and every pass of the product. Patch element k of output pixel (b, i, j)
lies at x's flat offset base(b, i, j) + offset[k] (any strides), so a tile's block of columns is the
slice of the offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np
from numba import njit, prange

from aimc.devices.noise_management import fresh_average
from aimc.devices.periphery import PeripheryConfig, read_rows, reread_saturated
from aimc.devices.rng import Stream

if TYPE_CHECKING:  # torch is imported where a read takes a tensor: aimc.devices itself runs without it
    import torch

BLOCK_BYTES = 1 << 17
"""Size of a block of gathered patch rows (float32) where the kernels run on one thread: 128 KiB stays in a
core's L2 cache with its DAC copy. With several threads the batch is one block: each block is three
parallel launches (gather, product, output), and on cores shared with other jobs a launch waits for its
threads (the first convolution of R1's CNN on 2 loaded cores: 26 ms of CPU in one block, 132 ms in blocks of
128 KiB)."""


def patch_offsets(x: torch.Tensor, kernel: tuple[int, int], dilation: tuple[int, int]) -> np.ndarray:
    """Offset (int64, elements) of each patch element (c, u, v), in F.unfold's feature order, from the
    patch's first element in x's storage."""
    (kh, kw), (dh, dw) = kernel, dilation
    _, sc, sh, sw = x.stride()
    c = np.arange(x.shape[1])[:, None, None] * sc
    u = np.arange(kh)[None, :, None] * (dh * sh)
    v = np.arange(kw)[None, None, :] * (dw * sw)
    return (c + u + v).reshape(-1).astype(np.int64)


@njit(cache=True, parallel=True)
def _gather(flat, offsets, first, out, h, w, sb, sh, sw):
    """out[r] = the patch of output pixel first + r: flat[base + offsets], where pixel (b, i, j) starts at
    base = b sb + i sh + j sw (strides in elements, the convolution's stride included)."""
    for r in prange(out.shape[0]):
        b, rest = divmod(first + r, h * w)
        i, j = divmod(rest, w)
        base = b * sb + i * sh + j * sw
        for k in range(offsets.shape[0]):
            out[r, k] = flat[base + offsets[k]]


@njit(cache=True)
def _read_patches(flat, offsets, geometry, mat, block, settings, seed, counter, average):
    """`read_rows` of every patch row, gathered `block` rows at a time; settings: read_rows' from inp_bound to
    check; average: average_abs_max's running average (`noise_management.fresh_average` for one read alone).
    Returns (y, input scales, finished)."""
    batch, h, w, sb, sh, sw = geometry
    n = batch * h * w
    y = np.zeros((n, mat.shape[0]), np.float32)
    scale = np.empty(n, np.float32)
    done = np.empty(n, np.bool_)
    buf = np.empty((min(block, n), offsets.shape[0]), np.float32)
    for first in range(0, n, block):
        x = buf[: min(block, n - first)]
        _gather(flat, offsets, first, x, h, w, sb, sh, sw)
        read_rows(mat, False, x, first, y, scale, done, *settings, seed, counter, average)
    return y, scale, done


class _PatchRows:
    """The patch rows of an image as an array indexed by a vector of rows (for bound management's re-reads)."""

    def __init__(self, flat, offsets, geometry):
        self.flat, self.offsets, self.geometry = flat, offsets, geometry

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        _, h, w, sb, sh, sw = self.geometry
        b, rest = np.divmod(rows, h * w)
        i, j = np.divmod(rest, w)
        return self.flat[(b * sb + i * sh + j * sw)[:, None] + self.offsets[None, :]]


def read_patches(
    weight: np.ndarray,
    x: torch.Tensor,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    cols: slice,
    cfg: PeripheryConfig,
    stream: Stream,
) -> np.ndarray:
    """analog_mvm(weight, rows[:, cols], cfg, stream) for the patch rows (B h w, C kh kw) of x (B, C, H, W)
    (padded already), F.unfold's values in its order, without building them. weight (out, the columns
    `cols`); returns y (B h w, out) float32."""
    import torch

    if cfg.ideal:
        raise ValueError("read_patches: an ideal read is the exact product (take it in torch)")
    if x.dtype != torch.float32:
        raise ValueError(f"read_patches: x must be float32, got {x.dtype}")
    if not (x.is_contiguous() or x.is_contiguous(memory_format=torch.channels_last)):
        x = x.contiguous()
    offsets = np.ascontiguousarray(patch_offsets(x, kernel, dilation)[cols])
    h, w = ((size - d * (k - 1) - 1) // s + 1 for size, k, s, d in zip(x.shape[2:], kernel, stride, dilation))
    n = x.shape[0] * h * w
    if n == 0:  # an empty batch reads nothing (and takes no counter)
        return np.zeros((0, weight.shape[0]), np.float32)
    flat = x.as_strided((x.numel(),), (1,), x.storage_offset()).numpy()
    sb, _, sh, sw = x.stride()
    geometry = (x.shape[0], h, w, sb, sh * stride[0], sw * stride[1])
    mat = np.ascontiguousarray(weight, dtype=np.float32)
    block = max(1, BLOCK_BYTES // (4 * len(offsets))) if numba.get_num_threads() == 1 else n
    y, scale, done = _read_patches(
        flat, offsets, geometry, mat, block, cfg.read_settings, stream.seed, stream.take(), fresh_average()
    )
    if not done.all():
        rows = _PatchRows(flat, offsets, geometry)
        reread_saturated(y, rows, np.flatnonzero(~done), scale, cfg, mat, False, stream)
    return y
