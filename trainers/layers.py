"""Analog layers: torch modules whose weights live in the conductance arrays of `devices.AnalogTile`s.

`AnalogLinear` maps an (out, in) weight onto a grid of tiles of at most `max_out` x `max_in` (the analog
bias, when chosen, is one more input column fed with 1, one per group of a grouped convolution).
`AnalogConv1d`, `AnalogConv2d` and `AnalogConv3d` (`trainers/conv_layers.py`) unfold their input (im2col)
and run the same matrix product, one "sample" per output position. All use one autograd bridge:

- forward: y = read(W_eff, x) through each tile's forward periphery (sum over the input blocks);
- backward: grad_x = read(W_eff^T, d) through the backward periphery (skipped when x needs no grad);
- the layer keeps x and d = dL/dy of the last forward/backward for the optimizer; the analog weights
  never get a `.grad` and are only changed by the optimizers of `trainers.algorithms`.

The reads are the tiles' own (`AnalogTile.forward` / `backward`, with their periphery, RNG stream, read
counter and cached W_eff = sum_n gains[n] (w_n - reference_n)); the layer places each tile's partial
result in its rows or columns. State (arrays, references, gains, RNG states, counters) travels through
the module's `state_dict` via `get_extra_state` / `set_extra_state`, as torch tensors and plain Python
values (loadable with `torch.load(weights_only=True)`).

The layers compute in float32: a non-floating-point input is refused (as torch's layers refuse it), a wrong
input shape is reported with the layer and both shapes; `.cuda()` moves the tiles too, `.double()` raises.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from aimc.common import seeds
from aimc.devices import AnalogTile
from aimc.trainers.analog_matmul import AnalogMatmul
from aimc.trainers.config import TileConfig
from aimc.trainers.state import check_device, device_identity, state_to_numpy, state_to_torch


@dataclass(frozen=True, slots=True)
class TileBlock:
    """One tile of a layer's grid: rows [r0, r1) of the outputs, columns [c0, c1) of the (extended) inputs."""

    tile: AnalogTile
    r0: int
    r1: int
    c0: int
    c1: int


LIVE_LAYERS: weakref.WeakSet[AnalogLayer] = weakref.WeakSet()
"""Every analog layer alive in the process (trainers.guards looks for their parameters in torch optimizers)."""

UNCONSUMED_WARNING = 1000
"""Backward passes an analog layer keeps (x, d) for without an analog optimizer step before it warns once."""


class AnalogLayer(nn.Module):
    """Common machinery of the analog layers: the tile grid, reads, saved x/d, state, input checks."""

    is_analog = True
    convert_seed: int | None = None  # the `seed` given to trainers.convert, where the layer came from it

    def _init_tiles(self, out_features: int, in_features: int, bias: bool, cfg: TileConfig, seed: int, groups: int = 1):
        """The tile grid of an (out, in) weight; with groups > 1 a block-diagonal weight, one grid of tiles
        per group (rows and columns of group g: its out/groups outputs and in/groups inputs). An analog bias
        is one more column per group, after the group's inputs: the bias of its outputs, fed with 1."""
        self.tile_config = cfg
        self.out_features, self.in_features = int(out_features), int(in_features)
        self.groups = int(groups)
        if self.out_features < 1 or self.in_features < 1:
            raise ValueError(
                f"{self.label()}: an empty weight ({self.out_features} outputs x {self.in_features} inputs) "
                "maps onto no tile; analog layers need at least one input and one output"
            )
        self.analog_bias = bool(bias) and cfg.bias == "analog"
        self.in_ext = self.in_features + (self.groups if self.analog_bias else 0)
        self.seed = int(seed)
        device, array_devices = cfg.resolved_device(), cfg.resolved_devices()
        self.blocks: list[TileBlock] = []
        og, ig = self.out_features // self.groups, self.in_ext // self.groups
        row_ranges, col_ranges = [], []
        for g in range(self.groups):
            rows = list(range(g * og, (g + 1) * og, cfg.max_out)) + [(g + 1) * og]
            cols = list(range(g * ig, (g + 1) * ig, cfg.max_in)) + [(g + 1) * ig]
            row_ranges.append(list(zip(rows[:-1], rows[1:])))
            col_ranges.append(list(zip(cols[:-1], cols[1:])))
        k = 0
        for g in range(self.groups):
            for r0, r1 in row_ranges[g]:
                for c0, c1 in col_ranges[g]:
                    tile = AnalogTile(
                        r1 - r0,
                        c1 - c0,
                        device,
                        gains=(1.0,),
                        forward=cfg.forward,
                        backward=cfg.backward,
                        update=cfg.update,
                        seed=seeds.tile_seed(self.seed, k),
                        array_devices=array_devices,
                    )
                    self.blocks.append(TileBlock(tile, r0, r1, c0, c1))
                    k += 1
        self.n_row_blocks = sum(len(r) for r in row_ranges)
        self.n_col_blocks = sum(len(c) for c in col_ranges)
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
        self.gpu_tiles = False  # the tiles are devices.gpu.tile.GpuTiles (move_tiles): reads take tensors
        self._xs: list[np.ndarray] = []
        self._ds: list[np.ndarray | None] = []
        self.algorithm: str | None = None  # set by the optimizer that prepared the tiles
        self._warned_unconsumed = False
        LIVE_LAYERS.add(self)

    # -- tiles ------------------------------------------------------------------------------------------
    @property
    def tiles(self) -> list[AnalogTile]:
        return [b.tile for b in self.blocks]

    def set_gains(self, gains: Sequence[float]) -> None:
        """Set the array stack of every tile of the layer (`AnalogTile.set_stack`); refuse a stack of another
        number of arrays than TileConfig.devices gives devices."""
        devices = self.tile_config.devices
        if devices is not None and len(devices) != len(gains):
            raise ValueError(
                f"{self.label()}: tile.devices gives {len(devices)} devices, the training algorithm uses "
                f"{len(gains)} arrays per tile (array n gets devices[n])"
            )
        for b in self.blocks:
            b.tile.set_stack(gains)

    def block_batches(self, x: np.ndarray, d: np.ndarray) -> Iterator[tuple[int, TileBlock, np.ndarray, np.ndarray]]:
        """Each tile's part of a batch x (n, in_ext), d (n, out): (index, block, x's columns, d's rows)."""
        if len(self.blocks) == 1:
            yield 0, self.blocks[0], x, d
            return
        for bi, b in enumerate(self.blocks):
            xb = x if self.n_col_blocks == 1 else x[:, b.c0 : b.c1]
            db = d if self.n_row_blocks == 1 else d[:, b.r0 : b.r1]
            yield bi, b, xb, db

    def _empty(self, like, shape: tuple[int, int]):
        """An uninitialised float32 array of `shape` of the kind of `like`: numpy, or a tensor on its device."""
        return (
            like.new_empty(shape, dtype=torch.float) if isinstance(like, torch.Tensor) else np.empty(shape, np.float32)
        )

    def _sum_of_blocks(self, like, shape: tuple[int, int], parts: Iterator) -> np.ndarray:
        """The reads ((first, stop), read) of `parts` summed into their ranges of a new array (the grid covers each)."""
        out, filled = self._empty(like, shape), set()
        for (a, b), part in parts:
            if (a, b) in filled:
                out[:, a:b] += part
            else:
                out[:, a:b] = part
            filled.add((a, b))
        return out

    def _extend(self, x: np.ndarray) -> np.ndarray:
        """x (n, in) -> (n, in_ext): each group's inputs followed by a 1 for its bias column (analog bias)."""
        if not self.analog_bias:
            return x
        n, ig = x.shape[0], self.in_features // self.groups
        xe = self._empty(x, (n, self.in_ext))  # every entry written below
        per_group = xe.reshape(n, self.groups, ig + 1)  # a view of xe
        per_group[:, :, :ig] = x.reshape(n, self.groups, ig)
        per_group[:, :, ig] = 1.0
        return xe

    def _inputs_of(self, z):
        """(n, in_ext) -> the (n, in) input columns (without the groups' bias columns)."""
        n, ig = z.shape[0], self.in_features // self.groups
        return z.reshape(n, self.groups, ig + 1)[:, :, :ig].reshape(n, self.in_features)

    def read_forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(y (batch, out) = the tiles' forward reads summed over each row of the grid, the extended x)."""
        xe = self._extend(x.to(torch.float32) if isinstance(x, torch.Tensor) else x.astype(np.float32, copy=False))
        if len(self.blocks) == 1:
            return self.blocks[0].tile.forward(xe), xe
        reads = (((b.r0, b.r1), b.tile.forward(xe[:, b.c0 : b.c1])) for b in self.blocks)
        y = self._sum_of_blocks(xe, (len(xe), self.out_features), reads)
        return y, xe

    def read_backward(self, d: np.ndarray) -> np.ndarray:
        """grad_x (batch, in) = the tiles' backward reads summed over each column of the grid."""
        if len(self.blocks) == 1:
            z = self.blocks[0].tile.backward(d)
            return z[:, : self.in_features] if self.analog_bias else z
        reads = (((b.c0, b.c1), b.tile.backward(d[:, b.r0 : b.r1])) for b in self.blocks)
        z = self._sum_of_blocks(d, (len(d), self.in_ext), reads)
        if not self.analog_bias:
            return z
        z = self._inputs_of(z)
        return z.contiguous() if self.gpu_tiles else np.ascontiguousarray(z)

    # -- saved x and d ----------------------------------------------------------------------------------
    def save_x(self, x: np.ndarray) -> int:
        self._xs.append(x)
        self._ds.append(None)
        return len(self._xs) - 1

    def save_d(self, slot: int, d: np.ndarray) -> None:
        if slot < len(self._ds):
            self._ds[slot] = d
            if slot + 1 >= UNCONSUMED_WARNING and not self._warned_unconsumed:
                self._warned_unconsumed = True
                warnings.warn(
                    f"{self.label()}: {slot + 1} backward passes since an analog optimizer last took "
                    "this layer's inputs and gradients: its analog weights change only through an "
                    "optimizer of trainers.build_optimizer (a torch optimizer such as Adam or SGD "
                    "trains only digital parameters), and the saved batches keep growing",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def pop_batch(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The (x, d) pairs saved since the last call, stacked: x (n, in_ext), d (n, out); None if none."""
        pairs = [(x, d) for x, d in zip(self._xs, self._ds) if d is not None]
        self._xs, self._ds = [], []
        if not pairs:
            return None
        if len(pairs) == 1:
            return pairs[0]
        join = torch.cat if self.gpu_tiles else np.concatenate
        return join([p[0] for p in pairs]), join([p[1] for p in pairs])

    def clear_saved(self) -> None:
        self._xs, self._ds = [], []

    # -- inputs and placement ---------------------------------------------------------------------------
    def label(self) -> str:
        """The layer as a user wrote it, e.g. `AnalogLinear(784, 10)`."""
        return f"{type(self).__name__}({self.in_features}, {self.out_features})"

    def _check_input(self, x: torch.Tensor, ndims: tuple[int, ...] | None, what: str, dim: int, size: int) -> None:
        """Refuse an input that is no tensor, not floating point, not on the CPU, of another number of
        dimensions than `ndims` (None: any), or whose dimension `dim` is not `size` (`what` names it)."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{self.label()}: the input must be a torch.Tensor (got {type(x).__name__})")
        if not x.is_floating_point():
            raise TypeError(
                f"{self.label()}: the input has dtype {x.dtype}; analog layers, like torch's, take "
                "floating-point inputs (x.float())"
            )
        if (x.device.type != "cpu") != (self.gpu_tiles and self.blocks[0].tile.torch_device.type != "cpu"):
            where = "a GPU" if self.gpu_tiles else "the CPU"
            raise RuntimeError(f"{self.label()}: the input is on {x.device}, the layer's tiles on {where}")
        if (ndims is not None and x.dim() not in ndims) or x.dim() == 0 or x.shape[dim] != size:
            dims = "" if ndims is None else " or ".join(f"{n}-D" for n in ndims) + " input with "
            raise ValueError(f"{self.label()}: got an input of shape {tuple(x.shape)}, expected {dims}{size} {what}")

    def _apply(self, fn: Callable, recurse: bool = True):
        """`.cuda()`, `.to(device)` move the tiles with the parameters (move_tiles); dtype casts (`.double()`,
        `.half()`) are refused: the arrays hold float32 weights, which such a cast would not change."""
        try:
            probe = fn(torch.zeros(0))
        except (RuntimeError, AssertionError) as err:  # e.g. .cuda() on a build without CUDA
            raise RuntimeError(f"{self.label()}: cannot move the layer ({err})") from None
        if probe.device.type not in ("cpu", "cuda"):
            raise RuntimeError(f"{self.label()}: analog layers run on the CPU or a CUDA GPU, not on {probe.device}")
        if probe.device.type == "cuda" or self.gpu_tiles:
            self.move_tiles(probe.device)
        if probe.dtype != torch.float32:
            raise TypeError(
                f"{self.label()}: analog layers compute in float32 (the arrays hold float32 "
                f"weights); a cast to {probe.dtype} would leave their outputs float32"
            )
        return super()._apply(fn, recurse)

    def move_tiles(self, device: torch.device | str, gpu_kernels: bool | None = None) -> None:
        """Put the tiles on `device`: on a CUDA device each tile becomes a devices.gpu.tile.GpuTile (its
        arrays in tensors there, its reads and updates GPU kernels), on the CPU an AnalogTile again, with
        its state. gpu_kernels=True with the CPU: GpuTiles on the CPU, for Numba's CUDA simulator (tests)."""
        device = torch.device(device)
        gpu = device.type == "cuda" if gpu_kernels is None else gpu_kernels
        if gpu:
            from aimc.devices.gpu.tile import GpuTile  # the GPU path loads only where it is used

            def place(tile):
                host = tile.to_host() if self.gpu_tiles else tile
                return GpuTile(host, device)
        else:

            def place(tile):
                return tile.to_host() if self.gpu_tiles else tile

        self.blocks = [TileBlock(place(b.tile), b.r0, b.r1, b.c0, b.c1) for b in self.blocks]
        self.gpu_tiles = gpu
        self.clear_saved()

    # -- weights ----------------------------------------------------------------------------------------
    def analog_weight(self) -> np.ndarray:
        """Effective analog weight (out, in_ext) assembled from the tiles (exact, no read noise)."""
        w = np.zeros((self.out_features, self.in_ext), np.float32)
        for b in self.blocks:
            fw = b.tile.forward_weight()
            w[b.r0 : b.r1, b.c0 : b.c1] = fw.cpu().numpy() if isinstance(fw, torch.Tensor) else fw
        return w

    def get_weights(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weight (out, in / groups), bias or None) of the equivalent digital layer, output scale folded in."""
        w = torch.from_numpy(self.analog_weight())
        bias = None
        if self.analog_bias:
            rows = torch.arange(self.out_features)
            bias = w.reshape(self.out_features, self.groups, -1)[rows, rows // (self.out_features // self.groups), -1]
            w = self._inputs_of(w)
        elif self.bias is not None:
            bias = self.bias.detach().clone()
        w = self._group_blocks(w).clone()
        if self.out_scale is not None:
            s = self.out_scale.detach()
            w = w * s[:, None]
            if bias is not None and self.analog_bias:
                bias = bias * s
        return w, bias

    def digital_twin(self) -> nn.Module:
        """A fresh torch layer of this layer's type and shape, initialised by torch (from its generator)."""
        raise NotImplementedError

    def weight_matrix(self, weight: torch.Tensor) -> torch.Tensor:
        """The (out, in / groups) matrix of a torch layer's weight of this layer's shape."""
        return weight.reshape(self.out_features, -1)

    def reset_parameters(self) -> None:
        """Draw the weights (and bias) as torch initialises the digital layer (for Linear and ConvNd:
        kaiming-uniform, bound 1/sqrt(fan_in)), from torch's generator, and write them into the tiles."""
        twin = self.digital_twin()
        self.set_weights(self.weight_matrix(twin.weight), twin.bias)

    def _block_diagonal(self, w: np.ndarray) -> np.ndarray:
        """(out, in / groups) -> the (out, in) block-diagonal matrix the tiles hold (groups > 1)."""
        if self.groups == 1:
            return w
        og, ig = self.out_features // self.groups, self.in_features // self.groups
        full = np.zeros((self.out_features, self.in_features), np.float32)
        for g in range(self.groups):
            full[g * og : (g + 1) * og, g * ig : (g + 1) * ig] = w[g * og : (g + 1) * og]
        return full

    def _group_blocks(self, full: torch.Tensor) -> torch.Tensor:
        """(out, in) block-diagonal -> (out, in / groups), each group's rows with its own columns."""
        if self.groups == 1:
            return full
        og, ig = self.out_features // self.groups, self.in_features // self.groups
        return torch.cat([full[g * og : (g + 1) * og, g * ig : (g + 1) * ig] for g in range(self.groups)])

    def set_weights(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Write weights (out, in / groups), or torch's weight of the layer, exactly into array 0 (clipped to
        each element's bounds), others zero (as aihwkit's set_weights); the digital bias is copied, an analog
        bias goes into its column."""
        weight = self.weight_matrix(weight) if weight.dim() > 2 else weight  # torch's layout of a convolution
        w = weight.detach().reshape(self.out_features, -1).to(torch.float32).numpy()
        w = self._block_diagonal(w)
        if self.analog_bias:  # each group's inputs, then its bias column (nonzero in the group's rows only)
            og, ig = self.out_features // self.groups, self.in_features // self.groups
            ext = np.zeros((self.out_features, self.groups, ig + 1), np.float32)
            ext[:, :, :ig] = w.reshape(self.out_features, self.groups, ig)
            if bias is not None:
                rows = np.arange(self.out_features)
                ext[rows, rows // og, ig] = bias.detach().numpy()
            w = ext.reshape(self.out_features, self.in_ext)
        elif bias is not None and self.bias is not None:
            with torch.no_grad():
                self.bias.copy_(bias.detach())
        for b in self.blocks:
            b.tile.set_weight(w[b.r0 : b.r1, b.c0 : b.c1])

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

    def _matmul(self, x2d: torch.Tensor, with_bias: bool = True) -> torch.Tensor:
        """(rows, out) = read(W, x2d), plus the digital bias unless an output scale must come first (or the
        layer adds its bias itself: with_bias=False)."""
        save = torch.is_grad_enabled() and self.training
        bias = self.bias if self.out_scale is None and with_bias else None
        return AnalogMatmul.apply(x2d, self._anchor, bias, self, save)

    # -- state ------------------------------------------------------------------------------------------
    def get_extra_state(self):
        return {
            "version": 1,
            "seed": self.seed,
            "algorithm": self.algorithm,
            "device": device_identity(self.tile_config),
            "tiles": [state_to_torch(b.tile.state_dict()) for b in self.blocks],
        }

    def set_extra_state(self, state) -> None:
        tiles = state["tiles"]
        if len(tiles) != len(self.blocks):
            raise ValueError(f"checkpoint has {len(tiles)} tiles, layer has {len(self.blocks)}")
        if int(state["seed"]) != self.seed:
            raise ValueError(self._seed_mismatch(int(state["seed"])))
        check_device(state.get("device"), device_identity(self.tile_config), self.label())
        for b, s in zip(self.blocks, tiles):
            s = state_to_numpy(s)
            b.tile.set_stack([float(g) for g in np.asarray(s["gains"]).ravel()])
            b.tile.load_state_dict(s)
        self.algorithm = state.get("algorithm")
        self.clear_saved()

    def _seed_mismatch(self, saved: int) -> str:
        """The message for a checkpoint of another seed, in the seeds the user gave (convert's `seed`,
        from which layer k's tile seeds derive as seeds.layer_seed(seed, k), or the layer's own `seed`)."""
        why = "the per-element device parameters drawn from it would differ"
        if self.convert_seed is not None:
            stride = seeds.LAYER_STRIDE
            return (
                f"{self.label()}: the checkpoint was converted with seed={saved // stride}, this model with "
                f"seed={self.convert_seed}; {why}: convert with seed={saved // stride} to load it"
            )
        return (
            f"{self.label()}: the checkpoint's layer has seed={saved}, this layer seed={self.seed}; {why}: "
            f"build the layer with seed={saved} to load it"
        )

    def extra_repr(self) -> str:
        g = self.blocks[0].tile.gains.tolist()
        return (
            f"{self.in_features}, {self.out_features}, tiles={self.n_row_blocks}x{self.n_col_blocks}, "
            f"bias={'analog' if self.analog_bias else self.bias is not None}, gains={g}"
        )


class AnalogLinear(AnalogLayer):
    """y = W x (+ b): a Linear layer on analog tiles, its weights drawn as nn.Linear draws them (init=False:
    zero weights and bias, for a layer whose weights are written next, as `from_digital` does)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        tile_config: TileConfig | None = None,
        seed: int = 0,
        *,
        init: bool = True,
    ):
        super().__init__()
        self._init_tiles(out_features, in_features, bias, tile_config or TileConfig(), seed)
        if init:
            self.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x, None, "features in its last dimension", -1, self.in_features)
        lead = x.shape[:-1]
        y = self._matmul(x.reshape(-1, self.in_features).to(torch.float32))
        return self._finish(y, 1).reshape(*lead, self.out_features)

    @classmethod
    def from_digital(cls, lin: nn.Linear, cfg: TileConfig, seed: int = 0) -> AnalogLinear:
        m = cls(lin.in_features, lin.out_features, lin.bias is not None, cfg, seed, init=False)
        m.set_weights(lin.weight, lin.bias)
        return m

    def digital_twin(self) -> nn.Linear:
        return nn.Linear(self.in_features, self.out_features, bias=self.analog_bias or self.bias is not None)

    def to_digital(self) -> nn.Linear:
        w, b = self.get_weights()
        lin = self.digital_twin()
        with torch.no_grad():
            lin.weight.copy_(w)
            if b is not None:
                lin.bias.copy_(b)
        return lin


def analog_layers(model: nn.Module) -> list[AnalogLayer]:
    """The analog layers of a model, in module order (the order optimizer state refers to)."""
    return [m for m in model.modules() if isinstance(m, AnalogLayer)]


def refuse_unmappable(layer_cls: type, module: nn.Module) -> None:
    """Raise a ValueError naming `module` and the reason where `layer_cls.unsupported(module)` gives one."""
    why = layer_cls.unsupported(module)
    if why is not None:
        raise ValueError(f"{layer_cls.__name__} cannot take {module}: {why}")
