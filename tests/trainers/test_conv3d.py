"""3-d convolutions (plain, grouped, transposed) and grouped convolutions with an analog bias against torch's
layers on an ideal tile: outputs, input, bias and weight gradients (the sum d^T x the optimizer applies)
within float32 rounding; convert maps nn.Conv3d / nn.ConvTranspose3d and exports them back; a training
step on the default device changes the weights."""

import numpy as np
import pytest
import torch
from conv_helpers import PERFECT, converted_in_groups
from torch import nn

from aimc import trainers as T
from aimc.trainers import conv_patches

LAYERS_3D = [
    lambda: nn.Conv3d(3, 4, 3),
    lambda: nn.Conv3d(2, 3, (3, 2, 2), stride=(2, 1, 3), padding=(1, 0, 2), dilation=(1, 2, 1)),
    lambda: nn.Conv3d(4, 6, (2, 3, 1), stride=2, padding=1, groups=2, bias=False),
    lambda: nn.Conv3d(3, 6, 2, dilation=(2, 1, 1), groups=3),  # depthwise with channel multiplier 2
    lambda: nn.ConvTranspose3d(3, 4, 2),
    lambda: nn.ConvTranspose3d(2, 3, (3, 2, 2), stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2)),
    lambda: nn.ConvTranspose3d(4, 6, (2, 3, 2), stride=2, dilation=(1, 2, 1), groups=2, bias=False),
    lambda: nn.ConvTranspose3d(4, 4, 3, stride=(1, 2, 2), padding=1, output_padding=(0, 1, 0), groups=4),
]


def _run(layer, analog, x):
    """(outputs, input gradients) of the torch and the analog layer for the loss sum(y * linspace) (weights
    from -0.5 to 1, so that no channel's bias gradient cancels to a sum of rounding errors)."""
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ys = [m(v) for m, v in zip((layer, analog), xs)]
    for y in ys:
        (y * torch.linspace(-0.5, 1, y.numel()).reshape(y.shape)).sum().backward()
    return ys, [v.grad for v in xs]


def _applied_gradient(analog) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The optimizer's gradient sum d^T x of the tiles, as (torch's weight layout, analog bias column or None)."""
    xs, ds = analog.pop_batch()
    full = torch.from_numpy(ds.T @ xs)  # (out, in_ext), block-diagonal
    bias = None
    if analog.analog_bias:
        rows = torch.arange(analog.out_features)
        bias = full.reshape(analog.out_features, analog.groups, -1)[
            rows, rows // (analog.out_features // analog.groups), -1
        ]
        full = analog._inputs_of(full)
    return full, bias


@pytest.mark.parametrize("make", LAYERS_3D)
@pytest.mark.parametrize("max_size", [512, 5])  # one tile per group, or several per group
def test_3d_convolutions_match_torch(make, max_size):
    torch.manual_seed(0)
    layer = make()
    model = converted_in_groups(layer, max_size)
    analog = model[0]
    ys, grads = _run(layer, analog, torch.randn(2, layer.in_channels, 5, 6, 4))
    assert ys[1].shape == ys[0].shape
    torch.testing.assert_close(ys[1], ys[0], atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(grads[1], grads[0], atol=2e-6, rtol=1e-5)
    if layer.bias is not None:  # sums of up to 1760 terms of size <= 1 (per output channel)
        torch.testing.assert_close(analog.bias.grad, layer.bias.grad, atol=1e-4, rtol=1e-5)
    full, _ = _applied_gradient(analog)
    weight_grad = analog.digital_weight(analog._group_blocks(full), layer.weight.shape)
    torch.testing.assert_close(weight_grad, layer.weight.grad, atol=1e-5, rtol=1e-5)
    back = T.to_digital(model)[0]
    assert type(back) is type(layer)
    torch.testing.assert_close(back.weight, layer.weight)
    for name in ("stride", "padding", "dilation", "groups", "output_padding"):
        assert getattr(back, name, None) == getattr(layer, name, None)


def test_3d_layers_take_unbatched_input_and_torch_initialisation():
    torch.manual_seed(3)
    analog = T.AnalogConv3d(2, 3, 2, stride=2, tile_config=PERFECT)
    torch.manual_seed(3)
    ref = nn.Conv3d(2, 3, 2, stride=2)
    assert torch.equal(analog.to_digital().weight, ref.weight) and torch.equal(analog.to_digital().bias, ref.bias)
    x = torch.randn(2, 4, 5, 6)
    torch.testing.assert_close(analog(x), ref(x), atol=2e-6, rtol=1e-5)
    with pytest.raises(ValueError, match=r"AnalogConv3d\(2, 3, .*\): got an input of shape \(2, 4, 5\)"):
        analog(torch.randn(2, 4, 5))
    with pytest.raises(ValueError, match=r"spatial size \(4, 1, 5\) with padding \(0, 0, 0\) is smaller than"):
        analog(torch.randn(2, 4, 1, 5))


def test_transposed_3d_output_size_picks_the_output_padding_as_torch():
    torch.manual_seed(4)
    conv = nn.ConvTranspose3d(2, 3, 3, stride=(2, 3, 1), padding=1)
    analog = T.convert(nn.Sequential(conv), PERFECT)[0]
    x = torch.randn(2, 2, 3, 4, 5)
    for size in [(5, 10, 5), (6, 12, 5), (2, 3, 6, 11, 5)]:
        want = conv(x, output_size=list(size))
        got = analog(x, output_size=size)
        assert got.shape == want.shape and torch.allclose(got, want, atol=2e-6)
    with pytest.raises(ValueError, match=r"^AnalogConvTranspose3d\(.*\): output_size .* is not reachable"):
        analog(x, output_size=(7, 10, 5))


def test_patch_maps_equal_torchs_unfold_and_fold_and_are_adjoint():
    """The 3-d im2col equals F.unfold of a 2-d input lifted to depth 1, and fold is its adjoint:
    <unfold(x), c> = <x, fold(c)> for random x and c."""
    torch.manual_seed(6)
    geometry = (1, 3, 2), (1, 2, 3), (0, 1, 2), (1, 2, 1)  # kernel, stride, padding, dilation
    x = torch.randn(2, 3, 4, 7, 9)
    cols = conv_patches.unfold(x, *geometry)
    two_d = [g[1:] for g in geometry]
    for depth in range(4):
        want = torch.nn.functional.unfold(x[:, :, depth], two_d[0], two_d[3], two_d[2], two_d[1])
        assert torch.equal(cols.reshape(2, 3 * 6, 4, -1)[:, :, depth], want)
    c = torch.randn_like(cols)
    lhs = (cols * c).sum()
    rhs = (x * conv_patches.fold(c, x.shape[2:], *geometry)).sum()
    torch.testing.assert_close(lhs, rhs, rtol=1e-5, atol=1e-4)


GROUPED = [
    lambda: nn.Conv2d(4, 6, 3, padding=1, groups=2),
    lambda: nn.Conv1d(4, 8, 3, groups=4, stride=2),  # depthwise with channel multiplier 2
    lambda: nn.Conv3d(6, 3, 2, groups=3),
]


@pytest.mark.parametrize("make", GROUPED)
@pytest.mark.parametrize("max_size", [512, 4])
def test_grouped_analog_bias_matches_torch(make, max_size):
    """Each group's tiles hold its bias as one more column (fed with 1): outputs and input gradients as
    torch's, the bias read back exactly, and the bias column's applied gradient torch's bias gradient."""
    torch.manual_seed(2)
    layer = make()
    with torch.no_grad():
        layer.bias.uniform_(-0.5, 0.5)
    cfg = PERFECT.model_copy(update={"bias": "analog", "max_in": max_size, "max_out": max_size})
    analog = T.convert(nn.Sequential(layer), cfg, strict=True)[0]
    g = layer.groups
    og, ig = analog.out_features // g, analog.in_features // g
    assert analog.bias is None and analog.in_ext == analog.in_features + g
    last = {}
    for b in analog.blocks:  # inside group k's rows and its (ig + 1) columns
        k = b.r0 // og
        assert (b.r1 - 1) // og == k and k * (ig + 1) <= b.c0 < b.c1 <= (k + 1) * (ig + 1)
        last[k] = max(last.get(k, 0), b.c1)
    assert last == {k: (k + 1) * (ig + 1) for k in range(g)}  # each group's grid ends with its bias column
    weight, bias = analog.get_weights()
    assert torch.equal(bias, layer.bias.detach()) and torch.equal(weight, analog.weight_matrix(layer.weight))
    spatial = {nn.Conv1d: (9,), nn.Conv2d: (5, 6), nn.Conv3d: (3, 4, 5)}[type(layer)]
    ys, grads = _run(layer, analog, torch.randn(2, layer.in_channels, *spatial))
    torch.testing.assert_close(ys[1], ys[0], atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(grads[1], grads[0], atol=2e-6, rtol=1e-5)
    full, bias_grad = _applied_gradient(analog)
    torch.testing.assert_close(bias_grad, layer.bias.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(analog.digital_weight(analog._group_blocks(full), layer.weight.shape), layer.weight.grad)
    back = T.to_digital(nn.Sequential(analog))[0]
    assert torch.equal(back.bias, layer.bias) and torch.equal(back.weight, layer.weight)


def test_grouped_analog_bias_trains_only_the_diagonal_blocks():
    """Analog SGD on the default device: the weights and each group's bias change, the elements between the
    groups' blocks (weights and bias columns) stay zero."""
    torch.manual_seed(1)
    model = T.convert(nn.Sequential(nn.Conv3d(4, 4, 2, groups=2)), T.TileConfig(bias="analog"))
    before = model[0].analog_weight().copy()
    opt = T.build_optimizer(model, T.AnalogSGDConfig(lr=0.1))
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(2, 4, 3, 3, 3)).pow(2).sum().backward()
        opt.step()
    full = model[0].analog_weight()
    mask = np.kron(np.eye(2), np.ones((2, 4 * 8 // 2 + 1))).astype(bool)
    assert full.shape == (4, 4 * 8 + 2) and len(model[0].blocks) == 2
    assert np.all(full[~mask] == 0) and np.all(before[~mask] == 0)
    assert not np.array_equal(full[:, [16, 33]], before[:, [16, 33]])  # the bias columns trained
    assert np.abs(full - before).max() > 0


@pytest.mark.parametrize("make", [lambda: nn.Conv3d(2, 3, 2, padding=1), lambda: nn.ConvTranspose3d(2, 3, 2, stride=2)])
def test_a_3d_layer_trains_with_analog_sgd(make):
    torch.manual_seed(5)
    model = T.convert(nn.Sequential(make()), T.TileConfig())
    before = model[0].analog_weight().copy()
    opt = T.build_optimizer(model, T.AnalogSGDConfig(lr=0.1))
    x = torch.randn(2, 2, 3, 4, 3)
    opt.zero_grad()
    model(x).pow(2).sum().backward()
    opt.step()
    after = model[0].analog_weight()
    assert np.isfinite(after).all() and np.abs(after - before).max() > 0
