"""Resets during transfers (with_reset_prob, aihwkit 1.1.0's TransferCompound): the read column of the fast
array is reset to its reset value between the read and the write, with probability with_reset_prob per read."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from optimizer_helpers import DW, batches, drive, dyadic_batches, exact_model, mse_step
from torch import nn

from aimc import trainers as T
from aimc.common.errors import ConfigError
from aimc.devices import ConstantStep, Linear
from aimc.devices.pulse_trains import MAX_BL

RESET = 0.1  # reset value b of the test device (reset_dtod 0: every element's b is exactly 0.1)


def reset_device(reset_std: float = 0.0) -> ConstantStep:
    """A constant-step device without spread whose reset value is RESET."""
    return ConstantStep(
        dw_min=DW,
        dw_min_dtod=0.0,
        dw_min_std=0.0,
        up_down_dtod=0.0,
        w_max_dtod=0.0,
        w_min_dtod=0.0,
        reset=RESET,
        reset_std=reset_std,
    )


def fast_weights(model) -> np.ndarray:
    return T.analog_layers(model)[0].blocks[0].tile.arrays[1].weights


def main_weights(model) -> np.ndarray:
    return T.analog_layers(model)[0].blocks[0].tile.arrays[0].weights


@pytest.mark.parametrize("cfg", [T.TikiTakaConfig, T.TTv2Config])
def test_reset_prob_one_resets_the_read_column_after_its_read(cfg):
    data = dyadic_batches(1, 2, 4, 3, seed=1)
    runs = {}
    for p in (0.0, 1.0):
        model = exact_model(device=reset_device())
        opt = T.build_optimizer(model, cfg(lr=DW * 8, transfer_lr=0.5, with_reset_prob=p))
        drive(model, opt, data)
        runs[p] = model, opt
    (m0, _), (m1, opt1) = runs[0.0], runs[1.0]
    p0, p1 = fast_weights(m0), fast_weights(m1)
    assert np.abs(p0[:, 0] - RESET).min() > DW  # the gradient moved the read column away from b
    np.testing.assert_array_equal(p1[:, 0], np.float32(RESET))  # column 0 read, then reset: b exactly
    np.testing.assert_array_equal(p1[:, 1:], p0[:, 1:])  # the other columns untouched
    np.testing.assert_array_equal(main_weights(m1), main_weights(m0))  # W got the read from before the reset
    assert opt1.costs()["resets"] == 1 and "resets" not in runs[0.0][1].costs()


def test_half_of_the_reads_reset_within_binomial_error():
    n = 400
    model = exact_model(device=reset_device())
    opt = T.build_optimizer(model, T.TikiTakaConfig(lr=DW * 8, transfer_lr=0.5, with_reset_prob=0.5))
    data = dyadic_batches(n, 2, 4, 3, seed=2)
    seen = 0
    for k, step in enumerate(data):
        before = fast_weights(model)[:, k % 4].copy()
        drive(model, opt, [step])
        after = fast_weights(model)[:, k % 4]
        seen += bool(np.all(after == np.float32(RESET)) and not np.all(before == np.float32(RESET)))
    assert opt.costs()["resets"] >= seen
    assert abs(opt.costs()["resets"] / n - 0.5) < 4 * np.sqrt(0.25 / n)  # 4 sigma of Binomial(400, 0.5)
    assert abs(seen / n - 0.5) < 4 * np.sqrt(0.25 / n) + 0.05  # a reset column already at b is not seen


@pytest.mark.parametrize(
    "make, value",
    [
        (T.TikiTakaConfig, 1.5),
        (T.TikiTakaConfig, -0.1),
        (T.TTv2Config, 2.0),
        (T.TTv2Config, float("nan")),
        (T.CTTv2Config, 0.5),
        (T.AGADConfig, 1.0),
    ],
)
def test_bad_reset_prob_is_refused_by_name(make, value):
    with pytest.raises((ValueError, ConfigError), match="with_reset_prob"):
        make(with_reset_prob=value)


def test_reset_needs_a_device_with_reset():
    lin = nn.Linear(4, 3, bias=False)
    model = T.convert(nn.Sequential(lin), T.TileConfig(device=Linear(tau=1.0, dw_min=1e-2)))
    with pytest.raises(ValueError, match="with_reset_prob"):
        T.build_optimizer(model, T.TikiTakaConfig(with_reset_prob=0.5))


def noisy_model(cfg):
    """A 6-3 layer on tiles of at most 4 inputs, noisy reads, pulsed updates, resets with cycle noise."""
    torch.manual_seed(3)
    dev = ConstantStep(dw_min=1e-2, reset=RESET, reset_dtod=0.02, reset_std=0.01)
    model = T.convert(nn.Sequential(nn.Linear(6, 3)), T.TileConfig(device=dev, max_in=4), seed=5)
    return model, T.build_optimizer(model, cfg)


@pytest.mark.parametrize(
    "cfg",
    [
        T.TikiTakaConfig(lr=0.2, transfer_lr=0.5, n_columns=2, with_reset_prob=0.5),
        T.TTv2Config(lr=0.2, transfer_lr=0.5, with_reset_prob=0.5),
    ],
)
def test_resume_with_resets_is_bit_exact(cfg):
    data = batches()
    straight = noisy_model(cfg)
    for x, y in data:
        mse_step(*straight, x, y)
    model, opt = noisy_model(cfg)
    for x, y in data[:4]:
        mse_step(model, opt, x, y)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    resumed = noisy_model(cfg)
    resumed[0].load_state_dict(ck["model"])
    resumed[1].load_state_dict(ck["opt"])
    for x, y in data[4:]:
        mse_step(*resumed, x, y)
    for a, b in zip(T.analog_layers(straight[0]), T.analog_layers(resumed[0])):
        assert np.array_equal(a.analog_weight(), b.analog_weight())
        for ta, tb in zip(a.tiles, b.tiles):
            assert np.array_equal(ta.arrays[1].w, tb.arrays[1].w)
    assert straight[1].costs()["resets"] == resumed[1].costs()["resets"] > 0


def test_transfer_bl_reaches_the_update_limit():
    """A transfer's own BL (transfer_bl) goes as far as an update's desired_bl, and is refused by name beyond."""
    T.build_optimizer(T.convert(nn.Sequential(nn.Linear(4, 3))), {"algorithm": "tiki_taka", "transfer_bl": MAX_BL})
    with pytest.raises(ConfigError, match="transfer_bl"):
        T.build_optimizer(
            T.convert(nn.Sequential(nn.Linear(4, 3))), {"algorithm": "tiki_taka", "transfer_bl": MAX_BL + 1}
        )
