"""im2col and col2im over any number of spatial dimensions, for the convolutions of `trainers/conv_layers.py`.

`unfold` cuts the (B, C, *size) input into its (B, C prod(kernel), L) patch matrix, one column per output
position (L = prod(out)), C outermost and the kernel offsets in row-major order, as torch's `F.unfold`;
`fold` adds such columns back into a (B, C, *size) image, its adjoint (torch's `F.fold`). One and two
spatial dimensions run through `F.unfold` / `F.fold` (a 1-d input as a 2-d one of height 1); three and more,
which torch has no unfold for, through one strided slice of the zero-padded input per kernel offset (unfold)
and the sum of the columns into those slices (fold). All are torch ops, so autograd carries gradients through."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

Sizes = Sequence[int]


def out_sizes(size: Sizes, kernel: Sizes, stride: Sizes, padding: Sizes, dilation: Sizes) -> list[int]:
    """The output positions per spatial dimension of a convolution of an input of `size` (torch's formula)."""
    return [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in zip(size, kernel, stride, padding, dilation)]


def _grown(v: Sizes, fill: int) -> tuple[int, ...]:
    """A 1-d geometry as the 2-d one of height 1 (`fill` for the height), a 2-d one as it is."""
    return (fill, *v) if len(v) == 1 else tuple(v)


def _offset_slices(offset: Sizes, count: Sizes, stride: Sizes, dilation: Sizes) -> tuple[slice, ...]:
    """The (batch, channel, *spatial) index of the `count` positions a kernel offset meets in the padded image."""
    spatial = (slice(k * d, k * d + s * (n - 1) + 1, s) for k, n, s, d in zip(offset, count, stride, dilation))
    return (slice(None), slice(None), *spatial)


def unfold(x: torch.Tensor, kernel: Sizes, stride: Sizes, padding: Sizes, dilation: Sizes) -> torch.Tensor:
    """(B, C, *size) -> the (B, C prod(kernel), L) patch matrix of a zero-padded convolution."""
    n = len(kernel)
    if n <= 2:
        x4 = x.unsqueeze(2) if n == 1 else x
        grown = _grown(kernel, 1), _grown(dilation, 1), _grown(padding, 0), _grown(stride, 1)
        return F.unfold(x4, grown[0], dilation=grown[1], padding=grown[2], stride=grown[3])
    count = out_sizes(x.shape[2:], kernel, stride, padding, dilation)
    if min(count) < 1:
        reach = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
        raise ValueError(
            f"an input of spatial size {tuple(x.shape[2:])} with padding {tuple(padding)} is smaller than the "
            f"kernel's reach {reach}: no output position"
        )
    padded = F.pad(x, [p for p in reversed(padding) for _ in (0, 1)])
    offsets = itertools.product(*(range(k) for k in kernel))
    patches = torch.stack([padded[_offset_slices(k, count, stride, dilation)] for k in offsets], 2)
    return patches.reshape(x.shape[0], -1, math.prod(count))  # (B, C, K, *count) -> (B, C K, L)


def fold(
    cols: torch.Tensor, size: Sizes, kernel: Sizes, stride: Sizes, padding: Sizes, dilation: Sizes
) -> torch.Tensor:
    """(B, C prod(kernel), L) columns -> the (B, C, *size) image they sum into (the adjoint of `unfold` for
    an output of `size`; L = prod(out_sizes(size, ...)))."""
    n = len(kernel)
    if n <= 2:
        grown = _grown(size, 1), _grown(kernel, 1), _grown(dilation, 1), _grown(padding, 0), _grown(stride, 1)
        y = F.fold(cols, grown[0], grown[1], dilation=grown[2], padding=grown[3], stride=grown[4])
        return y[:, :, 0] if n == 1 else y
    count = out_sizes(size, kernel, stride, padding, dilation)
    parts = cols.reshape(cols.shape[0], -1, math.prod(kernel), *count)
    padded = cols.new_zeros(cols.shape[0], parts.shape[1], *(m + 2 * p for m, p in zip(size, padding)))
    for i, k in enumerate(itertools.product(*(range(k) for k in kernel))):
        padded[_offset_slices(k, count, stride, dilation)] += parts[:, :, i]
    crop = (slice(None), slice(None), *(slice(p, p + m) for m, p in zip(size, padding)))
    return padded[crop]
