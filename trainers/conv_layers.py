"""Convolutions on analog tiles: `AnalogConv1d` and `AnalogConv2d` through im2col (each output position is one
read of the tile with its unfolded patch), on the tile grid and autograd bridge of `trainers/layers.py`."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from aimc.trainers.config import TileConfig
from aimc.trainers.layers import AnalogLayer


class AnalogConv(AnalogLayer):
    """N-d convolution (N = `ndim`, 1 or 2) on analog tiles through im2col: each output position is one read
    of the tile with the unfolded (C * prod(kernel)) patch; the weight is the (out, C * prod(kernel)) matrix
    of torch's ConvNd (groups = 1, zero padding). Conv1d runs as a Conv2d of height 1."""

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
        init: bool = True,
    ):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride = self._tuple(kernel_size), self._tuple(stride)
        self.padding, self.dilation = self._tuple(padding), self._tuple(dilation)
        fan_in = self.in_channels * int(np.prod(self.kernel_size))
        self._init_tiles(out_channels, fan_in, bias, tile_config or TileConfig(), seed)
        if init:
            self.reset_parameters()

    def _tuple(self, v) -> tuple[int, ...]:
        return tuple(int(a) for a in v) if isinstance(v, (tuple, list)) else (int(v),) * self.ndim

    def label(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size})"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.ndim
        self._check_input(x, (n + 1, n + 2), "channels in dimension 1 (or 0 unbatched)", -n - 1, self.in_channels)
        unbatched = x.dim() == n + 1
        x = x.unsqueeze(0) if unbatched else x
        x4 = x.unsqueeze(2) if n == 1 else x  # (B, C, 1, L) for a 1-d convolution
        grow = (lambda v, fill: (fill, *v)) if n == 1 else (lambda v, fill: v)  # noqa: E731
        kernel, dilation = grow(self.kernel_size, 1), grow(self.dilation, 1)
        padding, stride = grow(self.padding, 0), grow(self.stride, 1)
        cols = F.unfold(
            x4.to(torch.float32), kernel, dilation=dilation, padding=padding, stride=stride
        )  # (B, C prod(k), L)
        out = [
            (size + 2 * p - d * (k - 1) - 1) // s + 1
            for size, k, s, p, d in zip(x.shape[2:], self.kernel_size, self.stride, self.padding, self.dilation)
        ]
        x2d = cols.transpose(1, 2).reshape(-1, self.in_features)
        y = self._matmul(x2d).reshape(len(x), -1, self.out_features).transpose(1, 2)
        y = self._finish(y.reshape(len(x), self.out_features, *out), 1)
        return y[0] if unbatched else y

    @classmethod
    def unsupported(cls, conv: nn.Module) -> str | None:
        """Why a torch convolution cannot become this layer, or None where it can."""
        if conv.groups != 1:
            return f"groups={conv.groups} (only groups=1 maps onto tiles)"
        if conv.padding_mode != "zeros":
            return f"padding_mode={conv.padding_mode!r} (only 'zeros')"
        if isinstance(conv.padding, str):
            return f"padding={conv.padding!r} (numeric padding only)"
        return None

    @classmethod
    def from_digital(cls, conv: nn.Module, cfg: TileConfig, seed: int = 0) -> AnalogConv:
        why = cls.unsupported(conv)
        if why is not None:
            raise ValueError(f"{cls.__name__} cannot take {conv}: {why}")
        m = cls(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            conv.padding,
            conv.dilation,
            conv.bias is not None,
            cfg,
            seed,
            init=False,
        )
        m.set_weights(conv.weight.reshape(conv.out_channels, -1), conv.bias)
        return m

    def digital_twin(self) -> nn.Module:
        return self.digital(
            self.in_channels,
            self.out_channels,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            bias=self.analog_bias or self.bias is not None,
        )

    def to_digital(self) -> nn.Module:
        w, b = self.get_weights()
        conv = self.digital_twin()
        with torch.no_grad():
            conv.weight.copy_(w.reshape(conv.weight.shape))
            if b is not None:
                conv.bias.copy_(b)
        return conv

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, " + super().extra_repr()
        )


class AnalogConv1d(AnalogConv):
    """1-D convolution on analog tiles (nn.Conv1d's arguments; groups = 1, zero padding): input (B, C, L)
    or (C, L), weight the (out, C * k) matrix of nn.Conv1d."""

    ndim = 1
    digital = nn.Conv1d


class AnalogConv2d(AnalogConv):
    """2-D convolution on analog tiles (nn.Conv2d's arguments; groups = 1, zero padding): input (B, C, H, W)
    or (C, H, W), weight the (out, C * kh * kw) matrix of nn.Conv2d."""

    ndim = 2
    digital = nn.Conv2d
