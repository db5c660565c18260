"""Analog layers against torch's digital layers (ideal periphery, constant-step device), splitting, the
digital bias and output scale, export to digital."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

from aimc import trainers as T
from aimc.devices import Ideal, PeripheryConfig

PERFECT = T.TileConfig(
    device=Ideal(tau=2.0, dw_min=1e-3), forward=PeripheryConfig.perfect(), backward=PeripheryConfig.perfect()
)


def _forward_backward(model, x):
    x = x.detach().clone().requires_grad_(True)
    y = model(x)
    (y * torch.linspace(-1, 1, y.numel()).reshape(y.shape)).sum().backward()
    return y.detach(), x.grad


@pytest.mark.parametrize("bias", ["digital", "analog"])
def test_analog_linear_matches_linear(bias):
    torch.manual_seed(0)
    lin = nn.Linear(20, 7)
    cfg = PERFECT.model_copy(update={"bias": bias})
    ana = T.AnalogLinear.from_digital(lin, cfg)
    x = torch.randn(5, 20)
    y0, g0 = _forward_backward(lin, x)
    y1, g1 = _forward_backward(ana, x)
    assert torch.allclose(y0, y1, atol=1e-5)
    assert torch.allclose(g0, g1, atol=1e-5)
    assert lin.weight.grad is not None  # digital weights get grads, analog ones never do
    assert not any(p.numel() == 7 * 20 for p in ana.parameters())


@pytest.mark.parametrize("out_scale", [False, True, "column"])
def test_digital_bias_and_output_scale_get_the_digital_gradient(out_scale):
    """The bias added inside the bridge (no output scale) or after the scale: nn.Linear's / nn.Conv2d's
    bias gradient, the sum of d over the batch (and pixels). The output scale s (one per layer, or one per
    output channel) multiplies W x before the bias: dL/ds = sum of d * (W x) over the batch (pixels,
    and the channels it scales)."""
    torch.manual_seed(3)
    cfg = PERFECT.model_copy(update={"out_scale": out_scale})
    for dig, x in ((nn.Linear(12, 5), torch.randn(6, 12)), (nn.Conv2d(2, 3, 3), torch.randn(2, 2, 6, 6))):
        ana = T.convert(nn.Sequential(copy.deepcopy(dig)), cfg)[0]
        y, _ = _forward_backward(dig, x)
        _forward_backward(ana, x)
        assert torch.allclose(ana.bias.grad, dig.bias.grad, atol=1e-5)
        if out_scale:
            channels = y.shape[1]
            assert ana.out_scale.shape == ((channels,) if out_scale == "column" else (1,))
            shape = (1, channels) + (1,) * (y.dim() - 2)
            wx = y - dig.bias.detach().view(shape)  # the scale starts at 1
            d = torch.linspace(-1, 1, y.numel()).reshape(y.shape)
            per_channel = (d * wx).transpose(0, 1).reshape(channels, -1).sum(1)
            want = per_channel if out_scale == "column" else per_channel.sum().reshape(1)
            assert torch.allclose(ana.out_scale.grad, want, atol=1e-4)


def test_convert_splits_large_linear_and_matches():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(700, 300), nn.Tanh(), nn.Linear(300, 10))
    ref = copy.deepcopy(model)
    for bias in ("digital", "analog"):
        cfg = PERFECT.model_copy(update={"max_in": 256, "max_out": 128, "bias": bias})
        ana = T.convert(copy.deepcopy(ref), cfg)
        first = ana[0]
        assert isinstance(first, T.AnalogLinear)
        assert (first.n_row_blocks, first.n_col_blocks) == (3, 3)  # 300 / 128, (700 [+1]) / 256
        assert all(t.out_size <= 128 and t.in_size <= 256 for t in first.tiles)
        x = torch.rand(4, 700)
        y0, g0 = _forward_backward(ref, x)
        y1, g1 = _forward_backward(ana, x)
        assert torch.allclose(y0, y1, atol=1e-4), (y0 - y1).abs().max()
        assert torch.allclose(g0, g1, atol=1e-5)
        dig = T.to_digital(ana)
        assert isinstance(dig[0], nn.Linear)
        assert torch.allclose(dig(x), y0, atol=1e-4)


def test_convert_named_layers_only():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    T.convert(model, PERFECT, layers=["2"])
    assert isinstance(model[0], nn.Linear) and isinstance(model[2], T.AnalogLinear)
    with pytest.raises(ValueError, match="no Linear/Conv1d/Conv2d layer named"):
        T.convert(model, PERFECT, layers=["7"])


@pytest.mark.parametrize("kw", [dict(stride=1, padding=1), dict(stride=2, padding=0, dilation=2)])
def test_analog_conv2d_matches_conv2d(kw):
    torch.manual_seed(2)
    conv = nn.Conv2d(3, 5, 3, **kw)
    ana = T.AnalogConv2d.from_digital(conv, PERFECT)
    x = torch.randn(2, 3, 9, 9)
    y0, g0 = _forward_backward(conv, x)
    y1, g1 = _forward_backward(ana, x)
    assert y0.shape == y1.shape
    assert torch.allclose(y0, y1, atol=1e-5)
    assert torch.allclose(g0, g1, atol=1e-5)
    assert torch.allclose(T.to_digital(ana)(x), y0, atol=1e-5)
    x2, d2 = ana.pop_batch()
    assert x2.shape == (2 * y0.shape[2] * y0.shape[3], 27) and d2.shape == (x2.shape[0], 5)


def test_eval_and_no_grad_do_not_save():
    ana = T.AnalogLinear(4, 3, tile_config=PERFECT)
    with torch.no_grad():
        ana(torch.ones(2, 4))
    ana.eval()
    ana(torch.ones(2, 4)).sum().backward()
    assert ana.pop_batch() is None


def test_state_dict_round_trip_weights_only(tmp_path):
    model = T.convert(
        nn.Sequential(nn.Linear(6, 5), nn.Sigmoid(), nn.Linear(5, 3)),
        T.TileConfig(device="r1_power_1", max_in=4, max_out=4),
        seed=3,
    )
    opt = T.build_optimizer(model, T.ResidualConfig(zero_shift_cycles=20))
    nn.functional.mse_loss(model(torch.rand(3, 6)), torch.zeros(3, 3)).backward()
    opt.step()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "c.pt")
    ck = torch.load(tmp_path / "c.pt", weights_only=True)
    fresh = T.convert(
        nn.Sequential(nn.Linear(6, 5), nn.Sigmoid(), nn.Linear(5, 3)),
        T.TileConfig(device="r1_power_1", max_in=4, max_out=4),
        seed=3,
    )
    fresh.load_state_dict(ck["model"])
    for a, b in zip(T.analog_layers(model), T.analog_layers(fresh)):
        assert np.array_equal(a.analog_weight(), b.analog_weight())
        assert len(b.tiles[0].arrays) == 2 and b.algorithm == "residual"
    with pytest.raises(ValueError, match="seed"):
        T.convert(
            nn.Sequential(nn.Linear(6, 5), nn.Sigmoid(), nn.Linear(5, 3)),
            T.TileConfig(device="r1_power_1", max_in=4, max_out=4),
            seed=4,
        ).load_state_dict(ck["model"])
