"""Grouped (depthwise included) and transposed convolutions on analog tiles against torch's layers on an ideal
tile: outputs, input and bias gradients, and the weight gradient the optimizer applies (sum d^T x)."""

import numpy as np
import pytest
import torch
from conv_helpers import PERFECT, converted_in_groups
from torch import nn

from aimc import trainers as T

LAYERS = [
    lambda: nn.Conv2d(4, 6, 3, padding=1, groups=2),
    lambda: nn.Conv2d(4, 4, 3, stride=2, groups=4),  # depthwise
    lambda: nn.Conv2d(3, 6, (3, 2), groups=3, bias=False),  # depthwise with channel multiplier 2
    lambda: nn.Conv1d(4, 8, 3, groups=4, dilation=2),
    lambda: nn.ConvTranspose2d(3, 5, 3),
    lambda: nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1, dilation=1),
    lambda: nn.ConvTranspose2d(4, 6, 3, stride=(2, 1), dilation=2, groups=2, bias=False),
    lambda: nn.ConvTranspose1d(2, 3, 4, stride=3, padding=1, output_padding=2),
]


def _weight_grad(layer, analog) -> np.ndarray:
    """The analog layer's applied gradient sum d^T x (block-diagonal), as torch's weight gradient."""
    xs, ds = analog.pop_batch()
    full = torch.from_numpy(ds.T @ xs)
    return analog.digital_weight(analog._group_blocks(full), layer.weight.shape).numpy()


@pytest.mark.parametrize("make", LAYERS)
@pytest.mark.parametrize("max_size", [512, 2])  # one tile per group, or several per group
def test_grouped_and_transposed_convolutions_match_torch(make, max_size):
    torch.manual_seed(0)
    layer = make()
    model = converted_in_groups(layer, max_size)
    analog = model[0]
    assert len({(b.r0, b.c0) for b in analog.blocks}) == len(analog.blocks) >= layer.groups
    one_d = isinstance(layer, (nn.Conv1d, nn.ConvTranspose1d))
    shape = (2, layer.in_channels, 7) if one_d else (2, layer.in_channels, 6, 5)
    x = torch.randn(shape)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ys = [m(v) for m, v in zip((layer, analog), xs)]
    weights = torch.linspace(-1, 1, ys[0].numel()).reshape(ys[0].shape)
    for y in ys:
        (y * weights).sum().backward()
    assert ys[1].shape == ys[0].shape
    torch.testing.assert_close(ys[1], ys[0], atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(xs[1].grad, xs[0].grad, atol=2e-6, rtol=1e-5)
    if layer.bias is not None:
        torch.testing.assert_close(analog.bias.grad, layer.bias.grad, atol=1e-5, rtol=1e-5)
    assert np.allclose(_weight_grad(layer, analog), layer.weight.grad.numpy(), atol=1e-5)
    back = T.to_digital(model)[0]
    assert type(back) is type(layer)
    torch.testing.assert_close(back.weight, layer.weight)


def test_a_grouped_layer_trains_only_its_diagonal_blocks():
    torch.manual_seed(1)
    model = T.convert(nn.Sequential(nn.Conv2d(4, 4, 3, groups=4)), T.TileConfig())
    opt = T.build_optimizer(model, T.AnalogSGDConfig(lr=0.1))
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(2, 4, 5, 5)).pow(2).sum().backward()
        opt.step()
    full = model[0].analog_weight()
    mask = np.kron(np.eye(4), np.ones((1, 9))).astype(bool)
    assert np.all(full[~mask] == 0) and len(model[0].blocks) == 4
    assert [(b.tile.out_size, b.tile.in_size) for b in model[0].blocks] == [(1, 9)] * 4


def test_directly_built_layers_start_from_torch_initialisation():
    torch.manual_seed(4)
    analog = T.AnalogConvTranspose2d(4, 6, 3, stride=2, groups=2, tile_config=PERFECT)
    torch.manual_seed(4)
    ref = nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2)
    digital = analog.to_digital()
    assert torch.equal(digital.weight, ref.weight) and torch.equal(digital.bias, ref.bias)
    torch.manual_seed(4)
    grouped = T.AnalogConv2d(4, 6, 3, tile_config=PERFECT, groups=2).to_digital()
    torch.manual_seed(4)
    assert torch.equal(grouped.weight, nn.Conv2d(4, 6, 3, groups=2).weight)


def test_unmapped_options_are_named():
    with pytest.raises(ValueError, match=r"groups=3 must divide in_channels=4"):
        T.AnalogConv2d(4, 6, 3, groups=3)
    left = T.digital_layers(nn.Sequential(nn.ConvTranspose2d(2, 2, 3, stride=1, dilation=2, output_padding=1)))
    assert left == {"0": "ConvTranspose2d: output_padding=(1, 1) not below stride=(1, 1)"}


def test_set_weights_takes_torch_layout_or_the_tile_matrix():
    torch.manual_seed(5)
    ref = nn.ConvTranspose2d(4, 6, (3, 2), groups=2)
    analog = T.AnalogConvTranspose2d(4, 6, (3, 2), groups=2, tile_config=PERFECT)
    analog.set_weights(ref.weight, ref.bias)  # torch's (in, out / groups, kh, kw)
    assert torch.equal(analog.to_digital().weight, ref.weight)
    matrix, _ = analog.get_weights()
    assert matrix.shape == (6 * 3 * 2, 2)  # (out kh kw, in / groups)
    analog.set_weights(matrix * 0.5)
    assert torch.equal(analog.to_digital().weight, ref.weight * 0.5)


@pytest.mark.parametrize(
    ("make", "x_shape", "sizes"),
    [
        (lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1), (2, 3, 5, 6), [(9, 11), (10, 12), (2, 4, 10, 11)]),
        (lambda: nn.ConvTranspose1d(2, 3, 4, stride=3, dilation=2), (2, 2, 7), [(25,), (27,)]),
    ],
)
def test_output_size_picks_the_output_padding_as_torch(make, x_shape, sizes):
    torch.manual_seed(4)
    conv = make()
    analog = T.convert(nn.Sequential(conv), PERFECT)[0]
    x = torch.randn(*x_shape)
    for size in sizes:
        want = conv(x, output_size=list(size))
        got = analog(x, output_size=size)
        assert got.shape == want.shape and torch.allclose(got, want, atol=2e-6)
    with pytest.raises(ValueError, match=r"^AnalogConvTranspose\dd\(.*\): output_size .* is not reachable"):
        analog(x, output_size=[1] * (x.dim() - 2))
