"""Values that pass a field's type and sign but would train nonsense are refused by field name, one line;
the boundary cases that are meaningful stay accepted (with what they do)."""

from __future__ import annotations

import numpy as np
import pytest

from aimc.common.errors import ConfigError
from aimc.devices import AnalogTile, PeripheryConfig, analog_mvm, parse_device
from aimc.devices.rng import Stream


@pytest.mark.parametrize(
    "fields, line",
    [
        (dict(dw_min=1e-300), "device.dw_min: 1e-300 underflows float32"),
        (dict(dw_min=1e-9), "device: dw_min: 1e-09 is below float32's resolution 7.15e-08 at the bounds"),
        (dict(write_noise_std=2000.0), "device: write_noise_std: 2000 x dw_min = 2 exceeds the weight range"),
        (dict(diffusion=5.0), "device: diffusion: 5 per step exceeds the weight range w_max - w_min = 1.2"),
        (dict(lifetime=0.5), "device.lifetime: 0.5 must be 0 (no decay) or above 1 optimizer step"),
        (dict(lifetime=1.0), "device.lifetime: 1 must be 0 (no decay) or above 1 optimizer step"),
        (dict(dw_min_dtod=1.5), "device: dw_min_dtod: 1.5 must be below 1 with the normal spread"),
    ],
)
def test_nonsense_values_are_refused_by_name(fields, line):
    with pytest.raises(ConfigError) as err:
        parse_device(dict(kind="SoftBounds", **fields))
    assert any(msg.startswith(line) for msg in str(err.value).splitlines()), str(err.value)


def test_the_meaningful_edges_are_accepted():
    """Just inside each limit; the log-normal step spread takes dw_min_dtod >= 1 (aihwkit: exp(dtod xi))."""
    parse_device(dict(kind="SoftBounds", dw_min=1e-7, write_noise_std=1200.0, diffusion=1.2, lifetime=1.0001))
    dev = parse_device(dict(kind="SoftBounds", dw_min_dtod=1.5, dw_min_dtod_log_normal=True))
    gains = dev.draw((200, 200), np.random.default_rng(0)).ep[..., 0] / dev.dw_min
    assert np.log(gains).std() == pytest.approx(1.5, rel=0.02)


def test_a_corrupt_devices_range_beyond_the_bounds_means_within_the_bounds():
    """corrupt_devices_range only narrows the bounds (aihwkit's C++ default is FLT_MAX): any range at or beyond
    them sticks elements uniformly between their own bounds."""
    fields = dict(kind="ConstantStep", corrupt_devices_prob=1.0, w_max_dtod=0.0, w_min_dtod=0.0)
    ep = parse_device(dict(fields, corrupt_devices_range=1e30)).draw((100, 100), np.random.default_rng(0)).ep
    stuck = ep[..., 2]
    assert stuck.min() >= -0.6 and stuck.max() <= 0.6
    assert stuck.mean() == pytest.approx(0.0, abs=0.02) and stuck.std() == pytest.approx(1.2 / 12**0.5, rel=0.02)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("delta_t, step_s", [(NAN, 1.0), (INF, 1.0), (-1.0, 1.0), (1.0, NAN)])
def test_idle_refuses_non_finite_times(delta_t, step_s):
    tile = AnalogTile(4, 3, parse_device(dict(kind="SoftBounds", lifetime=10.0)))
    with pytest.raises(ValueError, match=r"^idle: delta_t must be finite"):
        tile.idle(delta_t, step_s)


@pytest.mark.parametrize("cfg", [PeripheryConfig(), PeripheryConfig(noise_management=False), PeripheryConfig.perfect()])
def test_an_empty_batch_reads_an_empty_result(cfg):
    """Forward (row-major weight) and backward (a transposed view) of a batch of 0 samples: (0, out), no counter."""
    w = np.ones((4, 3), np.float32)
    for weight in (w, w.T):
        stream = Stream(0)
        y = analog_mvm(weight, np.zeros((0, weight.shape[1]), np.float32), cfg, stream)
        assert y.shape == (0, weight.shape[0]) and y.dtype == np.float32
        assert stream.counter == 0
    tile = AnalogTile(4, 3, parse_device(dict(kind="SoftBounds")))
    assert tile.backward(np.zeros((0, 4), np.float32)).shape == (0, 3)


NEGATIVE_STEPS = dict(
    dw_min=0.01,
    dw_min_dtod=0.5,
    dw_min_std=0.0,
    up_down_dtod=0.0,
    w_max_dtod=0.0,
    w_min_dtod=0.0,
    enforce_consistency=False,
    w_max=1.0,
    w_min=-1.0,
)
AIHWKIT_WRONG_WAY = {  # aihwkit 1.1.0, 100 x 100 tile, the update below: (fraction below 0, mean weight)
    "ConstantStep": (0.0232, 0.1001),
    "LinearStep": (0.0247, 0.0988),
    "SoftBounds": (0.0204, 0.0947),
    "ExpStep": (0.0235, 0.1003),
    "PowStep": (0.0230, 0.0950),
    "PiecewiseStep": (0.0205, 0.1015),
    "SoftBoundsReference": (0.0229, 0.0947),
}


@pytest.mark.parametrize("kind", list(AIHWKIT_WRONG_WAY))
def test_negative_steps_without_enforce_consistency_step_the_wrong_way(kind):
    """Without enforce_consistency a drawn step 1 + 0.5 xi < 0 stays negative (aihwkit keeps it): Phi(-2) =
    2.28% of the elements, whose up pulses move them down. From w = 0, one update W -= 0.1 d x^T with x = 1,
    d = -1 (10 up pulses per element, dw_min 0.01): the fraction below 0 and the mean are aihwkit 1.1.0's
    (measured; its binomial spread over 1e4 elements is 0.15 points)."""
    from aimc.devices import ConductanceArray, UpdateConfig

    dev = parse_device(dict(kind=kind, **NEGATIVE_STEPS))
    a = ConductanceArray(100, 100, dev, seed=0)
    assert (a.params.ep[..., 0] < 0).mean() == pytest.approx(0.0228, abs=0.0045)
    a.w[...] = 0
    a.update(np.ones((1, 100), np.float32), -np.ones((1, 100), np.float32), 0.1, UpdateConfig())
    below, mean = AIHWKIT_WRONG_WAY[kind]
    assert (a.w < 0).mean() == pytest.approx(below, abs=0.0045)
    assert a.w.mean() == pytest.approx(mean, rel=0.02)
