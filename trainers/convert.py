"""Swap a torch model's Linear / Conv2d layers for analog ones, and export back to a digital model."""

from __future__ import annotations

import copy
from collections.abc import Iterable

from torch import nn

from aimc.trainers.config import TileConfig
from aimc.trainers.layers import AnalogConv2d, AnalogLayer, AnalogLinear


def convert(model: nn.Module, tile_cfg: TileConfig | None = None, layers: Iterable[str] | None = None,
            seed: int = 0) -> nn.Module:
    """Replace (in place, and return) the model's nn.Linear and nn.Conv2d modules by AnalogLinear /
    AnalogConv2d on tiles of `tile_cfg`, with their current weights written into the arrays.

    layers: qualified module names (as in `model.named_modules()`) to convert; None converts all.
    A layer larger than max_out x max_in is split over a grid of tiles. Layer k (in module order) gets
    tile seeds derived from `seed` and k, so a conversion is reproducible.
    """
    cfg = tile_cfg or TileConfig()
    wanted = None if layers is None else set(layers)
    names = {name for name, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))}
    if wanted is not None:
        missing = wanted - names
        if missing:
            raise ValueError(f"no Linear/Conv2d layer named {sorted(missing)}; convertible: {sorted(names)}")
    k = 0
    targets = []
    for name, m in model.named_modules():
        if isinstance(m, AnalogLayer):
            k += 1
            continue
        if isinstance(m, (nn.Linear, nn.Conv2d)) and (wanted is None or name in wanted):
            targets.append((name, m, k))
            k += 1
    for name, m, idx in targets:
        layer_seed = int(seed) * 1000 + idx
        if isinstance(m, nn.Linear):
            new = AnalogLinear.from_digital(m, cfg, seed=layer_seed)
        else:
            new = AnalogConv2d.from_digital(m, cfg, seed=layer_seed)
        new.train(m.training)
        _set_module(model, name, new)
    return model


def _set_module(model: nn.Module, name: str, new: nn.Module) -> None:
    if name == "":
        raise ValueError("convert() cannot replace the model itself; wrap the layer in a container")
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


def to_digital(model: nn.Module) -> nn.Module:
    """A deep copy of the model with every analog layer replaced by the equivalent nn.Linear / nn.Conv2d
    (effective weight sum_n gains[n] W_n, output scale folded in, noiseless)."""
    if isinstance(model, AnalogLayer):
        return model.to_digital()
    out = copy.deepcopy(model)
    for name, m in list(out.named_modules()):
        if isinstance(m, AnalogLayer):
            _set_module(out, name, m.to_digital())
    return out
