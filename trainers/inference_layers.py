"""Linear and Conv2d layers on inference tiles: digital target weights, trained by any torch optimizer, read
through the periphery; `program` / `drift` (trainers/inference_program.py) replace them by the programmed
and drifted weights of the tile's noise model for evaluation.

A layer's weights W (out, in) lie on a grid of tiles (mapping.max_input_size / max_output_size). Forward
read (training and evaluation): y = s * sum_k alpha_k read_k(W_k, x_k) + b over the tiles k of an output
block, where W_k is the tile's block of weights (in training the clipped, modified targets; after
programming the drifted ones), x_k its inputs, read_k the forward periphery (`devices.periphery.analog_mvm`:
DAC, output noise, ADC, noise and bound management) with the tile's own noise stream, alpha_k the tile's
drift compensation (1 before `drift`), s the digital output scale of the mapping and b the digital bias.
Backward: grad_x = read_backward(W_k^T, d), grad_W = d^T x (digital, the optimizer's update).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from aimc.common import seeds
from aimc.devices.patch_read import read_patches
from aimc.devices.periphery import PeripheryConfig, analog_mvm
from aimc.devices.rng import Stream
from aimc.trainers.conv_patches import out_sizes
from aimc.trainers.inference_config import InferenceTileConfig
from aimc.trainers.inference_modifiers import clip_, modify
from aimc.trainers.inference_noise import build_compensation, build_noise_model


def _read(w: torch.Tensor, x: torch.Tensor, cfg: PeripheryConfig, stream: Stream) -> torch.Tensor:
    """x @ w.T through the periphery cfg (exact in torch when cfg.ideal); w (out, in), x (batch, in)."""
    if cfg.ideal:
        return x @ w.T
    return torch.from_numpy(analog_mvm(w.detach().numpy(), x.detach().numpy(), cfg, stream))


def split_sizes(size: int, most: int) -> list[int]:
    """Even parts of `size`, each at most `most` (0: one part), the larger first (aihwkit's tile arrays)."""
    if most <= 0:
        return [size]
    n = (size + most - 1) // most
    base, extra = divmod(size, n)
    return [base + (i < extra) for i in range(n)]


def _slices(sizes: list[int]) -> list[slice]:
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [slice(a, a + n) for a, n in zip(starts, sizes)]


def _times(y: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """y * s, in place (y is a fresh read) where no gradient is recorded: the same float32 products."""
    return y * s if torch.is_grad_enabled() and (y.requires_grad or s.requires_grad) else y.mul_(s)


def _plus(y: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """y + b, in place (y is a fresh read or sum) where no gradient is recorded: the same float32 sums."""
    return y + b if torch.is_grad_enabled() and (y.requires_grad or b.requires_grad) else y.add_(b)


class GridTile:
    """One tile of a layer's grid: its block (rows, cols) of the layer's weights, its output-noise stream and
    modifier generator, and its programmed state (programmed and read weights, drift state, drift
    compensation baseline and scale alpha)."""

    def __init__(self, rows: slice, cols: slice, seed: int):
        self.rows, self.cols, self.seed = rows, cols, int(seed)
        self.stream = Stream(seeds.stream_seed(seed, 1))
        self.generator = torch.Generator().manual_seed(seeds.stream_seed(seed, 2))
        self.program_generator: torch.Generator | None = None
        self.programmed: torch.Tensor | None = None
        self.drift_state: list | None = None
        self.read: torch.Tensor | None = None
        self.baseline: torch.Tensor | None = None
        self.alpha = torch.ones(1)


class _PeripheryMatmul(torch.autograd.Function):
    """y = read_forward(W, x); grad_x = read_backward(W^T, d), grad_W = d^T x."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, cfg: InferenceTileConfig, tile: GridTile) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.cfg, ctx.tile = cfg, tile
        return _read(w, x, cfg.forward, tile.stream)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, w = ctx.saved_tensors
        gx = gw = None
        if ctx.needs_input_grad[0]:
            gx = _read(w.T.contiguous(), grad.contiguous(), ctx.cfg.backward, ctx.tile.stream)
        if ctx.needs_input_grad[1]:
            gw = grad.T @ x
        return gx, gw, None, None


class InferenceLayer(nn.Module):
    """What the inference Linear and Conv2d share: the weights (out_features, in_features) as a trained
    parameter on a grid of tiles (mapping.max_input_size / max_output_size), digital bias and output scales,
    the noise model and drift compensation."""

    def _init_tile(self, weight: torch.Tensor, bias: torch.Tensor | None, cfg: InferenceTileConfig, seed: int):
        self.tile_config = cfg
        self.out_features, self.in_features = weight.shape
        m = cfg.mapping
        rows = m.weight_scaling_columnwise or (m.learn_out_scaling and m.out_scaling_columnwise)
        w = weight.detach().to(torch.float32).clone()
        scale = torch.ones(self.out_features if rows else 1)
        if m.weight_scaling_omega > 0:
            amax = w.abs().amax(dim=1) if m.weight_scaling_columnwise else w.abs().max().reshape(1)
            scale = (amax / m.weight_scaling_omega).clamp_min(1e-12) * torch.ones_like(scale)
            w = w / scale[:, None] if rows else w / scale
        self.weight = nn.Parameter(w)
        self.bias = nn.Parameter(bias.detach().to(torch.float32).clone()) if bias is not None else None
        if m.learn_out_scaling:
            self.out_scale = nn.Parameter(scale)
        else:
            self.register_buffer("out_scale", scale)
        self.seed = int(seed)
        out_parts = _slices(split_sizes(self.out_features, m.max_output_size))
        in_parts = _slices(split_sizes(self.in_features, m.max_input_size))
        blocks = [(r, c) for r in out_parts for c in in_parts]
        self.tiles = [GridTile(r, c, seeds.tile_seed(seed, k)) for k, (r, c) in enumerate(blocks)]
        self.noise_model = build_noise_model(cfg)
        self.compensation = build_compensation(cfg)

    @property
    def programmed(self) -> bool:
        """Whether `program` has written the tiles (reads in eval mode then use the programmed weights)."""
        return all(t.read is not None for t in self.tiles)

    def _tile_read(self, tile: GridTile, x2d: torch.Tensor) -> torch.Tensor:
        """One tile's share of the output rows tile.rows: its read of its inputs tile.cols (programmed
        weights times alpha in evaluation after `program`; in training the clipped, modified targets)."""
        cfg = self.tile_config
        x = x2d[:, tile.cols]
        if tile.read is not None and not self.training:
            return _times(_PeripheryMatmul.apply(x, tile.read, cfg, tile), tile.alpha)
        if self.training:
            clip_(self.weight.data[tile.rows, tile.cols], cfg.clip)
        w = self.weight[tile.rows, tile.cols]
        if self.training or cfg.modifier.enable_during_test:
            w = modify(w, cfg.modifier, tile.generator, self.noise_model)
        return _PeripheryMatmul.apply(x, w, cfg, tile)

    def _matmul(self, x2d: torch.Tensor) -> torch.Tensor:
        """(batch, in) -> (batch, out): the tiles' reads summed over the input blocks, output scale, bias."""
        x2d = x2d.to(torch.float32).contiguous()
        return self._combine(lambda tile: self._tile_read(tile, x2d))

    def _combine(self, read: Callable[[GridTile], torch.Tensor]) -> torch.Tensor:
        """(batch, out): read(tile), each tile's share of its output rows, summed over the input blocks; the
        output scale and bias."""
        if len(self.tiles) == 1:
            y = read(self.tiles[0])
        else:
            parts: dict[int, torch.Tensor] = {}
            for tile in self.tiles:
                part = read(tile)
                parts[tile.rows.start] = _plus(parts[tile.rows.start], part) if tile.rows.start in parts else part
            y = torch.cat([parts[k] for k in sorted(parts)], dim=1)
        y = _times(y, self.out_scale)
        return _plus(y, self.bias) if self.bias is not None else y

    def digital_weight(self) -> torch.Tensor:
        """The layer's weight in the units of its digital counterpart: s * W (no noise)."""
        s = self.out_scale.detach()
        return self.weight.detach() * (s[:, None] if s.numel() > 1 else s)

    @torch.no_grad()
    def readout(self, tile: GridTile, w: torch.Tensor) -> torch.Tensor:
        """The drift compensation's probe read of a tile holding weights w, through the forward periphery."""
        x = self.compensation.get_readout_tensor(w.shape[1]).to(torch.float32)
        return _read(w, x, self.tile_config.forward, tile.stream)

    def extra_repr(self) -> str:
        t = self.tile_config
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"tiles={len(self.tiles)}, noise_model={t.noise_model}, modifier={t.modifier.type}, "
            f"programmed={self.programmed}"
        )


class InferenceLinear(InferenceLayer):
    """nn.Linear on an inference tile."""

    def __init__(self, linear: nn.Linear, cfg: InferenceTileConfig, seed: int = 0):
        super().__init__()
        self._init_tile(linear.weight, linear.bias, cfg, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"InferenceLinear: input has {x.shape[-1]} features, the layer {self.in_features}")
        lead = x.shape[:-1]
        y = self._matmul(x.reshape(-1, self.in_features))
        return y.reshape(*lead, self.out_features)

    def to_digital(self) -> nn.Linear:
        """The equivalent nn.Linear (s * W, the bias)."""
        out = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None)
        with torch.no_grad():
            out.weight.copy_(self.digital_weight())
            if self.bias is not None:
                out.bias.copy_(self.bias)
        return out


class InferenceConv2d(InferenceLayer):
    """nn.Conv2d on an inference tile: each output pixel is a read of the unfolded (C kh kw) patch. Evaluation
    of programmed tiles without a gradient to the input reads the patches block by block from the image
    (`devices.patch_read.read_patches`: the same values as the read of the patch matrix, which it never
    builds)."""

    def __init__(self, conv: nn.Conv2d, cfg: InferenceTileConfig, seed: int = 0):
        super().__init__()
        if conv.groups != 1 or conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("InferenceConv2d: only groups=1, zero padding given as numbers are mapped")
        self.in_channels, self.out_channels = conv.in_channels, conv.out_channels
        self.kernel_size, self.stride = tuple(conv.kernel_size), tuple(conv.stride)
        self.padding, self.dilation = tuple(conv.padding), tuple(conv.dilation)
        self._init_tile(conv.weight.reshape(conv.out_channels, -1), conv.bias, cfg, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        unbatched = x.dim() == 3
        x = x.unsqueeze(0) if unbatched else x
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"InferenceConv2d: expects (B, {self.in_channels}, H, W) input, got {tuple(x.shape)}")
        x = x.to(torch.float32)
        if self._reads_patches(x):
            ph, pw = self.padding
            xp = F.pad(x, (pw, pw, ph, ph)) if ph or pw else x
            h, w = self._out_size(x)
            y = self._combine(lambda tile: self._patch_read(tile, xp))
        else:
            rows, h, w = self._patches(x)
            y = self._matmul(rows)
        # (B h w, out) viewed as (B, out, h, w): channels-last strides, no copy
        y = y.reshape(len(x), h * w, self.out_features).transpose(1, 2).reshape(len(x), self.out_features, h, w)
        return y[0] if unbatched else y

    def _patches(self, x: torch.Tensor) -> tuple[torch.Tensor, int, int]:
        """The input patches as rows (B h w, C kh kw), F.unfold's values in its feature order; and h, w. Without
        a gradient to x they are gathered by one strided copy from a view of x (no (B, C kh kw, h w)
        intermediate to transpose); with one by F.unfold, whose backward (fold) sums overlapping patches in
        the order that training results rest on."""
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = self.kernel_size, self.stride, self.padding, self.dilation
        if torch.is_grad_enabled() and x.requires_grad:
            cols = F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)
            return cols.transpose(1, 2).reshape(-1, self.in_features), *self._out_size(x)
        if ph or pw:
            x = F.pad(x, (pw, pw, ph, ph))
        v = x.unfold(2, dh * (kh - 1) + 1, sh).unfold(3, dw * (kw - 1) + 1, sw)[..., ::dh, ::dw]
        h, w = v.shape[2], v.shape[3]
        return v.permute(0, 2, 3, 1, 4, 5).reshape(-1, self.in_features), h, w

    def _out_size(self, x: torch.Tensor) -> tuple[int, int]:
        """The output's (h, w) for the input x (B, C, H, W)."""
        h, w = out_sizes(x.shape[2:], self.kernel_size, self.stride, self.padding, self.dilation)
        return h, w

    def _reads_patches(self, x: torch.Tensor) -> bool:
        """Whether evaluation reads the patches straight from the image (`read_patches`): programmed tiles in
        eval mode, a periphery that is not exact and no gradient to x (the same values as reading the
        gathered patch rows)."""
        return (
            not self.training
            and self.programmed
            and not self.tile_config.forward.ideal
            and not (torch.is_grad_enabled() and x.requires_grad)
        )

    def _patch_read(self, tile: GridTile, x: torch.Tensor) -> torch.Tensor:
        """A programmed tile's read of its columns of the patches of the padded input x, times its alpha."""
        k, s, d, cfg = self.kernel_size, self.stride, self.dilation, self.tile_config.forward
        y = read_patches(tile.read.numpy(), x, k, s, d, tile.cols, cfg, tile.stream)
        return _times(torch.from_numpy(y), tile.alpha)

    def to_digital(self) -> nn.Conv2d:
        """The equivalent nn.Conv2d (s * W, the bias)."""
        out = nn.Conv2d(
            self.in_channels,
            self.out_channels,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            bias=self.bias is not None,
        )
        with torch.no_grad():
            out.weight.copy_(self.digital_weight().reshape(out.weight.shape))
            if self.bias is not None:
                out.bias.copy_(self.bias)
        return out


INFERENCE = {nn.Linear: InferenceLinear, nn.Conv2d: InferenceConv2d}
"""The torch layers convert maps onto inference tiles, and their inference counterparts."""


def inference_layers(model: nn.Module) -> list[InferenceLayer]:
    """Every inference layer of the model, in module order."""
    return [m for m in model.modules() if isinstance(m, InferenceLayer)]
