"""Shared set-up of the convolution tests: an exact tile and a layer converted onto it, grid by grid."""

from __future__ import annotations

from torch import nn

from aimc import trainers as T
from aimc.devices import Ideal, PeripheryConfig

PERFECT = T.TileConfig(
    device=Ideal(tau=2.0, dw_min=1e-3), forward=PeripheryConfig.perfect(), backward=PeripheryConfig.perfect()
)
"""A tile that reads and holds the weights exactly."""


def converted_in_groups(layer: nn.Module, max_size: int) -> nn.Sequential:
    """nn.Sequential(layer) converted onto PERFECT tiles of at most max_size x max_size, its layer checked to be
    its analog class with every tile inside one group's diagonal block."""
    cfg = PERFECT.model_copy(update={"max_in": max_size, "max_out": max_size})
    model = T.convert(nn.Sequential(layer), cfg, strict=True)
    analog = model[0]
    assert type(analog).__name__ == "Analog" + type(layer).__name__
    og, ig = analog.out_features // layer.groups, analog.in_features // layer.groups
    for b in analog.blocks:
        assert b.r0 // og == (b.r1 - 1) // og == b.c0 // ig == (b.c1 - 1) // ig
    return model
