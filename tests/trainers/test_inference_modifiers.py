"""Weight modifiers and clipping of inference tiles, each pinned to its closed form (the definitions of
aihwkit 1.1.0's binary, measured with an exact forward read of an identity input after post_update_step:
ADD_NORMAL std = std_dev amax, MULT_NORMAL relative std = std_dev amax, DISCRETIZE step res amax, POLY std =
std_dev amax P(|w| / amax), PROG_NOISE = POLY / g_max, drop fraction = pdrop)."""

import pytest
import torch
from pydantic import ValidationError

from aimc.trainers.inference_config import WeightClipParameter, WeightModifierParameter
from aimc.trainers.inference_modifiers import clip_, clip_bound, modified_values, modify

N = 256


def _weights(scale: float = 0.5) -> torch.Tensor:
    return torch.linspace(-scale, scale, N * N).reshape(N, N)


def _apply(**kw) -> tuple[torch.Tensor, torch.Tensor]:
    w = _weights()
    return w, modified_values(w, WeightModifierParameter(**kw), torch.Generator().manual_seed(0))


def test_add_normal_std_is_std_dev_times_amax():
    w, out = _apply(type="add_normal", std_dev=0.1)
    assert float((out - w).std()) == pytest.approx(0.1 * 0.5, rel=0.02)
    w, out = _apply(type="add_normal", std_dev=0.1, rel_to_actual_wmax=False, assumed_wmax=2.0)
    assert float((out - w).std()) == pytest.approx(0.1 * 2.0, rel=0.02)


def test_mult_normal_relative_std_is_std_dev_times_amax():
    w, out = _apply(type="mult_normal", std_dev=0.1)
    big = w.abs() > 0.05
    assert float(((out - w)[big] / w[big]).std()) == pytest.approx(0.1 * 0.5, rel=0.02)


@pytest.mark.parametrize("res, levels", [(0.1, 21), (0.25, 9)])
def test_discretize_levels_are_res_amax_apart(res, levels):
    w, out = _apply(type="discretize", res=res)
    values = torch.unique(out)
    assert len(values) == levels
    assert torch.allclose(values[1:] - values[:-1], torch.tensor(res * 0.5), atol=1e-6)
    assert float((out - w).abs().max()) <= res * 0.5 / 2 + 1e-6


def test_stochastic_discretize_is_unbiased():
    w, out = _apply(type="discretize", res=0.25, sto_round=True)
    assert len(torch.unique(out)) == 9
    assert float((out - w).mean()) == pytest.approx(0.0, abs=2e-3)


def test_discretize_add_normal_adds_the_noise_to_the_levels():
    w, q = _apply(type="discretize", res=0.1)
    _, out = _apply(type="discretize_add_normal", res=0.1, std_dev=0.05)
    assert float((out - q).std()) == pytest.approx(0.05 * 0.5, rel=0.03)


def test_poly_std_follows_the_polynomial():
    c = [0.0105392, 0.0768, -0.046925]
    w, out = _apply(type="poly", std_dev=0.1)
    for lo, hi in [(0.0, 0.1), (0.2, 0.3), (0.4, 0.5)]:
        band = (w.abs() >= lo) & (w.abs() < hi)
        x = w[band].abs() / 0.5
        expected = float((0.1 * 0.5 * (c[0] + c[1] * x + c[2] * x**2)).pow(2).mean().sqrt())
        assert float((out - w)[band].std()) == pytest.approx(expected, rel=0.05)


def test_prog_noise_is_poly_over_g_max_keeping_the_sign():
    w, poly = _apply(type="poly", std_dev=0.1)
    _, prog = _apply(type="prog_noise", std_dev=0.1)
    big = w.abs() > 0.05
    assert float((prog - w)[big].std()) == pytest.approx(float((poly - w)[big].std()) / 25.0, rel=0.02)
    assert bool((prog * w >= 0).all())


@pytest.mark.parametrize("kw", [dict(type="drop_connect", pdrop=0.3), dict(type="add_normal", std_dev=0.1, pdrop=0.3)])
def test_drop_connect_fraction_is_pdrop(kw):
    _, out = _apply(**kw)
    assert float((out == 0).float().mean()) == pytest.approx(0.3, abs=0.005)


def test_modify_passes_the_gradient_straight_through():
    w = _weights().requires_grad_()
    out = modify(w, WeightModifierParameter(type="add_normal", std_dev=0.1), torch.Generator().manual_seed(1))
    (out * 3.0).sum().backward()
    assert torch.equal(w.grad, torch.full_like(w, 3.0))


def test_clip_bounds():
    w = torch.tensor([[1.0, -3.0, 0.5], [0.2, 0.4, -2.0]])
    assert clip_bound(w, WeightClipParameter(type="fixed_value", fixed_value=0.7)) == pytest.approx(0.7)
    assert clip_bound(w, WeightClipParameter(type="layer_gaussian", sigma=2.0)) == pytest.approx(2 * float(w.std()))
    assert clip_bound(w, WeightClipParameter(type="average_channel_max")) == pytest.approx(2.5)
    capped = WeightClipParameter(type="average_channel_max", fixed_value=1.5)
    assert clip_bound(w, capped) == pytest.approx(1.5)
    clip_(w, capped)
    assert float(w.abs().max()) == pytest.approx(1.5)


def test_bad_parameters_name_the_field():
    with pytest.raises(ValidationError, match="modifier.res"):
        WeightModifierParameter(type="discretize")
    with pytest.raises(ValidationError, match="clip.fixed_value"):
        WeightClipParameter(type="fixed_value")
