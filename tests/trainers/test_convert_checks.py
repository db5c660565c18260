"""convert's checks: shared modules stay shared, clipped weights are reported, empty layers refused; directly
built analog layers start from torch's initialisation."""

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from aimc import trainers as T
from aimc.devices import Ideal, PeripheryConfig

PERFECT = T.TileConfig(
    device=Ideal(tau=2.0, dw_min=1e-3), forward=PeripheryConfig.perfect(), backward=PeripheryConfig.perfect()
)


def test_a_shared_layer_becomes_one_shared_analog_layer():
    torch.manual_seed(0)
    shared = nn.Linear(6, 6)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    x = torch.randn(4, 6)
    expected = model(x).detach()
    T.convert(model, PERFECT)
    assert isinstance(model[0], T.AnalogLinear) and model[2] is model[0]
    assert torch.allclose(model(x), expected, atol=1e-5)
    assert T.analog_layers(model) == [model[0]]
    opt = T.build_optimizer(model, T.AnalogSGDConfig(lr=0.01))
    assert opt.layers == [model[0]] and len(opt.tile_state) == 1
    assert sum(len(g["params"]) for g in opt.param_groups) == 1  # the digital bias, once
    model(x).sum().backward()  # both uses save their batch on the one layer: one update of 2 x 4 rows
    xs, ds = model[0].pop_batch()
    assert xs.shape == (8, 6) and ds.shape == (8, 6)


def test_a_shared_layer_named_at_its_second_place_is_converted():
    shared = nn.Linear(3, 3)
    model = nn.Sequential(nn.Linear(3, 3), shared, shared)
    T.convert(model, PERFECT, layers=["2"])
    assert isinstance(model[1], T.AnalogLinear) and model[1] is model[2] and isinstance(model[0], nn.Linear)


@pytest.mark.parametrize(
    ("analog", "digital", "args"),
    [
        (T.AnalogLinear, nn.Linear, (7, 5)),
        (T.AnalogConv2d, nn.Conv2d, (3, 4, 3)),
        (T.AnalogConv1d, nn.Conv1d, (2, 3, 5)),
    ],
)
def test_a_directly_built_layer_starts_from_torch_initialisation(analog, digital, args):
    torch.manual_seed(3)
    layer = analog(*args, tile_config=PERFECT)
    torch.manual_seed(3)
    ref = digital(*args)
    w, b = layer.get_weights()
    assert torch.equal(w, ref.weight.detach().reshape(w.shape)) and torch.equal(b, ref.bias.detach())
    assert float(w.abs().max()) > 0.1


def test_from_digital_draws_nothing_from_torch():
    lin = nn.Linear(4, 3)
    torch.manual_seed(5)
    T.convert(nn.Sequential(lin), PERFECT)
    after = torch.rand(2)
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(2))


def test_clipped_weights_warn_with_the_fraction_and_the_layer():
    lin = nn.Linear(4, 4)
    with torch.no_grad():
        lin.weight.copy_(torch.linspace(-1.23, 1.23, 16).reshape(4, 4))
    model = nn.Sequential(nn.Linear(4, 4), lin)
    msg = r"layer '1': 8 of 16 weights \(50.00%\) .*by up to 0.63; max \|W\| 1.23 written, 0.6 held"
    with pytest.warns(T.WeightClipWarning, match=msg) as rec:
        T.convert(model, T.TileConfig())  # the default device: bounds +-0.6
    assert len(rec) == 1 and issubclass(rec[0].category, UserWarning)
    assert "out_scale" in str(rec[0].message) and "TileConfig.device" in str(rec[0].message)
    expected = np.clip(np.linspace(-1.23, 1.23, 16, dtype=np.float32), -0.6, 0.6).reshape(4, 4)
    assert np.allclose(model[1].analog_weight(), expected, atol=1e-6)


def test_weights_inside_the_bounds_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        T.convert(nn.Sequential(nn.Linear(8, 4), nn.Conv2d(2, 3, 3)), T.TileConfig())


@pytest.mark.parametrize("layer", [nn.Linear(0, 5), nn.Linear(5, 0), nn.Conv2d(2, 0, 3)])
def test_an_empty_layer_is_one_clear_error(layer):
    model = nn.Sequential(nn.Linear(3, 3), layer)
    with pytest.raises(ValueError, match=r"^convert: layer '1' \(.*\) has an empty weight of shape .*no tile$"):
        T.convert(model, PERFECT)
    assert isinstance(model[0], nn.Linear)  # nothing converted
    with pytest.raises(ValueError, match=r"AnalogLinear\(0, 5\): an empty weight"):
        T.AnalogLinear(0, 5)
