"""Swap a torch model's Linear / Conv / ConvTranspose (1-d to 3-d) / RNN / LSTM / GRU layers for analog ones,
and export back to a digital model."""

from __future__ import annotations

import copy
import numbers
import warnings
from collections.abc import Iterable

import torch
from torch import nn

from aimc.common import seeds
from aimc.trainers.config import TileConfig
from aimc.trainers.conv_layers import (
    AnalogConv1d,
    AnalogConv2d,
    AnalogConv3d,
    AnalogConvTranspose1d,
    AnalogConvTranspose2d,
    AnalogConvTranspose3d,
)
from aimc.trainers.inference_config import InferenceTileConfig
from aimc.trainers.layers import AnalogLayer, AnalogLinear
from aimc.trainers.recurrent_layers import AnalogGRU, AnalogLSTM, AnalogRNN, AnalogRNNBase

ANALOG = {
    nn.Linear: AnalogLinear,
    nn.Conv1d: AnalogConv1d,
    nn.Conv2d: AnalogConv2d,
    nn.Conv3d: AnalogConv3d,
    nn.ConvTranspose1d: AnalogConvTranspose1d,
    nn.ConvTranspose2d: AnalogConvTranspose2d,
    nn.ConvTranspose3d: AnalogConvTranspose3d,
    nn.RNN: AnalogRNN,
    nn.LSTM: AnalogLSTM,
    nn.GRU: AnalogGRU,
}
"""The torch layers convert maps onto tiles, and their analog counterparts."""

NOT_MAPPED = {
    nn.RNNCellBase: "recurrent cells (RNNCell, LSTMCell, GRUCell) have no analog counterpart yet",
    nn.Embedding: "embeddings are table look-ups, not matrix products",
    nn.EmbeddingBag: "embeddings are table look-ups, not matrix products",
    nn.Bilinear: "bilinear layers have no analog counterpart yet",
    nn.MultiheadAttention: "attention uses its projection weights directly, not through its sub-layers",
}
"""Layers with weight matrices that convert leaves digital, and why. Normalization layers, activations
with parameters (PReLU) and other element-wise parameters stay digital by design and are not listed."""


class WeightClipWarning(UserWarning):
    """convert wrote weights outside the device's bounds: the analog layer holds them clipped."""


def _kind(m: nn.Module) -> type[nn.Module] | None:
    """The torch layer type among ANALOG that `m` is (exactly, or as a subclass), or None."""
    return next((t for t in ANALOG if isinstance(m, t)), None)


def digital_layers(model: nn.Module, layers: set[str] | None = None) -> dict[str, str]:
    """Qualified name -> reason of every layer with a weight matrix that `convert` leaves digital (the
    NOT_MAPPED types, convolutions it cannot map, uninitialized lazy layers); only the names in `layers`
    when given (and the layers inside them)."""
    found: dict[str, str] = {}
    for name, m in model.named_modules():
        if isinstance(m, AnalogLayer) or any(name.startswith(f"{n}.") for n in found):
            continue
        if layers is not None and name not in layers:
            continue
        why = next((w for t, w in NOT_MAPPED.items() if isinstance(m, t)), None)
        if why is None and isinstance(m, nn.modules.lazy.LazyModuleMixin) and m.has_uninitialized_params():
            why = "a lazy layer whose shape is not known yet (run one forward pass before convert)"
        kind = _kind(m)
        if why is None and kind is not None and kind is not nn.Linear:
            why = ANALOG[kind].unsupported(m)
        if why is not None:
            found[name or "(the model)"] = f"{type(m).__name__}: {why}"
    return found


def convert(
    model: nn.Module,
    tile_cfg: TileConfig | None = None,
    layers: Iterable[str] | None = None,
    seed: int = 0,
    strict: bool = False,
) -> nn.Module:
    """Replace (in place, and return) the model's nn.Linear, nn.Conv1d/2d/3d (grouped too),
    nn.ConvTranspose1d/2d/3d, nn.RNN, nn.LSTM and nn.GRU modules by their analog counterparts (`ANALOG`) on
    tiles of `tile_cfg`, with their current weights written into the arrays. A module used at several places
    becomes one analog module used at the same places; weights outside the device's bounds are clipped with
    a `WeightClipWarning`.

    layers: qualified module names (as in `model.named_modules()`) to convert; None converts all.
    A layer larger than max_out x max_in is split over a grid of tiles. Layer k (in module order) gets
    tile seeds derived from `seed` and k, so a conversion is reproducible.
    Layers with weight matrices that cannot be mapped (recurrent cells, non-zero padding modes, embeddings,
    attention; see `digital_layers`) stay digital: a `UserWarning` names each with the reason, and
    `strict=True` raises a ValueError instead.
    An `InferenceTileConfig` maps Linear and Conv2d onto inference tiles instead (trainers/inference_program.py).
    """
    if isinstance(tile_cfg, InferenceTileConfig):
        from aimc.trainers.inference_program import convert_inference  # noqa: PLC0415 (it imports this module)

        return convert_inference(model, tile_cfg, layers, seed)
    tile_cfg = _checked_args(model, tile_cfg, layers, seed)
    wanted = None if layers is None else set(layers)
    left = digital_layers(model, wanted)
    if left and strict:
        raise ValueError(
            "convert(strict=True): these layers cannot be mapped onto tiles: "
            + "; ".join(f"{n} ({w})" for n, w in left.items())
        )
    aliases = _aliases(model)
    names = {name for name, m in model.named_modules(remove_duplicate=False) if _kind(m) is not None}
    if wanted is not None:
        missing = wanted - names - set(left)
        if missing:
            raise ValueError(
                f"convert: no Linear/Conv1d/Conv2d layer named {sorted(missing)}; convertible: {sorted(names)}"
            )
    k = 0
    targets = []
    for name, m in model.named_modules():
        if isinstance(m, AnalogLayer):
            k += 1
            continue
        if _kind(m) is not None and (wanted is None or not wanted.isdisjoint(aliases[id(m)])):
            if name in left or any(name.startswith(f"{n}.") for n in left):
                continue
            targets.append((name, m, k))
            k += 1
    for name, m, _ in targets:
        _check_not_empty(name, m)
    for name, m, idx in targets:
        new = ANALOG[_kind(m)].from_digital(m, tile_cfg, seed=seeds.layer_seed(seed, idx))
        new.convert_seed = int(seed)
        new.train(m.training)
        _warn_clipped(name, m, new, tile_cfg)
        for alias in aliases[id(m)]:  # a module used at several places stays one (analog) module
            _set_module(model, alias, new)
    if left:
        warnings.warn(
            "convert: these layers stay digital (trained by plain SGD with `lr`): "
            + "; ".join(f"{n} ({w})" for n, w in left.items())
            + "; convert(..., strict=True) makes this an error",
            UserWarning,
            stacklevel=2,
        )
    return model


def _checked_args(model, tile_cfg, layers, seed) -> TileConfig:
    """Refuse arguments of the wrong kind by name, before anything changes; the tile config to use."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"convert: `model` must be a torch.nn.Module (got {type(model).__name__} {model!r:.60})")
    if _kind(model) is not None:
        raise ValueError(
            "convert() cannot replace the model itself; wrap the layer in a container (torch.nn.Sequential(layer))"
        )
    if tile_cfg is None:
        tile_cfg = TileConfig()
    elif isinstance(tile_cfg, dict):
        tile_cfg = TileConfig(**tile_cfg)
    elif not isinstance(tile_cfg, TileConfig):
        raise TypeError(
            f"convert: `tile_cfg` must be a trainers.TileConfig or a dict of its fields (got "
            f"{type(tile_cfg).__name__} {tile_cfg!r:.60}), e.g. TileConfig(device='r1_power_1')"
        )
    if isinstance(layers, str) or (layers is not None and not all(isinstance(n, str) for n in layers)):
        raise TypeError(f"convert: `layers` must be a list of module names, e.g. ['fc1'] (got {layers!r:.60})")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"convert: `seed` must be an integer >= 0 (got {seed!r})")
    return tile_cfg


def _aliases(model: nn.Module) -> dict[int, list[str]]:
    """id(module) -> every qualified name under which the model reaches it (several for a shared module)."""
    found: dict[int, list[str]] = {}
    for name, m in model.named_modules(remove_duplicate=False):
        found.setdefault(id(m), []).append(name)
    return found


def _check_not_empty(name: str, m: nn.Module) -> None:
    """Refuse a layer with an empty weight (e.g. Linear(0, 5)), which maps onto no tile."""
    empty = next((n for n, p in m.named_parameters() if p.numel() == 0), None)
    if empty is not None:
        shape = tuple(getattr(m, empty).shape)
        raise ValueError(f"convert: layer '{name}' ({m}) has an empty {empty} of shape {shape}; it maps onto no tile")


def _warn_clipped(name: str, digital: nn.Module, analog: nn.Module, cfg: TileConfig) -> None:
    """Warn where the analog layer holds weights other than the digital layer's (clipped to the bounds)."""
    with torch.random.fork_rng(devices=[]):  # the export's initialisation leaves torch's generator as it was
        held = analog.to_digital().state_dict()
    clipped = total = 0
    largest = kept = change = 0.0
    for key, w in digital.state_dict().items():
        if not (key.startswith("weight") or (key.startswith("bias") and cfg.bias == "analog")):
            continue
        a = held[key]
        diff = (a - w).abs()
        clipped += int((diff > 1e-6 + 1e-5 * w.abs()).sum())
        total += w.numel()
        largest, kept = max(largest, float(w.abs().max())), max(kept, float(a.abs().max()))
        change = max(change, float(diff.max()))
    if clipped:
        warnings.warn(
            f"convert: layer '{name}': {clipped} of {total} weights ({clipped / total:.2%}) lie outside their "
            f"elements' bounds and were clipped (by up to {change:.3g}; max |W| {largest:.3g} written, {kept:.3g} "
            "held); scale the weights into the bounds before convert (and learn the factor back with "
            "TileConfig(out_scale=True)) or widen the bounds of TileConfig.device",
            WeightClipWarning,
            stacklevel=3,
        )


def _set_module(model: nn.Module, name: str, new: nn.Module) -> None:
    if name == "":
        raise ValueError("convert() cannot replace the model itself; wrap the layer in a container")
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


def to_digital(model: nn.Module) -> nn.Module:
    """A deep copy of the model with every analog layer replaced by the equivalent torch layer (effective
    weight sum_n gains[n] W_n, output scale folded in, noiseless)."""
    analog = (AnalogLayer, AnalogRNNBase)
    if isinstance(model, analog):
        return model.to_digital()
    out = copy.deepcopy(model)
    done: list[str] = []
    for name, m in list(out.named_modules()):
        if isinstance(m, analog) and not any(name.startswith(f"{n}.") for n in done):
            _set_module(out, name, m.to_digital())
            done.append(name)
    return out
