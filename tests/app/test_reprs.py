"""Readable reprs: a tile config shows the fields that differ from their defaults, a tile its shape and arrays."""

from __future__ import annotations

from torch import nn

from aimc import trainers as T


def test_a_tile_config_prints_its_non_defaults():
    assert repr(T.TileConfig()) == "TileConfig()"
    cfg = T.TileConfig(device="ecram", max_in=256, forward={"out_noise": 0.0})
    assert str(cfg) == "TileConfig(device='ecram', forward={'out_noise': 0.0}, max_in=256)"


def test_a_tile_prints_its_shape_device_and_arrays():
    model = T.convert(nn.Sequential(nn.Linear(4, 3)), T.TileConfig(device="ecram"), seed=2)
    T.build_optimizer(model, "tiki_taka")
    assert repr(model[0].tiles[0]).startswith("AnalogTile(3 x 4, device LinearStep, arrays 2, gains [1, ")
