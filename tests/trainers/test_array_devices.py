"""A different device per array of a compound algorithm (TileConfig.devices): array n gets device n's
parameters, the count is checked against the algorithm's arrays, and a run trains."""

import numpy as np
import pytest
import torch
from torch import nn

from aimc import trainers as T
from aimc.common.errors import ConfigError
from aimc.devices import Ideal, PeripheryConfig

SLOW = Ideal(tau=1.0, dw_min=1e-3)
FAST = {"preset": "r1_power_1", "tau": 0.4, "dw_min": 5e-3}  # an inline preset table with changed fields
PERFECT = PeripheryConfig.perfect()


def _small_linear(seed=0):
    """Linear(4, 3) with weights inside +-0.25 (within every device's bounds here)."""
    torch.manual_seed(seed)
    lin = nn.Linear(4, 3)
    with torch.no_grad():
        lin.weight.mul_(0.5)
    return nn.Sequential(lin)


def _model(devices, seed=0):
    cfg = T.TileConfig(devices=devices, forward=PERFECT, backward=PERFECT)
    return T.convert(_small_linear(seed), cfg, seed=seed)


@pytest.mark.parametrize(
    "algorithm",
    [
        T.TikiTakaConfig(lr=0.05),
        T.TTv2Config(lr=0.05),
        T.ResidualConfig(lr=0.05, zero_shift=False),
        T.ResidualV2Config(lr=0.05, zero_shift=False),
        T.CTTv2Config(),
        T.AGADConfig(),
        T.RiderConfig(),
        T.ERiderConfig(),
    ],
    ids=lambda c: c.algorithm,
)
def test_array_n_gets_device_n(algorithm):
    model = _model([SLOW, FAST])
    opt = T.build_optimizer(model, algorithm)
    for _ in range(3):  # steps with transfers run on arrays of two devices
        opt.zero_grad()
        model(torch.randn(8, 4)).pow(2).sum().backward()
        opt.step()
    tile = model[0].tiles[0]
    assert len(tile.arrays) == 2
    assert tile.bounds(0) == (-1.0, 1.0) and tile.granularity(0) == pytest.approx(1e-3)
    assert tile.bounds(1) == (-0.4, 0.4) and tile.granularity(1) == pytest.approx(5e-3)
    assert type(tile.arrays[0].device).__name__ == "Ideal" and type(tile.arrays[1].device).__name__ != "Ideal"


def test_the_multi_tile_cascade_takes_one_device_per_tile():
    taus = [1.0, 0.8, 0.5]
    model = _model([Ideal(tau=t, dw_min=1e-3 * (n + 1)) for n, t in enumerate(taus)])
    T.build_optimizer(model, T.MultiTileConfig(n_tiles=3, zero_shift=False))
    tile = model[0].tiles[0]
    assert [tile.bounds(n)[1] for n in range(3)] == taus
    assert [tile.granularity(n) for n in range(3)] == pytest.approx([1e-3, 2e-3, 3e-3])


def test_the_device_count_must_match_the_algorithm():
    with pytest.raises(
        ValueError,
        match=r"AnalogLinear\(4, 3\): tile.devices gives 2 devices, the training "
        r"algorithm uses 4 arrays per tile",
    ):
        T.build_optimizer(_model([SLOW, FAST]), T.MultiTileConfig(n_tiles=4))
    with pytest.raises(ValueError, match=r"tile.devices gives 2 devices, the training algorithm uses 1 arrays"):
        T.build_optimizer(_model([SLOW, FAST]), T.AnalogSGDConfig())
    with pytest.raises(ConfigError, match=r"give `device` .* or `devices` .*, not both"):
        T.TileConfig(device="r1_power_1", devices=[SLOW, FAST])
    with pytest.raises(ConfigError, match=r"tile.devices: .*devices\[1\]: unknown device 'r1_powr_1'"):
        T.TileConfig(devices=["r1_power_1", "r1_powr_1"])


def test_one_device_for_every_array_is_the_default():
    """`devices=[d, d]` builds the same arrays as `device=d` (same seeds, same draws)."""
    one = T.TileConfig(device=FAST, forward=PERFECT, backward=PERFECT)
    two = T.TileConfig(devices=[FAST, FAST], forward=PERFECT, backward=PERFECT)
    tiles = []
    for cfg in (one, two):
        model = T.convert(_small_linear(), cfg)
        T.build_optimizer(model, T.TikiTakaConfig())
        tiles.append(model[0].tiles[0])
    for a, b in zip(tiles[0].arrays, tiles[1].arrays):
        assert np.array_equal(a.w, b.w) and np.array_equal(a.reference, b.reference)
        assert all(np.array_equal(x, y) for x, y in zip(a.bounds, b.bounds))


@pytest.mark.parametrize(
    "algorithm",
    [T.TikiTakaConfig(lr=0.1, transfer_lr=0.1), T.ResidualConfig(lr=0.1, transfer_lr=0.1, zero_shift=False)],
)
def test_a_run_on_two_devices_trains(algorithm):
    """Least squares y = A x on a fast array of one device and a slow array of another: the loss falls."""
    torch.manual_seed(0)
    target = torch.randn(3, 4) * 0.3
    model = _model([SLOW, FAST])
    opt = T.build_optimizer(model, algorithm)
    x_eval = torch.randn(256, 4)

    def loss():
        with torch.no_grad():
            return float(((model(x_eval) - x_eval @ target.T) ** 2).mean())

    before = loss()
    for _ in range(300):
        x = torch.randn(16, 4)
        opt.zero_grad()
        ((model(x) - x @ target.T) ** 2).mean().backward()
        opt.step()
    assert loss() < 0.3 * before


def test_an_unset_devices_field_is_left_out_of_the_dump():
    """Configs without `devices` keep their canonical JSON, hence the config hash of their run folders."""
    assert "devices" not in T.TileConfig().model_dump()
    dumped = T.TileConfig(devices=["r1_power_1", FAST]).model_dump(mode="json")
    assert "device" not in dumped and T.TileConfig(**dumped).resolved_devices()[1].tau == 0.4
