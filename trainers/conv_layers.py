"""Convolutions on analog tiles, on the tile grid and autograd bridge of `trainers/layers.py`:

- `AnalogConv1d` / `AnalogConv2d` / `AnalogConv3d` through im2col: each output position is one read of the
  tile with its unfolded patch;
- `AnalogConvTranspose1d` / `AnalogConvTranspose2d` / `AnalogConvTranspose3d` through col2im: each input
  position is one read of the (out * prod(kernel), in) tile, whose outputs are summed into the output image
  (the adjoint of im2col). `trainers/conv_patches.py` holds both patch maps.

A grouped convolution (groups > 1, depthwise included) holds one grid of tiles per group: its weight is
block-diagonal, and a block-diagonal matrix on one tile would hold off-diagonal elements that the pulsed
update, noise and drift move away from zero (and waste cells), while a tile per group holds only the
group's own weights (`AnalogLayer._init_tiles`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from aimc.trainers import conv_patches
from aimc.trainers.config import TileConfig
from aimc.trainers.layers import AnalogLayer, refuse_unmappable


class AnalogConv(AnalogLayer):
    """N-d convolution (N = `ndim`, 1 to 3) on analog tiles through im2col: each output position is one read
    of the tiles with the unfolded (C * prod(kernel)) patch; the weight is the (out, C / groups * prod(kernel))
    matrix of torch's ConvNd (zero padding), one grid of tiles per group. An analog bias is one more column
    per group, fed with 1, holding the bias of the group's output channels."""

    ndim = 2
    digital: type[nn.Module] = nn.Conv2d

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        bias: bool = True,
        tile_config: TileConfig | None = None,
        seed: int = 0,
        *,
        groups: int = 1,
        init: bool = True,
    ):
        super().__init__()
        self._set_geometry(in_channels, out_channels, kernel_size, stride, padding, dilation, groups)
        fan_in = self.in_channels * int(np.prod(self.kernel_size))
        self._init_tiles(out_channels, fan_in, bias, tile_config or TileConfig(), seed, self.groups)
        if init:
            self.reset_parameters()

    def _set_geometry(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups) -> None:
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size, self.stride = self._tuple(kernel_size), self._tuple(stride)
        self.padding, self.dilation = self._tuple(padding), self._tuple(dilation)
        if self.groups < 1 or self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"{self.label()}: groups={self.groups} must divide in_channels={self.in_channels} and "
                f"out_channels={self.out_channels}"
            )

    def _tuple(self, v) -> tuple[int, ...]:
        return tuple(int(a) for a in v) if isinstance(v, (tuple, list)) else (int(v),) * self.ndim

    def label(self) -> str:
        groups = f", groups={self.groups}" if self.groups != 1 else ""
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}{groups})"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.ndim
        self._check_input(x, (n + 1, n + 2), "channels in dimension 1 (or 0 unbatched)", -n - 1, self.in_channels)
        unbatched = x.dim() == n + 1
        x = x.unsqueeze(0) if unbatched else x
        geometry = self.kernel_size, self.stride, self.padding, self.dilation
        cols = conv_patches.unfold(x.to(torch.float32), *geometry)  # (B, C prod(k), L)
        out = conv_patches.out_sizes(x.shape[2:], *geometry)
        x2d = cols.transpose(1, 2).reshape(-1, self.in_features)
        y = self._matmul(x2d).reshape(len(x), -1, self.out_features).transpose(1, 2)
        y = self._finish(y.reshape(len(x), self.out_features, *out), 1)
        return y[0] if unbatched else y

    @classmethod
    def unsupported(cls, conv: nn.Module) -> str | None:
        """Why a torch convolution cannot become this layer, or None where it can."""
        if conv.padding_mode != "zeros":
            return f"padding_mode={conv.padding_mode!r} (only 'zeros')"
        if isinstance(conv.padding, str):
            return f"padding={conv.padding!r} (numeric padding only)"
        return None

    @classmethod
    def digital_options(cls, conv: nn.Module) -> dict:
        """The constructor options of this kind that the torch module carries beyond the shared ones."""
        return {}

    @classmethod
    def from_digital(cls, conv: nn.Module, cfg: TileConfig, seed: int = 0) -> AnalogConv:
        refuse_unmappable(cls, conv)
        m = cls(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            stride=conv.stride,
            padding=conv.padding,
            dilation=conv.dilation,
            bias=conv.bias is not None,
            tile_config=cfg,
            seed=seed,
            groups=conv.groups,
            init=False,
            **cls.digital_options(conv),
        )
        m.set_weights(m.weight_matrix(conv.weight), conv.bias)
        return m

    def digital_twin(self) -> nn.Module:
        return self.digital(
            self.in_channels,
            self.out_channels,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            groups=self.groups,
            bias=self.analog_bias or self.bias is not None,
        )

    def digital_weight(self, matrix: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        """torch's weight of `shape` from the (out, in / groups) matrix (the inverse of `weight_matrix`)."""
        return matrix.reshape(shape)

    def to_digital(self) -> nn.Module:
        w, b = self.get_weights()
        conv = self.digital_twin()
        with torch.no_grad():
            conv.weight.copy_(self.digital_weight(w, conv.weight.shape))
            if b is not None:
                conv.bias.copy_(b)
        return conv

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, groups={self.groups}, " + super().extra_repr()
        )


class AnalogConv1d(AnalogConv):
    """1-D convolution on analog tiles (nn.Conv1d's arguments, groups keyword-only; zero padding): input (B, C, L)
    or (C, L), weight the (out, C * k) matrix of nn.Conv1d."""

    ndim = 1
    digital = nn.Conv1d


class AnalogConv2d(AnalogConv):
    """2-D convolution on analog tiles (nn.Conv2d's arguments, groups keyword-only; zero padding): input (B, C, H, W)
    or (C, H, W), weight the (out, C * kh * kw) matrix of nn.Conv2d."""

    ndim = 2
    digital = nn.Conv2d


class AnalogConv3d(AnalogConv):
    """3-D convolution on analog tiles (nn.Conv3d's arguments, groups keyword-only; zero padding): input
    (B, C, D, H, W) or (C, D, H, W), weight the (out, C * kd * kh * kw) matrix of nn.Conv3d."""

    ndim = 3
    digital = nn.Conv3d


class AnalogConvTranspose(AnalogConv):
    """N-d transposed convolution (N = `ndim`, 1 to 3) on analog tiles through col2im: each input position is
    one read of the tiles, whose (out * prod(kernel)) outputs `conv_patches.fold` adds into the output image. The tiles
    hold the (out * prod(kernel), in / groups) matrix M[(o, k), c] = W[c, o, k] of torch's ConvTransposeNd
    weight W (in, out / groups, *kernel), one grid per group; the bias is digital (added per output channel
    after the fold), and an output scale scales the tiles' outputs."""

    digital: type[nn.Module] = nn.ConvTranspose2d

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        tile_config: TileConfig | None = None,
        seed: int = 0,
        *,
        init: bool = True,
    ):
        nn.Module.__init__(self)
        self._set_geometry(in_channels, out_channels, kernel_size, stride, padding, dilation, groups)
        self.output_padding = self._tuple(output_padding)
        cfg = tile_config or TileConfig()
        rows = self.out_channels * int(np.prod(self.kernel_size))
        self._init_tiles(rows, self.in_channels, False, cfg, seed, self.groups)
        self.bias = nn.Parameter(torch.zeros(self.out_channels)) if bias else None
        if init:
            self.reset_parameters()

    def weight_matrix(self, weight: torch.Tensor) -> torch.Tensor:
        ig = self.in_channels // self.groups
        return torch.cat([w.reshape(ig, -1).T for w in weight.split(ig)])

    def digital_weight(self, matrix: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        rows = self.out_features // self.groups
        return torch.cat([m.T.reshape(-1, *shape[1:]) for m in matrix.split(rows)])

    def forward(self, x: torch.Tensor, output_size: Sequence[int] | None = None) -> torch.Tensor:
        """As torch's: `output_size` (the spatial sizes, optionally after batch and channels) picks among the
        sizes the stride leaves open, in place of output_padding."""
        n = self.ndim
        self._check_input(x, (n + 1, n + 2), "channels in dimension 1 (or 0 unbatched)", -n - 1, self.in_channels)
        unbatched = x.dim() == n + 1
        x = x.unsqueeze(0) if unbatched else x
        out_padding = self.output_padding
        if output_size is not None:
            out_padding = self._output_padding(x.shape[2:], output_size)
        x2d = x.to(torch.float32).movedim(1, -1).reshape(-1, self.in_channels)
        y = self._matmul(x2d, with_bias=False)  # (B * positions, out * prod(kernel))
        if self.out_scale is not None:
            y = y * self.out_scale
        cols = y.reshape(len(x), -1, self.out_features).transpose(1, 2)
        geometry = self.kernel_size, self.stride, self.padding, self.dilation
        per_dim = zip(x.shape[2:], *geometry, out_padding)
        size = [(h - 1) * s - 2 * p + d * (k - 1) + op + 1 for h, k, s, p, d, op in per_dim]
        y = conv_patches.fold(cols, size, *geometry)
        if self.bias is not None:
            y = y + self.bias.view(1, -1, *[1] * n)
        return y[0] if unbatched else y

    def _output_padding(self, spatial: Sequence[int], output_size: Sequence[int]) -> tuple[int, ...]:
        """The output padding that gives `output_size` for an input of spatial sizes `spatial`; ValueError
        naming the layer where a size lies outside the range [smallest, smallest + stride - 1]."""
        n = self.ndim
        size = [int(v) for v in output_size][-n:] if len(output_size) in (n, n + 2) else None
        if size is None:
            raise ValueError(f"{self.label()}: output_size must have {n} or {n + 2} elements (got {len(output_size)})")
        pads = []
        for h, want, k, s, p, d in zip(spatial, size, self.kernel_size, self.stride, self.padding, self.dilation):
            smallest = (h - 1) * s - 2 * p + d * (k - 1) + 1
            if not smallest <= want < smallest + s:
                raise ValueError(
                    f"{self.label()}: output_size {tuple(size)} is not reachable for an input of {tuple(spatial)}: "
                    f"each size must lie in [{smallest}, {smallest + s - 1}] here"
                )
            pads.append(want - smallest)
        return tuple(pads)

    @classmethod
    def unsupported(cls, conv: nn.Module) -> str | None:
        why = super().unsupported(conv)
        if why is None and any(op >= s for op, s in zip(conv.output_padding, conv.stride)):
            return f"output_padding={conv.output_padding} not below stride={conv.stride}"
        return why

    @classmethod
    def digital_options(cls, conv: nn.Module) -> dict:
        return {"output_padding": conv.output_padding}

    def digital_twin(self) -> nn.Module:
        return self.digital(
            self.in_channels,
            self.out_channels,
            self.kernel_size,
            self.stride,
            self.padding,
            self.output_padding,
            self.groups,
            self.bias is not None,
            self.dilation,
        )


class AnalogConvTranspose1d(AnalogConvTranspose):
    """1-D transposed convolution on analog tiles (nn.ConvTranspose1d's arguments; zero padding)."""

    ndim = 1
    digital = nn.ConvTranspose1d


class AnalogConvTranspose2d(AnalogConvTranspose):
    """2-D transposed convolution on analog tiles (nn.ConvTranspose2d's arguments; zero padding)."""

    ndim = 2
    digital = nn.ConvTranspose2d


class AnalogConvTranspose3d(AnalogConvTranspose):
    """3-D transposed convolution on analog tiles (nn.ConvTranspose3d's arguments; zero padding)."""

    ndim = 3
    digital = nn.ConvTranspose3d
