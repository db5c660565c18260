"""Inference layers: the mapping scales, the exact read against torch's layers, training by a torch
optimizer, programming and drift with an exact noise model."""

import importlib

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from aimc import trainers
from aimc.devices.patch_read import read_patches
from aimc.devices.periphery import PeripheryConfig
from aimc.trainers import InferenceTileConfig

EXACT = dict(forward=PeripheryConfig.perfect(), noise_model="none", drift_compensation="none")


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, stride=2), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))


def test_exact_tiles_equal_the_digital_model():
    model = _model()
    x = torch.randn(3, 2, 8, 8)
    ref = model(x)
    trainers.convert(model, InferenceTileConfig(**EXACT))
    assert [type(m).__name__ for m in model] == ["InferenceConv2d", "Flatten", "InferenceLinear"]
    torch.testing.assert_close(model(x), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(trainers.to_digital(model)(x), ref, rtol=1e-5, atol=1e-5)


def test_conv_patches_without_gradient_equal_unfold_and_torch_conv():
    """Without a gradient the patches are a strided gather, with one F.unfold: the same reads, bit for bit,
    and torch's convolution (padding, stride, dilation, a 3 x 5 kernel, inputs split over tiles)."""
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 6, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(1, 2))
    x = torch.randn(2, 3, 11, 13)
    ref = conv(x).detach()
    layer = trainers.convert(nn.Sequential(conv), InferenceTileConfig(**EXACT, mapping=dict(max_input_size=20)))[0]
    with torch.no_grad():
        gathered = layer(x)
    unfolded = layer(x.clone().requires_grad_()).detach()
    assert len(layer.tiles) == 3
    assert torch.equal(gathered, unfolded)
    torch.testing.assert_close(gathered, ref, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(layer(x[0]), ref[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("out_bound", [12.0, 0.5])
def test_programmed_conv_reads_its_patches_from_the_image_as_the_unfolded_rows(out_bound, monkeypatch):
    """Evaluation of programmed tiles through a noisy periphery reads the patches from the image (no gradient
    to x) or the F.unfold rows (a gradient to x): the same noise draws, values bit for bit (tiles split over
    inputs and outputs, padding, stride, dilation; bound management's re-reads with out_bound 0.5)."""
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 6, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(1, 2))
    x = torch.randn(2, 3, 11, 13)
    mapping = dict(max_input_size=20, max_output_size=4)
    cfg = InferenceTileConfig(forward=PeripheryConfig(out_bound=out_bound), mapping=mapping)
    layer = trainers.convert(nn.Sequential(conv), cfg)[0].eval()
    calls = []
    layers = importlib.import_module("aimc.trainers.inference_layers")  # the module (the package's name is a function)
    monkeypatch.setattr(layers, "read_patches", lambda *a: calls.append(1) or read_patches(*a))
    trainers.program(layer, t_inference=3600.0)
    counters = [t.stream.counter for t in layer.tiles]
    with torch.no_grad():
        from_image = layer(x)
    after = [t.stream.counter for t in layer.tiles]
    for tile, c in zip(layer.tiles, counters):
        tile.stream.counter = c
    unfolded = layer(x.clone().requires_grad_()).detach()
    assert len(layer.tiles) == 6 and len(calls) == 6
    assert torch.equal(from_image, unfolded)
    assert [t.stream.counter for t in layer.tiles] == after
    assert (max(after) - max(counters) > 1) == (out_bound < 1)


@pytest.mark.parametrize("columnwise", [False, True])
def test_weight_scaling_maps_the_abs_max_to_omega(columnwise):
    model = _model()
    w = model[2].weight.detach().clone()
    cfg = InferenceTileConfig(**EXACT, mapping=dict(weight_scaling_omega=0.8, weight_scaling_columnwise=columnwise))
    trainers.convert(model, cfg)
    layer = model[2]
    tile = layer.weight.detach()
    if columnwise:
        torch.testing.assert_close(tile.abs().amax(dim=1), torch.full((5,), 0.8))
        torch.testing.assert_close(layer.out_scale, w.abs().amax(dim=1) / 0.8)
    else:
        assert float(tile.abs().max()) == pytest.approx(0.8)
        torch.testing.assert_close(layer.out_scale, w.abs().max().reshape(1) / 0.8)
    torch.testing.assert_close(layer.digital_weight(), w)


def test_learned_output_scales_are_parameters_that_train():
    model = _model()
    cfg = InferenceTileConfig(**EXACT, mapping=dict(learn_out_scaling=True, out_scaling_columnwise=True))
    trainers.convert(model, cfg)
    names = {n for n, _ in model.named_parameters()}
    assert {"2.out_scale", "0.out_scale"} <= names
    assert model[2].out_scale.shape == (5,)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 2, 8, 8), torch.randint(0, 5, (16,))
    before = model[2].out_scale.detach().clone()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    assert not torch.equal(model[2].out_scale.detach(), before)


def test_gradients_equal_the_digital_model():
    model, ref = _model(), _model()
    trainers.convert(model, InferenceTileConfig(**EXACT))
    x, y = torch.randn(6, 2, 8, 8), torch.randint(0, 5, (6,))
    F.cross_entropy(model(x), y).backward()
    F.cross_entropy(ref(x), y).backward()
    torch.testing.assert_close(model[0].weight.grad, ref[0].weight.grad.reshape(4, -1), rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(model[2].bias.grad, ref[2].bias.grad, rtol=1e-4, atol=1e-6)


def test_modifier_acts_in_training_only():
    model = _model()
    cfg = InferenceTileConfig(**EXACT, modifier=dict(type="add_normal", std_dev=0.5))
    trainers.convert(model, cfg)
    x = torch.randn(2, 2, 8, 8)
    model.eval()
    assert torch.equal(model(x), model(x))
    model.train()
    assert not torch.equal(model(x), model(x))


def test_program_and_drift_read_the_programmed_weights():
    model = _model()
    x = torch.randn(2, 2, 8, 8)
    trainers.convert(model, InferenceTileConfig(**EXACT)).eval()
    ref = model(x)
    trainers.program(model, t_inference=3600.0)
    assert all(layer.programmed for layer in trainers.inference_layers(model))
    torch.testing.assert_close(model(x), ref)
    with torch.no_grad():
        model[2].tiles[0].read.zero_()
    assert not torch.allclose(model(x), ref)
    trainers.unprogram(model)
    torch.testing.assert_close(model(x), ref)


def test_program_needs_inference_layers():
    with pytest.raises(ValueError, match="no inference layers"):
        trainers.program(_model())
    with pytest.raises(ValueError, match="t_inference"):
        trainers.drift(trainers.convert(_model(), InferenceTileConfig(**EXACT)), -1.0)


def test_large_layers_split_into_even_tiles_that_sum_to_the_layer():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 7))
    x = torch.randn(4, 20)
    ref = model(x)
    cfg = InferenceTileConfig(**EXACT, mapping=dict(max_input_size=8, max_output_size=4))
    trainers.convert(model, cfg)
    tiles = model[0].tiles
    assert [(t.rows.stop - t.rows.start, t.cols.stop - t.cols.start) for t in tiles] == [
        (4, 7),
        (4, 7),
        (4, 6),
        (3, 7),
        (3, 7),
        (3, 6),
    ]
    torch.testing.assert_close(model(x), ref, rtol=1e-5, atol=1e-5)
    trainers.program(model.eval(), t_inference=10.0)
    torch.testing.assert_close(model(x), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("noise_model", ["pcm", "custom_drift_pcm", "state_independent", "reram_wan2022", "reram_cmo"])
@pytest.mark.parametrize("compensation", ["global", "global_exact_reference", "per_column"])
def test_every_noise_model_and_compensation_programs_and_drifts(noise_model, compensation):
    model = _model()
    x = torch.randn(2, 2, 8, 8)
    options = {}
    if noise_model == "custom_drift_pcm":
        table = {"g_lst": [0.0, 10.0, 25.0], "nu_mean_lst": [0.08, 0.05, 0.03], "nu_std_lst": [0.03, 0.02, 0.01]}
        options = {"custom_drift_model": table}
    cfg = InferenceTileConfig(noise_model=noise_model, noise_model_options=options, drift_compensation=compensation)
    trainers.convert(model, cfg).eval()
    trainers.program(model, t_inference=86400.0)
    y = model(x)
    assert torch.isfinite(y).all()
    alpha = model[2].tiles[0].alpha
    assert alpha.numel() == (5 if compensation == "per_column" else 1) and bool((alpha > 0).all())


def test_bad_noise_model_options_name_the_field():
    with pytest.raises(ValueError, match="noise_model_options"):
        trainers.convert(_model(), InferenceTileConfig(noise_model_options={"g_maxx": 1.0}))


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_average_abs_max_is_refused_on_inference_tiles(direction):
    """Its running average lives on training tiles; an inference tile names the field instead of reading
    with a fresh average at every call."""
    with pytest.raises(ValueError, match=f"{direction}.noise_management: average_abs_max"):
        InferenceTileConfig(**{direction: PeripheryConfig(noise_management="average_abs_max")})
    InferenceTileConfig(forward=PeripheryConfig(noise_management="abs_max_np_sum"))
