"""The registry of the algorithms: one list of optimizer classes gives the names, the config union and
`build_optimizer`; an algorithm is its module (config beside optimizer) and its entry in that list."""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np
import pytest
from pydantic import TypeAdapter
from torch import nn

from aimc import trainers
from aimc.common.errors import ConfigError
from aimc.devices import AnalogTile, Linear
from aimc.trainers.algorithms import OPTIMIZER_CLASSES, AlgorithmConfig, AnalogOptimizer
from aimc.trainers.algorithms.transfer_parts import ReadEMA, ReadSum, ReferenceTracking, ThresholdBuffer


def test_the_names_the_union_and_the_optimizers_come_from_one_list():
    assert trainers.ALGORITHMS == tuple(trainers.OPTIMIZERS) == tuple(c.algorithm for c in OPTIMIZER_CLASSES)
    union = get_args(get_args(trainers.TrainerConfig)[0])
    assert union == tuple(c.config for c in OPTIMIZER_CLASSES)
    adapter = TypeAdapter(trainers.TrainerConfig)
    for name, cls in trainers.OPTIMIZERS.items():
        assert type(adapter.validate_python({"algorithm": name})) is cls.config
        assert cls.config.__module__ == cls.__module__  # the config sits beside its optimizer


def test_an_optimizer_is_named_by_its_config():
    class ToyConfig(AlgorithmConfig):
        algorithm: Literal["toy"] = "toy"

    class Toy(AnalogOptimizer):
        config = ToyConfig

        def update_block(self, li, bi, block, x, d):
            self.gradient_update(block, x, d, 0)

    assert Toy.algorithm == "toy"


def test_an_unknown_algorithm_is_refused_with_the_known_ones():
    with pytest.raises(Exception, match="residual_v2"):
        trainers.build_optimizer(None, {"algorithm": "nope"})


def _tile() -> AnalogTile:
    return AnalogTile(2, 3, Linear(dw_min=0.1, tau=1.0), gains=(1.0, 0.5), seed=1)


def test_the_threshold_buffer_fires_whole_pulses_and_keeps_the_rest():
    tile, st = _tile(), {}
    buf = ThresholdBuffer(threshold=1.0)
    h = buf.of(st, tile)
    dw = tile.granularity(0)
    ReadSum(1.0).fold(h, np.array([1]), np.array([[2.5 * dw, -0.5 * dw]], np.float32))
    fired = buf.fire(tile, st, h, 0, max_pulses=31, cols=np.array([1]))
    assert fired == 2 and st["H"] is h
    np.testing.assert_allclose(h[:, 1], [0.5 * dw, -0.5 * dw], rtol=1e-5)
    assert not st["_counts"].any()


def test_the_read_ema_folds_reads_into_the_buffer():
    h = np.ones((2, 3), np.float32)
    ReadEMA(0.25).fold(h, np.array([0, 2]), np.zeros((2, 2), np.float32))
    np.testing.assert_array_equal(h, [[0.75, 1.0, 0.75], [0.75, 1.0, 0.75]])


def test_reference_tracking_follows_and_switches_through_the_tile():
    tile, st = _tile(), {}
    ref = ReferenceTracking(rate=0.5, every_read=True)
    ref.start(tile, st)
    assert st["c"] == 1.0 and not st["Q"].any()
    signal = ref.follow(tile, st, np.array([2]), np.array([[0.2, -0.4]], np.float32))
    np.testing.assert_allclose(st["Q"][:, 2], [0.1, -0.2])
    np.testing.assert_allclose(signal, [[0.2, -0.4]])
    assert ref.track(tile, st, np.array([2])) == 2
    np.testing.assert_array_equal(tile.reference(1, np.array([2]))[:, 0], st["Q"][:, 2])
    assert ref.switch(tile, st, gamma=0.5) == 6
    assert st["c"] == -1.0 and list(tile.gains) == [1.0, -0.5]
    np.testing.assert_array_equal(tile.reference(1), st["Q"])


def test_build_optimizer_takes_a_name_and_says_what_is_wrong_in_one_line_per_field():
    model = _net()
    assert type(trainers.build_optimizer(model, "analog_sgd")).__name__ == "AnalogSGD"
    with pytest.raises(ConfigError) as err:
        trainers.build_optimizer(model, {"algorithm": "analog_sgd", "lr": "x"})
    assert str(err.value) == "trainer.lr: Input should be a valid number (got 'x')"
    with pytest.raises(ConfigError, match=r"^trainer: Input tag 'nope' found using 'algorithm'"):
        trainers.build_optimizer(model, "nope")
    with pytest.raises(TypeError, match=r"`trainer_cfg` must be an algorithm's config.*got int"):
        trainers.build_optimizer(model, 3)


@pytest.mark.parametrize(
    "cfg, line",
    [
        ({"algorithm": "rider", "gamma": 1e30}, "trainer.gamma: Input should be less than or equal to 16777216"),
        ({"algorithm": "residual", "gamma": 2.0**24 * 2}, "trainer.gamma: Input should be less than or equal to"),
        ({"algorithm": "c_ttv2", "gamma": 1e30, "in_chop_prob": 0}, "trainer.gamma: Input should be less than"),
        ({"algorithm": "c_ttv2", "transfer_every": 1e30}, "trainer.transfer_every: transfer_every = 1e+30: a period"),
        ({"algorithm": "agad", "transfer_every": -1e30}, "trainer.transfer_every: transfer_every = -1e+30: a period"),
    ],
)
def test_gains_and_periods_beyond_what_the_model_means_are_refused_by_field(cfg, line):
    """A gain above 2^24 leaves the main array below float32's resolution of the mixed weight; a period
    above 2^53 is no integer a float64 holds."""
    with pytest.raises(ConfigError) as err:
        trainers.build_optimizer(_net(), cfg)
    assert str(err.value).startswith(line)
    ok = {**cfg, **{k: v for k, v in {"gamma": 2.0**24, "transfer_every": 2.0**53}.items() if k in cfg}}
    TypeAdapter(trainers.TrainerConfig).validate_python(ok)  # the bounds themselves are taken


def _net():
    return trainers.convert(nn.Sequential(nn.Linear(4, 3)), trainers.TileConfig(device="reram_sb"))
