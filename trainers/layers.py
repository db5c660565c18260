"""Analog layers: torch modules whose weights live in the conductance arrays of `devices.AnalogTile`s.

`AnalogLinear` maps an (out, in) weight onto a grid of tiles of at most `max_out` x `max_in` (the analog
bias, when chosen, is one more input column fed with 1). `AnalogConv2d` unfolds its input (im2col) and
runs the same matrix product, one "sample" per output pixel. Both use one autograd bridge:

- forward: y = read(W_eff, x) through each tile's forward periphery (sum over the input blocks);
- backward: grad_x = read(W_eff^T, d) through the backward periphery (skipped when x needs no grad);
- the layer keeps x and d = dL/dy of the last forward/backward for the optimizer; the analog weights
  never get a `.grad` and are only changed by the optimizers of `trainers.algorithms`.

W_eff = sum_n gains[n] (w_n - reference_n) is cached per tile and refreshed after each update (the
optimizer calls `invalidate()`). State (arrays, references, gains, RNG states, counters) travels through
the module's `state_dict` via `get_extra_state` / `set_extra_state`, as torch tensors and plain Python
values (loadable with `torch.load(weights_only=True)`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from aimc.devices import AnalogTile, ConductanceArray, analog_mvm
from aimc.trainers.config import TileConfig

# ------------------------------------------------------------------------------------------------------
# tile helpers
# ------------------------------------------------------------------------------------------------------

def set_tile_stack(tile: AnalogTile, gains: Sequence[float]) -> None:
    """Give `tile` len(gains) arrays with these forward gains. Existing arrays are kept (array n keeps
    its state); new ones are created with the tile's own seeding rule (seed * 1009 + n), all zero."""
    gains = [float(g) for g in gains]
    if len(gains) < 1:
        raise ValueError("a tile needs at least one array")
    base_seed = tile.arrays[0].seed // 1009
    arrays = list(tile.arrays[: len(gains)])
    device = tile.arrays[0].device
    for n in range(len(arrays), len(gains)):
        arrays.append(ConductanceArray(tile.out_size, tile.in_size, device, seed=base_seed * 1009 + n))
    tile.arrays = arrays
    tile.gains = np.asarray(gains, dtype=np.float32)


def _to_torch(v):
    """Numpy arrays inside a (nested) state dict -> torch tensors (for weights_only checkpoints)."""
    if isinstance(v, np.ndarray):
        return torch.from_numpy(v.copy())
    if isinstance(v, dict):
        return {k: _to_torch(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_to_torch(x) for x in v]
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def _to_numpy(v):
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().numpy().copy()
    if isinstance(v, dict):
        return {k: _to_numpy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_to_numpy(x) for x in v]
    return v


class _Block:
    """One tile of a layer's grid: rows [r0, r1) of the outputs, columns [c0, c1) of the (extended) inputs."""

    __slots__ = ("tile", "r0", "r1", "c0", "c1", "_w", "dirty", "direct")

    def __init__(self, tile: AnalogTile, r0: int, r1: int, c0: int, c1: int):
        self.tile, self.r0, self.r1, self.c0, self.c1 = tile, r0, r1, c0, c1
        self._w = np.zeros((tile.out_size, tile.in_size), np.float32)
        self.dirty = True
        self.direct = None  # None: layout to be decided; True: W_eff is array 0's w itself (no copy)

    def relayout(self) -> None:
        """Decide whether W_eff can be array 0's raw weights directly (one array of gain 1 with a zero
        reference, or all other gains 0): then reads use it in place and nothing is recomputed after an
        update. Call after any change of the gains or of a reference."""
        t = self.tile
        live = [n for n, g in enumerate(t.gains) if g != 0]
        direct = live == [0] and t.gains[0] == 1 and not t.arrays[0].reference.any()
        if direct:
            self._w = t.arrays[0].w
        elif self.direct is not False:
            self._w = np.zeros((t.out_size, t.in_size), np.float32)
        self.direct = direct
        self.dirty = not direct

    def __deepcopy__(self, memo):
        import copy
        return _Block(copy.deepcopy(self.tile, memo), self.r0, self.r1, self.c0, self.c1)

    def weight(self) -> np.ndarray:
        """Cached effective weight sum_n gains[n] (w_n - reference_n) (float32, out x in)."""
        if self.direct is None:
            self.relayout()
        if self.dirty and not self.direct:
            self.tile.weight(out=self._w)
            self.dirty = False
        return self._w


# ------------------------------------------------------------------------------------------------------
# autograd bridge
# ------------------------------------------------------------------------------------------------------

class _AnalogMatmul(torch.autograd.Function):
    """y = read(W, x) (+ bias) forward; grad_x = read(W^T, d) and grad_bias = sum_b d backward; saves x
    and d on the layer. The digital bias is added here rather than by a torch op after the bridge: one
    autograd node per layer instead of two (about 20 us less per layer and step, R1's FCN)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, anchor: torch.Tensor, bias: torch.Tensor | None, layer: _AnalogBase,
                save: bool) -> torch.Tensor:
        xn = x.detach().contiguous().numpy()
        y, xe = layer._read_forward(xn)
        if bias is not None:
            y += bias.detach().numpy()
        ctx.layer = layer
        ctx.slot = layer._save_x(xe) if save else -1
        return torch.from_numpy(y)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        layer = ctx.layer
        d = grad.detach().contiguous().numpy()
        if ctx.slot >= 0:
            layer._save_d(ctx.slot, d)
        gx = gb = None
        if ctx.needs_input_grad[0]:
            gx = torch.from_numpy(layer._read_backward(d))
        if ctx.needs_input_grad[2]:
            gb = grad.sum(0)
        return gx, None, gb, None, None


class _AnalogBase(nn.Module):
    """Common machinery of AnalogLinear and AnalogConv2d: the tile grid, reads, saved x/d, state."""

    is_analog = True

    def _init_tiles(self, out_features: int, in_features: int, bias: bool, cfg: TileConfig, seed: int):
        self.tile_config = cfg
        self.out_features, self.in_features = int(out_features), int(in_features)
        self.analog_bias = bool(bias) and cfg.bias == "analog"
        self.in_ext = self.in_features + (1 if self.analog_bias else 0)
        self.seed = int(seed)
        device = cfg.resolved_device()
        self.blocks: list[_Block] = []
        rows = list(range(0, self.out_features, cfg.max_out)) + [self.out_features]
        cols = list(range(0, self.in_ext, cfg.max_in)) + [self.in_ext]
        k = 0
        for r0, r1 in zip(rows[:-1], rows[1:]):
            for c0, c1 in zip(cols[:-1], cols[1:]):
                tile = AnalogTile(r1 - r0, c1 - c0, device, gains=(1.0,), forward=cfg.forward,
                                  backward=cfg.backward, update=cfg.update, seed=self.seed * 1000 + k)
                self.blocks.append(_Block(tile, r0, r1, c0, c1))
                k += 1
        self.n_row_blocks = len(rows) - 1
        self.n_col_blocks = len(cols) - 1
        if bias and cfg.bias == "digital":
            self.bias = nn.Parameter(torch.zeros(self.out_features))
        else:
            self.register_parameter("bias", None)
        if cfg.out_scale:  # one scale for the layer, or one per output ("column")
            self.out_scale = nn.Parameter(torch.ones(self.out_features if cfg.out_scale == "column" else 1))
        else:
            self.register_parameter("out_scale", None)
        # a grad-requiring anchor so that backward runs even when the input needs no gradient
        self._anchor = torch.empty(0, requires_grad=True)
        self._xs: list[np.ndarray] = []
        self._ds: list[np.ndarray | None] = []
        self.algorithm: str | None = None  # set by the optimizer that prepared the tiles
        self._ones = None

    # -- tiles ------------------------------------------------------------------------------------------
    @property
    def tiles(self) -> list[AnalogTile]:
        return [b.tile for b in self.blocks]

    def set_gains(self, gains: Sequence[float]) -> None:
        """Set the array stack of every tile of the layer (see `set_tile_stack`)."""
        for b in self.blocks:
            set_tile_stack(b.tile, gains)
        self.invalidate(layout=True)

    def invalidate(self, layout: bool = False) -> None:
        """Mark the cached effective weights stale (after any change of the arrays); layout=True after a
        change of gains or references (zero shift), which may change how W_eff is formed."""
        for b in self.blocks:
            b.dirty = True
            if layout:
                b.direct = None

    def _extend(self, x: np.ndarray) -> np.ndarray:
        if not self.analog_bias:
            return x
        xe = np.empty((x.shape[0], self.in_ext), np.float32)
        xe[:, : self.in_features] = x
        xe[:, self.in_features] = 1.0
        return xe

    def _read_forward(self, x: np.ndarray):
        xe = self._extend(x.astype(np.float32, copy=False))
        if len(self.blocks) == 1:
            b = self.blocks[0]
            b.tile.reads += len(xe)
            return analog_mvm(b.weight(), xe, b.tile.forward_cfg, b.tile.stream), xe
        y = np.zeros((len(xe), self.out_features), np.float32)
        for b in self.blocks:
            b.tile.reads += len(xe)
            y[:, b.r0:b.r1] += analog_mvm(b.weight(), xe[:, b.c0:b.c1], b.tile.forward_cfg, b.tile.stream)
        return y, xe

    def _read_backward(self, d: np.ndarray) -> np.ndarray:
        if len(self.blocks) == 1:
            b = self.blocks[0]
            b.tile.reads += len(d)
            z = analog_mvm(b.weight().T, d, b.tile.backward_cfg, b.tile.stream)
            return z[:, : self.in_features] if self.analog_bias else z
        z = np.zeros((len(d), self.in_ext), np.float32)
        for b in self.blocks:
            b.tile.reads += len(d)
            z[:, b.c0:b.c1] += analog_mvm(b.weight().T, d[:, b.r0:b.r1], b.tile.backward_cfg, b.tile.stream)
        return np.ascontiguousarray(z[:, : self.in_features]) if self.analog_bias else z

    # -- saved x and d ----------------------------------------------------------------------------------
    def _save_x(self, x: np.ndarray) -> int:
        self._xs.append(x)
        self._ds.append(None)
        return len(self._xs) - 1

    def _save_d(self, slot: int, d: np.ndarray) -> None:
        if slot < len(self._ds):
            self._ds[slot] = d

    def pop_batch(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The (x, d) pairs saved since the last call, stacked: x (n, in_ext), d (n, out); None if none."""
        pairs = [(x, d) for x, d in zip(self._xs, self._ds) if d is not None]
        self._xs, self._ds = [], []
        if not pairs:
            return None
        if len(pairs) == 1:
            return pairs[0]
        return np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs])

    def clear_saved(self) -> None:
        self._xs, self._ds = [], []

    # -- weights ----------------------------------------------------------------------------------------
    def analog_weight(self) -> np.ndarray:
        """Effective analog weight (out, in_ext) assembled from the tiles (exact, no read noise)."""
        w = np.zeros((self.out_features, self.in_ext), np.float32)
        for b in self.blocks:
            w[b.r0:b.r1, b.c0:b.c1] = b.weight()
        return w

    def get_weights(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weight (out, in), bias or None) of the equivalent digital layer, output scale folded in."""
        w = torch.from_numpy(self.analog_weight())
        bias = None
        if self.analog_bias:
            bias = w[:, -1].clone()
            w = w[:, :-1]
        elif self.bias is not None:
            bias = self.bias.detach().clone()
        w = w.clone()
        if self.out_scale is not None:
            s = self.out_scale.detach()
            w = w * s[:, None]
            if bias is not None and self.analog_bias:
                bias = bias * s
        return w, bias

    def set_weights(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Write weights exactly into array 0 (clipped to each element's bounds), others zero (as
        aihwkit's set_weights); the digital bias is copied, an analog bias goes into its column."""
        w = weight.detach().reshape(self.out_features, self.in_features).to(torch.float32).numpy()
        if self.analog_bias:
            col = np.zeros((self.out_features, 1), np.float32)
            if bias is not None:
                col[:, 0] = bias.detach().numpy()
            w = np.concatenate([w, col], axis=1)
        elif bias is not None and self.bias is not None:
            with torch.no_grad():
                self.bias.copy_(bias.detach())
        for b in self.blocks:
            for n, a in enumerate(b.tile.arrays):
                target = w[b.r0:b.r1, b.c0:b.c1] if n == 0 else np.zeros_like(a.w)
                lo, hi = a.bounds
                a.w[...] = np.clip(target + a.reference, lo, hi)
        self.invalidate(layout=True)

    # -- output -----------------------------------------------------------------------------------------
    def _finish(self, y: torch.Tensor, channel_dim: int) -> torch.Tensor:
        """y * out_scale + bias along channel_dim, where the layer has an output scale (without one,
        `_matmul` added the bias already)."""
        if self.out_scale is None:
            return y
        shape = [1] * y.dim()
        shape[channel_dim] = -1
        y = y * self.out_scale.view(shape)
        if self.bias is not None:
            y = y + self.bias.view(shape)
        return y

    def _matmul(self, x2d: torch.Tensor) -> torch.Tensor:
        """(rows, out) = read(W, x2d), plus the digital bias unless an output scale must come first."""
        save = torch.is_grad_enabled() and self.training
        bias = self.bias if self.out_scale is None else None
        return _AnalogMatmul.apply(x2d, self._anchor, bias, self, save)

    # -- state ------------------------------------------------------------------------------------------
    def get_extra_state(self):
        return {"version": 1, "seed": self.seed, "algorithm": self.algorithm,
                "tiles": [_to_torch(b.tile.state_dict()) for b in self.blocks]}

    def set_extra_state(self, state) -> None:
        tiles = state["tiles"]
        if len(tiles) != len(self.blocks):
            raise ValueError(f"checkpoint has {len(tiles)} tiles, layer has {len(self.blocks)}")
        if int(state["seed"]) != self.seed:
            raise ValueError(f"checkpoint layer seed {state['seed']} differs from {self.seed}: the drawn "
                             "device parameters would differ; convert with the same seed")
        for b, s in zip(self.blocks, tiles):
            s = _to_numpy(s)
            set_tile_stack(b.tile, [float(g) for g in np.asarray(s["gains"]).ravel()])
            b.tile.load_state_dict(s)
        self.algorithm = state.get("algorithm")
        self.invalidate(layout=True)
        self.clear_saved()

    def extra_repr(self) -> str:
        g = self.blocks[0].tile.gains.tolist()
        return (f"{self.in_features}, {self.out_features}, tiles={self.n_row_blocks}x{self.n_col_blocks}, "
                f"bias={'analog' if self.analog_bias else self.bias is not None}, gains={g}")


class AnalogLinear(_AnalogBase):
    """y = W x (+ b): a Linear layer on analog tiles."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 tile_config: TileConfig | None = None, seed: int = 0):
        super().__init__()
        self._init_tiles(out_features, in_features, bias, tile_config or TileConfig(), seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        y = self._matmul(x.reshape(-1, self.in_features).to(torch.float32))
        return self._finish(y, 1).reshape(*lead, self.out_features)

    @classmethod
    def from_digital(cls, lin: nn.Linear, cfg: TileConfig, seed: int = 0) -> AnalogLinear:
        m = cls(lin.in_features, lin.out_features, lin.bias is not None, cfg, seed)
        m.set_weights(lin.weight, lin.bias)
        return m

    def to_digital(self) -> nn.Linear:
        w, b = self.get_weights()
        lin = nn.Linear(self.in_features, self.out_features, bias=b is not None)
        with torch.no_grad():
            lin.weight.copy_(w)
            if b is not None:
                lin.bias.copy_(b)
        return lin


class AnalogConv2d(_AnalogBase):
    """2-D convolution on analog tiles through im2col: each output pixel is one read of the tile with the
    unfolded (C * kh * kw) patch; the weight is the (out, C * kh * kw) matrix of nn.Conv2d (groups = 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 bias: bool = True, tile_config: TileConfig | None = None, seed: int = 0):
        super().__init__()
        pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (int(v), int(v))  # noqa: E731
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride = pair(kernel_size), pair(stride)
        self.padding, self.dilation = pair(padding), pair(dilation)
        fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
        self._init_tiles(out_channels, fan_in, bias, tile_config or TileConfig(), seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, h, w = x.shape
        cols = F.unfold(x.to(torch.float32), self.kernel_size, dilation=self.dilation, padding=self.padding,
                        stride=self.stride)  # (B, C k k, L)
        oh = (h + 2 * self.padding[0] - self.dilation[0] * (self.kernel_size[0] - 1) - 1) // self.stride[0] + 1
        ow = (w + 2 * self.padding[1] - self.dilation[1] * (self.kernel_size[1] - 1) - 1) // self.stride[1] + 1
        x2d = cols.transpose(1, 2).reshape(-1, self.in_features)
        y = self._matmul(x2d).reshape(batch, oh * ow, self.out_features).transpose(1, 2)
        y = y.reshape(batch, self.out_features, oh, ow)
        return self._finish(y, 1)

    @classmethod
    def from_digital(cls, conv: nn.Conv2d, cfg: TileConfig, seed: int = 0) -> AnalogConv2d:
        if conv.groups != 1:
            raise ValueError(f"AnalogConv2d supports groups=1 only (got {conv.groups})")
        if conv.padding_mode != "zeros":
            raise ValueError(f"AnalogConv2d supports padding_mode='zeros' only (got {conv.padding_mode!r})")
        if isinstance(conv.padding, str):
            raise ValueError("AnalogConv2d needs numeric padding (got a string)")
        m = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                conv.dilation, conv.bias is not None, cfg, seed)
        m.set_weights(conv.weight.reshape(conv.out_channels, -1), conv.bias)
        return m

    def to_digital(self) -> nn.Conv2d:
        w, b = self.get_weights()
        conv = nn.Conv2d(self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding,
                         self.dilation, bias=b is not None)
        with torch.no_grad():
            conv.weight.copy_(w.reshape(conv.weight.shape))
            if b is not None:
                conv.bias.copy_(b)
        return conv

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, " + super().extra_repr())


def analog_layers(model: nn.Module) -> list[_AnalogBase]:
    """The analog layers of a model, in module order (the order optimizer state refers to)."""
    return [m for m in model.modules() if isinstance(m, _AnalogBase)]
