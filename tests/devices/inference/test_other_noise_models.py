"""StateIndependentNoiseModel, CustomDriftPCMLikeNoiseModel and the ReRAM models against their closed forms
(aihwkit 1.1.0, inference/noise/custom.py, pcm.py, reram.py), on large samples within sampling error."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import norm

from aimc.devices.inference import (
    CustomDriftPCMLikeNoiseModel,
    ReRamCMONoiseModel,
    ReRamWan2022NoiseModel,
    SingleDeviceConductanceConverter,
    SinglePairConductanceConverter,
    StateIndependentNoiseModel,
)

N = 200_000
T_READ = 250e-9
TABLE = dict(g_lst=[0.0, 5.0, 15.0, 25.0], nu_mean_lst=[0.12, 0.08, 0.05, 0.04], nu_std_lst=[0.04, 0.02, 0.015, 0.01])


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def full(g: float) -> torch.Tensor:
    return torch.full((N,), g)


def assert_normal_sample(x: torch.Tensor, mean: float, std: float) -> None:
    """Mean within 5 standard errors, std within 5 of its standard errors (normal samples)."""
    x = x.double()
    assert float(x.mean()) == pytest.approx(mean, abs=5 * std / math.sqrt(N) + 1e-12)
    assert float(x.std()) == pytest.approx(std, rel=5 / math.sqrt(2 * N))


def folded_mean(mu: float, sigma: float) -> float:
    return sigma * math.sqrt(2 / math.pi) * math.exp(-(mu**2) / (2 * sigma**2)) + mu * (1 - 2 * norm.cdf(-mu / sigma))


@pytest.mark.parametrize("g", [5.0, 12.5, 25.0])
def test_state_independent_programming_drift_and_read_noise(g):
    m = StateIndependentNoiseModel(prog_coeff=[0.2, 0.3, -0.1], prog_noise_scale=2.0, read_noise_scale=0.1)
    x = g / 25.0
    assert_normal_sample(
        m.apply_programming_noise_to_conductance(full(g), gen()) - g, 0.0, 2 * (0.2 + 0.3 * x - 0.1 * x * x)
    )
    nu = m.generate_drift_coefficients(full(g), gen(1)).double()
    assert float(nu.mean()) == pytest.approx(folded_mean(0.1, 0.05), abs=5 * 0.05 / math.sqrt(N))
    t = 3600.0
    g_t = m.apply_drift_noise_to_conductance(full(g), torch.full((N,), 0.08), t, gen(2))
    g_drift = g * ((t + 20.0) / 20.0) ** -0.08
    # read noise std 0.1 |g_drift| / g_max sqrt(ln((t + t_0 + t_read) / (2 t_read))) uS
    sigma = 0.1 * g_drift / 25.0 * math.sqrt(math.log((t + 20.0 + T_READ) / (2 * T_READ)))
    assert_normal_sample(g_t, g_drift, sigma)


def test_state_independent_defaults_and_validation():
    m = StateIndependentNoiseModel()
    assert (m.prog_coeff, m.drift_nu_mean, m.drift_nu_std, m.t_0, m.t_read, m.g_max) == (
        [0.2, 0.0, 0.0],
        0.1,
        0.05,
        20.0,
        250e-9,
        25.0,
    )
    with pytest.raises(ValueError, match=r"^StateIndependentNoiseModel\.drift_nu_std: "):
        StateIndependentNoiseModel(drift_nu_std=-0.1)


@pytest.mark.parametrize(
    "g, mu, sigma", [(0.0, 0.12, 0.04), (2.5, 0.10, 0.03), (10.0, 0.065, 0.0175), (25.0, 0.04, 0.01)]
)
def test_custom_drift_interpolates_the_table(g, mu, sigma):
    m = CustomDriftPCMLikeNoiseModel(TABLE, drift_scale=0.5)
    nu = m.generate_drift_coefficients(full(g), gen(3)).double() / 0.5
    assert float(nu.mean()) == pytest.approx(folded_mean(mu, sigma), abs=5 * sigma / math.sqrt(N))
    assert float(nu.std()) == pytest.approx(sigma, rel=0.01 + 6 / math.sqrt(2 * N))


@pytest.mark.parametrize(
    "table",
    [
        dict(g_lst=[0.0, 25.0], nu_mean_lst=[0.1, 0.1]),
        dict(g_lst=[0.0, 25.0], nu_mean_lst=[0.1, 0.1], nu_std_lst=[0.01]),
        dict(g_lst=[25.0, 0.0], nu_mean_lst=[0.1, 0.1], nu_std_lst=[0.01, 0.01]),
        dict(g_lst=[1.0, 25.0], nu_mean_lst=[0.1, 0.1], nu_std_lst=[0.01, 0.01]),
        dict(g_lst=[0.0, 25.0], nu_mean_lst=[0.1, 0.1], nu_std_lst=[0.01, -0.01]),
    ],
)
def test_custom_drift_rejects_bad_tables(table):
    with pytest.raises(ValueError, match=r"^CustomDriftPCMLikeNoiseModel\.custom_drift_model: "):
        CustomDriftPCMLikeNoiseModel(table)


def test_custom_drift_table_may_cover_a_converter_with_offset():
    m = CustomDriftPCMLikeNoiseModel(TABLE, g_converter=SinglePairConductanceConverter(g_max=20.0, g_min=2.0))
    assert m.g_max == 20.0


WAN = {
    1.0: [0.348, 16.030, -43.853, 45.393, -16.815],
    86400.0: [0.701, 22.086, -50.773, 47.095, -16.458],
    172800.0: [0.782, 20.274, -43.507, 37.062, -11.934],
}


def poly(coeffs: list[float], x: float) -> float:
    return sum(c * x**i for i, c in enumerate(coeffs))


@pytest.mark.parametrize("g", [10.0, 17.5, 25.0])
def test_wan2022_deviation_std_is_the_polynomial_of_each_time(g):
    m = ReRamWan2022NoiseModel(noise_scale=0.8)
    assert m.coeff_dic == WAN
    assert_normal_sample(m.apply_programming_noise_to_conductance(full(g), gen(4)), g, 0.8 * poly(WAN[1.0], g / 25))
    target = m.generate_drift_coefficients(full(g), gen())
    for t in (86400.0, 172800.0):
        g_t = m.apply_drift_noise_to_conductance(torch.zeros(N), target, t, gen(5))
        assert_normal_sample(g_t, g, 0.8 * poly(WAN[t], g / 25))
    with pytest.raises(ValueError, match="^t_inference: "):
        m.apply_drift_noise_to_conductance(target, target, 3600.0, gen())


@pytest.mark.parametrize("acceptance, c", [(2e-2, (0.00081107, 0.00106879)), (2, (0.0112185391, 0.01129027418))])
@pytest.mark.parametrize("g", [9.0, 40.0, 88.0])
def test_cmo_programming_noise_is_linear_in_g(acceptance, c, g):
    m = ReRamCMONoiseModel(acceptance_range=acceptance, prog_noise_scale=3.0)
    assert_normal_sample(m.apply_programming_noise_to_conductance(full(g), gen(6)), g, 3.0 * (c[0] + c[1] * g))


@pytest.mark.parametrize("t", [1.0, 3600.0, 3.15e7])
def test_cmo_relaxation_and_read_noise(t):
    g = 50.0
    relax = ReRamCMONoiseModel(read_noise_scale=0.0, drift_scale=0.5)
    g_t = relax.apply_drift_noise_to_conductance(full(g), None, t, gen(7))
    log_t = math.log(t)
    assert_normal_sample(g_t, g - 0.5 * 0.08900206 * log_t, 0.5 * abs(0.04201137 * log_t + 0.41183342))
    read = ReRamCMONoiseModel(drift_scale=0.0, read_noise_scale=2.0)
    g_t = read.apply_drift_noise_to_conductance(full(g), None, t, gen(8))
    sigma = 2.0 * 0.0277316483 * math.log10(g) * math.sqrt(math.log((t + 1e-6) / 2e-6))
    assert_normal_sample(g_t, g, sigma)
    assert torch.equal(relax.apply_drift_noise_to_conductance(full(g), None, 0.0, gen()), full(g))


def test_cmo_clips_to_its_conductance_range_and_maps_weight_range():
    m = ReRamCMONoiseModel()
    assert m.g_converter == SingleDeviceConductanceConverter(88.199997, 9.0) and m.acceptance_range == 0.2
    g_t = m.apply_drift_noise_to_conductance(torch.tensor([9.0, 88.199997] * 1000), None, 10 * 3.15e7, gen(9))
    assert float(g_t.min()) == 9.0 and float(g_t.max()) == pytest.approx(88.199997)
    w = torch.tensor([[-2.0, 0.0, 1.0]])
    (g,), params = m.g_converter.convert_to_conductances(w)
    assert torch.allclose(g, torch.tensor([[9.0, 9.0 + 2 * 79.199997 / 3, 88.199997]]))
    assert torch.allclose(m.g_converter.convert_back_to_weights([g], params), w)
    with pytest.raises(ValueError, match=r"^ReRamCMONoiseModel\.decay_dict: "):
        ReRamCMONoiseModel(decay_dict={"mean": [0.1]})
