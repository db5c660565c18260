"""What a user coming from plain torch or aihwkit trips over: AnalogConv1d against torch's conv1d, the layers
convert leaves digital, a torch optimizer on an analog model, device and dtype casts, input and argument
errors, the seed named on a checkpoint mismatch, the device typo from Python."""

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from aimc import ConfigError
from aimc import trainers as T
from aimc.devices import Ideal, PeripheryConfig, UpdateConfig

PERFECT = T.TileConfig(
    device=Ideal(tau=2.0, dw_min=1e-3), forward=PeripheryConfig.perfect(), backward=PeripheryConfig.perfect()
)


@pytest.mark.parametrize("kwargs", [dict(), dict(stride=2, padding=3, dilation=2), dict(bias=False)])
def test_analog_conv1d_matches_torch_conv1d(kwargs):
    """Forward, input gradient and bias gradient of torch.nn.functional.conv1d, batched and unbatched."""
    torch.manual_seed(0)
    conv = nn.Conv1d(3, 4, 5, **kwargs)
    ana = T.convert(nn.Sequential(copy.deepcopy(conv)), PERFECT)[0]
    assert isinstance(ana, T.AnalogConv1d)
    x = torch.randn(2, 3, 17, requires_grad=True)
    want = F.conv1d(x, conv.weight, conv.bias, conv.stride, conv.padding, conv.dilation)
    got = ana(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    d = torch.linspace(-1, 1, want.numel()).reshape(want.shape)
    (gx_want,) = torch.autograd.grad((want * d).sum(), x)
    (gx,) = torch.autograd.grad((got * d).sum(), x)
    torch.testing.assert_close(gx, gx_want, atol=1e-5, rtol=0)
    torch.testing.assert_close(ana(x[0]), want[0], atol=1e-5, rtol=0)
    back = T.to_digital(nn.Sequential(ana))[0]
    assert type(back) is nn.Conv1d
    torch.testing.assert_close(back.weight, conv.weight)


def test_analog_conv1d_trains_a_1d_signal_model():
    """Analog SGD on an ideal expected-update device follows digital SGD's first step on a 1-d conv model."""
    torch.manual_seed(1)
    cfg = PERFECT.model_copy(update={"update": UpdateConfig(mode="expected")})
    digital = nn.Sequential(nn.Conv1d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 6, 2))
    analog = T.convert(copy.deepcopy(digital), cfg)
    x, y = torch.randn(4, 1, 8), torch.tensor([0, 1, 0, 1])
    for model, opt in (
        (digital, torch.optim.SGD(digital.parameters(), lr=0.1)),
        (analog, T.build_optimizer(analog, {"algorithm": "analog_sgd", "lr": 0.1})),
    ):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    w_digital = digital[0].weight.detach().reshape(2, -1)
    w_analog = analog[0].get_weights()[0]
    assert not torch.allclose(w_digital, nn.Conv1d(1, 2, 3).weight.reshape(2, -1))
    torch.testing.assert_close(w_analog, w_digital, atol=2e-3, rtol=0)  # two dw_min of the device


def test_convert_names_the_layers_it_leaves_digital():
    model = nn.Sequential()
    model.add_module("rnn", nn.LSTMCell(4, 8))
    model.add_module("attn", nn.MultiheadAttention(8, 2))
    model.add_module("reflected", nn.Conv2d(4, 4, 3, padding_mode="reflect"))
    model.add_module("norm", nn.LayerNorm(8))
    model.add_module("fc", nn.Linear(8, 2))
    with pytest.warns(UserWarning, match=r"stay digital") as rec:
        T.convert(copy.deepcopy(model), PERFECT)
    msg = str(rec[0].message)
    parts = ("rnn (LSTMCell: recurrent", "attn (MultiheadAttention", "reflected (Conv2d: padding_mode='reflect'")
    for part in (*parts, "strict=True"):
        assert part in msg
    assert "norm" not in msg and "out_proj" not in msg
    with pytest.raises(ValueError, match=r"strict=True.*rnn \(LSTMCell"):
        T.convert(copy.deepcopy(model), PERFECT, strict=True)
    converted = T.convert(copy.deepcopy(model), PERFECT, layers=["fc"], strict=True)  # nothing named is left
    assert isinstance(converted.fc, T.AnalogLinear) and type(converted.attn.out_proj) is not T.AnalogLinear
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        T.convert(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(2, 2)), PERFECT)


@pytest.mark.parametrize("make", [lambda p: torch.optim.Adam(p, lr=1e-3), lambda p: torch.optim.SGD(p, lr=0.1)])
def test_a_torch_optimizer_on_an_analog_model_is_refused_at_its_first_step(make):
    model = T.convert(nn.Sequential(nn.Linear(6, 3)), PERFECT)
    opt = make(model.parameters())
    F.cross_entropy(model(torch.randn(2, 6)), torch.tensor([0, 1])).backward()
    bias = model[0].bias.detach().clone()
    with pytest.raises(TypeError, match=r"holds parameters of AnalogLinear\(6, 3\).*build_optimizer"):
        opt.step()
    assert torch.equal(model[0].bias, bias)
    digital = nn.Linear(6, 3)  # torch optimizers on digital models are left alone
    torch.optim.Adam(digital.parameters()).step()


def test_layers_refuse_other_devices_and_dtypes():
    model = T.convert(nn.Sequential(nn.Linear(6, 3), nn.ReLU()), PERFECT)
    for cast in (lambda m: m.double(), lambda m: m.half(), lambda m: m.to(torch.float64)):
        with pytest.raises(TypeError, match=r"AnalogLinear\(6, 3\): analog layers compute in float32"):
            cast(model)
    if not torch.cuda.is_available():  # torch's own refusal, behind the layer's name
        for move in (lambda m: m.cuda(), lambda m: m.to("cuda")):
            with pytest.raises(RuntimeError, match=r"AnalogLinear\(6, 3\): cannot move the layer \(.*CUDA"):
                move(model)
    with pytest.raises(RuntimeError, match=r"AnalogLinear\(6, 3\): analog layers run on the CPU or a CUDA GPU, not on"):
        model.to("meta")
    assert model.float().cpu().to("cpu") is model


def test_input_errors_name_the_layer_and_the_shapes():
    lin = T.AnalogLinear(784, 10, tile_config=PERFECT)
    with pytest.raises(
        ValueError,
        match=r"^AnalogLinear\(784, 10\): got an input of shape \(4, 100\), expected "
        r"784 features in its last dimension$",
    ):
        lin(torch.zeros(4, 100))
    with pytest.raises(RuntimeError):  # torch refuses the same input
        nn.Linear(784, 10)(torch.zeros(4, 100))
    with pytest.raises(RuntimeError):  # torch refuses integer inputs, and so do ours
        nn.Linear(784, 10)(torch.zeros(4, 784, dtype=torch.long))
    with pytest.raises(TypeError, match=r"dtype torch.int64.*floating-point"):
        lin(torch.zeros(4, 784, dtype=torch.long))
    conv = T.AnalogConv2d(3, 6, 5, tile_config=PERFECT)
    with pytest.raises(
        ValueError,
        match=r"AnalogConv2d\(3, 6, kernel_size=\(5, 5\)\): got an input of shape "
        r"\(2, 1, 28, 28\), expected 3-D or 4-D input with 3 channels",
    ):
        conv(torch.zeros(2, 1, 28, 28))
    with pytest.raises(
        ValueError,
        match=r"AnalogConv1d\(2, 4, kernel_size=\(3,\)\).*\(4, 5, 8\), expected 2-D or "
        r"3-D input with 2 channels",
    ):
        T.AnalogConv1d(2, 4, 3, tile_config=PERFECT)(torch.zeros(4, 5, 8))


def test_convert_names_a_bad_argument():
    with pytest.raises(TypeError, match=r"convert: `model` must be a torch.nn.Module \(got str 'not a model'\)"):
        T.convert("not a model")
    with pytest.raises(TypeError, match=r"`tile_cfg` must be a trainers.TileConfig.*got str 'r1_power_1'"):
        T.convert(nn.Sequential(nn.Linear(2, 2)), "r1_power_1")
    with pytest.raises(TypeError, match=r"`layers` must be a list of module names"):
        T.convert(nn.Sequential(nn.Linear(2, 2)), PERFECT, layers="0")
    with pytest.raises(ValueError, match=r"`seed` must be an integer >= 0 \(got -1\)"):
        T.convert(nn.Sequential(nn.Linear(2, 2)), PERFECT, seed=-1)
    with pytest.raises(ValueError, match=r"no Linear/Conv1d/Conv2d layer named \['fc'\]"):
        T.convert(nn.Sequential(nn.Linear(2, 2)), PERFECT, layers=["fc"])
    model = T.convert(nn.Sequential(nn.Linear(2, 2)), {"device": "r1_power_1"})  # a dict of TileConfig fields
    assert model[0].tile_config.device == "r1_power_1"


def test_seed_mismatch_names_the_seeds_the_user_gave():
    saved = T.convert(nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2)), PERFECT, seed=0).state_dict()
    other = T.convert(nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2)), PERFECT, seed=1)
    with pytest.raises(ValueError, match=r"converted with seed=0, this model with seed=1.*convert with seed=0"):
        other.load_state_dict(saved)
    layer = T.AnalogLinear(3, 2, tile_config=PERFECT, seed=7)
    with pytest.raises(ValueError, match=r"the checkpoint's layer has seed=5, this layer seed=7"):
        layer.load_state_dict(T.AnalogLinear(3, 2, tile_config=PERFECT, seed=5).state_dict())


def test_a_device_typo_is_one_line_when_the_config_is_built():
    """The message of `aimc train` (`tile.device: ...`), raised by TileConfig itself, before any convert."""
    with pytest.raises(ConfigError) as err:
        T.TileConfig(device="r1_powr_1")
    assert str(err.value).startswith("tile.device: unknown device 'r1_powr_1': not a preset (ideal, ")
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^tile.device: Input tag 'powr' found using 'kind' does not match"):
        T.TileConfig(device={"kind": "powr"})
    with pytest.raises(ConfigError, match=r"^tile.device.gama: Extra inputs are not permitted \(got 1\)$"):
        T.TileConfig(device={"kind": "power", "gama": 1})


def test_a_layer_whose_batches_no_analog_optimizer_takes_warns_once(monkeypatch):
    """A model without digital parameters in its analog layers (bias=False) trained by a torch optimizer over
    other layers: the analog layer's saved batches pile up, and it says so once."""
    import aimc.trainers.layers as layers

    monkeypatch.setattr(layers, "UNCONSUMED_WARNING", 3)
    model = nn.Sequential(nn.Linear(4, 4), T.AnalogLinear(4, 2, bias=False, tile_config=PERFECT))
    opt = torch.optim.SGD(model[0].parameters(), lr=0.1)  # holds no analog layer's parameter: not refused
    with pytest.warns(RuntimeWarning, match=r"AnalogLinear\(4, 2\): 3 backward passes.*build_optimizer") as rec:
        for _ in range(5):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    assert len([w for w in rec if issubclass(w.category, RuntimeWarning)]) == 1
