"""R1's power and exponential families with their own depression exponent `gamma_down`: the response against
the closed form (q_plus with gamma, q_minus with gamma_down), the symmetric point against a root of that
closed form, the drawn spread of both exponents, and the unchanged dump of configs without gamma_down."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import brentq

from aimc.common.errors import ConfigError
from aimc.devices import ConductanceArray, parse_device
from aimc.devices.response_step import GAMMA_DOWN, GAMMA_UP

TAU, C = 0.7, 0.1
CASES = [("power", 1.0, 3.0), ("power", 2.0, 0.5), ("exponential", 0.5, 4.0), ("exponential", 3.0, 1.0)]


def _closed_form(kind: str, g_up: float, g_down: float, w, up: bool) -> np.ndarray:
    """R1 Table 1 (arXiv:2502.06309) with u = w / tau, the exponent of q_minus replaced by g_down."""
    w = np.asarray(w, float)
    amp, u, g = ((1 + C), 1 - w / TAU, g_up) if up else ((1 - C), 1 + w / TAU, g_down)
    if kind == "power":
        return amp * u**g
    return amp * np.expm1(g * u) / np.expm1(g)


def _cfg(kind, g_up, g_down, **kw) -> dict:
    return dict(kind=kind, tau=TAU, c=C, gamma=g_up, gamma_down=g_down, dw_min=1e-3, **kw)


@pytest.mark.parametrize("kind,g_up,g_down", CASES)
def test_response_uses_gamma_up_and_gamma_down(kind, g_up, g_down):
    dev = parse_device(_cfg(kind, g_up, g_down))
    w = np.linspace(-TAU, TAU, 29)
    np.testing.assert_allclose(dev.q_plus(w), _closed_form(kind, g_up, g_down, w, True), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dev.q_minus(w), _closed_form(kind, g_up, g_down, w, False), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind,g_up,g_down", CASES)
def test_noise_free_pulse_moves_by_the_closed_form(kind, g_up, g_down):
    """One pulse of a drawn (float32) array: w -+ dw_min q(w), the kernel's per-direction exponent and, for the
    exponential family, its shared denominators expm1(gamma) and expm1(gamma_down)."""
    arr = ConductanceArray(2, 3, parse_device(_cfg(kind, g_up, g_down)), seed=0)
    w0 = np.array([-0.4, 0.05, 0.5], np.float32)
    for up in (True, False):
        arr.w[...] = w0
        arr.pulse(np.full(arr.shape, 1 if up else -1, np.int64))
        want = w0 + (1 if up else -1) * 1e-3 * _closed_form(kind, g_up, g_down, w0.astype(float), up)
        np.testing.assert_allclose(arr.w[0], want, atol=1e-7)
    if kind == "exponential":
        np.testing.assert_allclose(arr.params.consts[1:3], np.expm1([g_up, g_down]), rtol=1e-15)


@pytest.mark.parametrize("kind,g_up,g_down", CASES)
def test_symmetric_point_is_the_root_of_the_closed_form(kind, g_up, g_down):
    want = brentq(
        lambda w: _closed_form(kind, g_up, g_down, w, True) - _closed_form(kind, g_up, g_down, w, False),
        -TAU,
        TAU,
        xtol=1e-14,
    )
    dev = parse_device(_cfg(kind, g_up, g_down))
    assert dev.symmetric_point() == pytest.approx(want, abs=1e-9)
    np.testing.assert_allclose(ConductanceArray(2, 2, dev, seed=0).symmetric_points(), want, atol=1e-6)


@pytest.mark.parametrize("kind", ["power", "exponential"])
def test_gamma_down_equal_to_gamma_is_the_shared_family(kind):
    """gamma_down = gamma gives R1's family; the power family's symmetric point then has the closed form
    tau (r - 1)/(r + 1), r = ((1 + c)/(1 - c))^(1/gamma)."""
    w = np.linspace(-TAU, TAU, 11)
    a, b = parse_device(_cfg(kind, 2.0, 2.0)), parse_device(_cfg(kind, 2.0, None))
    np.testing.assert_array_equal(a.q_minus(w), b.q_minus(w))
    if kind == "power":
        r = ((1 + C) / (1 - C)) ** 0.5
        assert a.symmetric_point() == pytest.approx(TAU * (r - 1) / (r + 1), abs=1e-12)


def test_down_exponent_spread_is_its_own_draw():
    """gamma_down_dtod: relative std of the down exponent, drawn apart from gamma's; None: gamma_dtod."""
    n = 200
    ep = ConductanceArray(
        n, n, parse_device(_cfg("power", 2.0, 3.0, gamma_dtod=0.1, gamma_down_dtod=0.2)), seed=1
    ).params.ep.astype(float)
    up, down = ep[..., GAMMA_UP].ravel(), ep[..., GAMMA_DOWN].ravel()
    assert up.mean() == pytest.approx(2.0, abs=5 * 0.2 / n) and up.std() == pytest.approx(0.2, rel=0.03)
    assert down.mean() == pytest.approx(3.0, abs=5 * 0.6 / n) and down.std() == pytest.approx(0.6, rel=0.03)
    assert abs(np.corrcoef(up, down)[0, 1]) < 5 / n
    same = ConductanceArray(n, n, parse_device(_cfg("exponential", 2.0, 3.0, gamma_dtod=0.1)), seed=1).params.ep
    assert same[..., GAMMA_DOWN].astype(float).std() == pytest.approx(0.3, rel=0.03)


def test_dump_without_gamma_down_is_unchanged():
    """A config without gamma_down dumps the fields (and order) it had before gamma_down existed, so its JSON
    and the hash of an experiment holding it stay the same; with gamma_down it round-trips."""
    before = [
        "dw_min",
        "dw_min_dtod",
        "dw_min_std",
        "tau",
        "c",
        "c_dtod",
        "tau_dtod",
        "noise",
        "kind",
        "gamma",
        "gamma_dtod",
    ]
    for kind in ("power", "exponential"):
        assert list(parse_device(dict(kind=kind, gamma=2.0)).model_dump()) == before
        dev = parse_device(_cfg(kind, 1.0, 3.0, gamma_down_dtod=0.1))
        assert parse_device(json.loads(json.dumps(dev.model_dump(mode="json")))) == dev


def test_down_spread_without_down_exponent_is_refused():
    with pytest.raises(ConfigError, match="gamma_down_dtod needs gamma_down"):
        parse_device(dict(kind="power", gamma=2.0, gamma_down_dtod=0.1))
    with pytest.raises(ConfigError, match="gamma_down"):
        parse_device(dict(kind="exponential", gamma=2.0, gamma_down=800.0))
