"""PCMLikeNoiseModel and the single-pair converter against their closed forms (aihwkit 1.1.0,
inference/noise/pcm.py; Nandakumar et al., ICECS 2019), on large samples within sampling error."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from aimc.devices.inference import PCMLikeNoiseModel, SinglePairConductanceConverter

N = 200_000
T_0, T_READ = 20.0, 250e-9


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def folded_normal_mean_std(mu: float, sigma: float) -> tuple[float, float]:
    """Mean and std of |X|, X ~ N(mu, sigma^2)."""
    mean = sigma * math.sqrt(2 / math.pi) * math.exp(-(mu**2) / (2 * sigma**2)) + mu * (1 - 2 * norm.cdf(-mu / sigma))
    return mean, math.sqrt(mu**2 + sigma**2 - mean**2)


def test_single_pair_converter_maps_max_abs_weight_to_g_max_and_back():
    conv = SinglePairConductanceConverter(g_max=25.0, g_min=2.0)
    w = torch.tensor([[-0.5, 0.0, 0.25, 1.0]])
    (g_plus, g_minus), params = conv.convert_to_conductances(w)
    assert torch.allclose(g_plus, torch.tensor([[2.0, 2.0, 2.0 + 23 / 4, 25.0]]))
    assert torch.allclose(g_minus, torch.tensor([[2.0 + 23 / 2, 2.0, 2.0, 2.0]]))
    assert float(params["scale_ratio"]) == pytest.approx(23.0)
    assert torch.allclose(conv.convert_back_to_weights([g_plus, g_minus], params), w)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(g_max=-1.0), "g_max"),
        (dict(g_min=-1.0), "g_min"),
        (dict(g_max=5.0, g_min=6.0), "g_min"),
    ],
)
def test_converter_rejects_bad_range_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"^SinglePairConductanceConverter\.{field}: "):
        SinglePairConductanceConverter(**kwargs)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(t_0=0.0), "t_0"),
        (dict(t_read=-1e-9), "t_read"),
        (dict(prog_noise_scale=-1.0), "prog_noise_scale"),
        (dict(drift_scale=float("nan")), "drift_scale"),
        (dict(prog_coeff=[]), "prog_coeff"),
        (dict(g_max=20.0, g_converter=SinglePairConductanceConverter(25.0)), "g_max"),
    ],
)
def test_pcm_rejects_bad_parameters_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"^PCMLikeNoiseModel\.{field}: "):
        PCMLikeNoiseModel(**kwargs)


def test_pcm_defaults_are_aihwkits():
    m = PCMLikeNoiseModel()
    assert (m.g_max, m.t_read, m.t_0, m.prog_coeff, m.prog_coeff_g_max_reference) == (
        25.0,
        250e-9,
        20.0,
        [0.26348, 1.9650, -1.1731],
        25.0,
    )
    assert PCMLikeNoiseModel(g_max=40.0).g_converter == SinglePairConductanceConverter(40.0)
    assert PCMLikeNoiseModel(prog_coeff=[1.0], g_max=40.0).prog_coeff_g_max_reference == 40.0


@pytest.mark.parametrize("g", [2.0, 6.25, 12.5, 20.0, 25.0])
@pytest.mark.parametrize("g_max", [25.0, 50.0])
def test_programming_noise_std_is_the_polynomial(g, g_max):
    m = PCMLikeNoiseModel(g_max=g_max, prog_noise_scale=1.5)
    g_target = torch.full((N,), g * g_max / 25.0)
    g_prog = m.apply_programming_noise_to_conductance(g_target, gen())
    x = g / 25.0
    sigma = 1.5 * (0.26348 + 1.9650 * x - 1.1731 * x**2) * g_max / 25.0
    d = (g_prog - g_target).double()
    assert g_prog.dtype == torch.float32
    assert abs(float(d.mean())) < 5 * sigma / math.sqrt(N)
    assert float(d.std()) == pytest.approx(sigma, rel=5 / math.sqrt(2 * N))


@pytest.mark.parametrize("g", [0.0, 1e-3, 0.5, 2.0, 5.0, 25.0])
def test_drift_exponent_is_a_folded_normal_of_the_fit(g):
    m = PCMLikeNoiseModel(drift_scale=2.0)
    nu = m.generate_drift_coefficients(torch.full((N,), g), gen(1)).double() / 2.0
    g_r = max(g / 25.0, 1e-7)
    mu = min(max(-0.0155 * math.log(g_r) + 0.0244, 0.049), 0.1)
    sigma = min(max(-0.0125 * math.log(g_r) - 0.0059, 0.008), 0.045)
    mean, std = folded_normal_mean_std(mu, sigma)
    assert float(nu.min()) >= 0.0
    assert float(nu.mean()) == pytest.approx(mean, abs=5 * std / math.sqrt(N))
    assert float(nu.std()) == pytest.approx(std, rel=6 / math.sqrt(2 * N))


@pytest.mark.parametrize("t", [0.0, 1.0, 3600.0, 3.15e7])
def test_drift_follows_the_power_law_without_read_noise(t):
    m = PCMLikeNoiseModel(read_noise_scale=0.0)
    g_prog = torch.linspace(0.0, 25.0, 101)
    nu = torch.linspace(0.0, 0.2, 101)
    g_t = m.apply_drift_noise_to_conductance(g_prog, nu, t, gen())
    expected = g_prog.double() * ((t + T_0) / T_0) ** (-nu.double())
    assert torch.allclose(g_t.double(), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("t", [0.0, 1.0, 3600.0, 3.15e7, 3.15e8])
@pytest.mark.parametrize("g", [2.0, 12.5, 25.0])
def test_read_noise_std_grows_with_log_time(t, g):
    m = PCMLikeNoiseModel(read_noise_scale=0.7)
    g_prog = torch.full((N,), g)
    g_t = m.apply_drift_noise_to_conductance(g_prog, torch.zeros(N), t, gen(2)).double()
    q_s = min(0.0088 / max((g / 25.0) ** 0.65, 1e-3), 0.2)
    rel_std = 0.7 * q_s * math.sqrt(math.log((t + T_0 + T_READ) / (2 * T_READ)))
    assert float(g_t.mean()) == pytest.approx(g, abs=5 * g * rel_std / math.sqrt(N))
    assert float(g_t.std()) / g == pytest.approx(rel_std, rel=5 / math.sqrt(2 * N))


def test_weights_round_trip_and_seeding():
    m = PCMLikeNoiseModel()
    w = torch.randn(64, 32, generator=gen(3))
    w_prog, state = m.apply_programming_noise(w, gen(4))
    again, state_again = m.apply_programming_noise(w, gen(4))
    assert torch.equal(w_prog, again) and all(torch.equal(a, b) for a, b in zip(state, state_again))
    assert len(state) == 2 and state[0].shape == w.shape
    w_t = m.apply_drift_noise(w_prog, state, 3600.0, gen(5))
    assert torch.equal(w_t, m.apply_drift_noise(w_prog, state, 3600.0, gen(5)))
    # programming noise of 0.26..1.05 uS on 25 uS: a few percent of max|w|
    rel = float((w_prog - w).std() / w.abs().max())
    assert 0.005 < rel < 0.05
    # an hour of drift with nu ~ 0.05..0.1 shrinks the weights by (3620 / 20)^-nu ~ 0.6..0.8
    ratio = float(w_t.abs().mean() / w_prog.abs().mean())
    assert 0.6 < ratio < 0.8
    with pytest.raises(ValueError, match="^t_inference: "):
        m.apply_drift_noise(w_prog, state, -1.0, gen())
    with pytest.raises(ValueError, match="^drift_state: "):
        m.apply_drift_noise(w_prog, state[:1], 1.0, gen())


def test_apply_noise_at_time_zero_is_programming_only():
    m = PCMLikeNoiseModel()
    w = torch.randn(16, 8, generator=gen(6))
    targets, params = m.g_converter.convert_to_conductances(w)
    g = gen(7)
    programmed = [m.apply_programming_noise_to_conductance(g_target, g) for g_target in targets]
    assert torch.equal(m.apply_noise(w, 0.0, gen(7)), m.g_converter.convert_back_to_weights(programmed, params))
    assert np.isfinite(m.apply_noise(w, 86400.0, gen(7)).numpy()).all()
