"""Generalised least squares over the read noise consecutive increments share (calibration.gls): the whitening
equals numpy's Cholesky solve of the increments' correlation matrix, and under read noise alone the centred path
of summed residuals (closed forms); the share comes back from simulated increments; on one digitised LTP/LTD pair
with read noise 1% of the range, where least squares on the increments picks the one-shape `linear`, `--gls`
chooses the pair's per-direction family and gives NeuroSim's non-linearity of each direction back."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from aimc.calibration.gls import Whitener, read_share

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from neurosim_pair_noise import A_NORM, write_pair  # noqa: E402


def _correlation(follows, k, share):
    """The increments' correlation matrix (gls module docstring) in dense form."""
    n = len(k)
    c = np.eye(n)
    v = (1 - 2 * share) / share  # cycle variance per pulse / read variance
    for i in range(1, n):
        if follows[i]:
            c[i, i - 1] = c[i - 1, i] = -1.0 / math.sqrt((k[i - 1] * v + 2) * (k[i] * v + 2))
    return c


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5])
def test_whitening_is_the_cholesky_solve(share):
    rng = np.random.default_rng(0)
    n = 40
    follows = np.ones(n, bool)
    follows[[0, 17]] = False  # two chains
    k = np.where(np.arange(n) % 7 == 3, 4.0, 1.0)  # some reads 4 pulses apart
    u = rng.normal(size=(n, 2))
    expected = np.linalg.solve(np.linalg.cholesky(_correlation(follows, k, share)), u)
    np.testing.assert_allclose(Whitener(follows, k, share)(u), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Whitener(follows, k, share)(u[:, 0]), expected[:, 0], rtol=1e-12, atol=1e-12)


def test_no_share_is_ordinary_least_squares():
    u = np.arange(5.0)
    assert Whitener(np.ones(5, bool), np.ones(5), 0.0)(u) is u


def test_read_noise_alone_is_the_path_of_the_levels():
    """u'C^-1 u with C = tridiag(-1/2, 1, -1/2) is twice the sum of squares of the path R_0 = 0, R_j = u_1 + ...
    + u_j about its mean (the levels' residuals with one free offset)."""
    u = np.random.default_rng(1).normal(size=50)
    z = Whitener(np.r_[False, np.ones(49, bool)], np.ones(50), 0.5)(u)
    path = np.r_[0.0, np.cumsum(u)]
    assert 0.5 * float(z @ z) == pytest.approx(float(np.sum((path - path.mean()) ** 2)), rel=1e-10)


@pytest.mark.parametrize("cycle, share", [(0.0, 0.5), (2.0, 0.25), (8.0, 0.1)])
def test_read_share_comes_back_under_a_trend(cycle, share):
    """Increments m_j + X_j + e_{j+1} - e_j in runs of 1000 pulses alternating up and down, the mean step m_j
    saturating along each run, X ~ N(0, cycle), e ~ N(0, 1): the read noise's share is 1 / (cycle + 2)."""
    rng = np.random.default_rng(2)
    n = 20000
    t = np.arange(n)
    dw = 3.0 * np.exp(-(t % 1000) / 300.0) + rng.normal(0, math.sqrt(cycle), n) + np.diff(rng.normal(size=n + 1))
    follows = t % 1000 != 0
    assert read_share(dw, (t // 1000) % 2 == 0, follows, np.ones(n)) == pytest.approx(share, abs=0.02)


def test_read_share_needs_long_runs():
    """Runs shorter than gls.SEGMENT (random pulse polarities) give no estimate."""
    up = np.arange(200) % 3 == 0
    assert read_share(np.ones(200), up, np.ones(200, bool), np.ones(200)) is None


def _fit_pair(tmp_path, *flags):
    from aimc.commands.cli import main

    paths = write_pair(tmp_path, 0.01, 0, 1)
    out = tmp_path / ("fit" + "".join(flags))
    argv = ["fit", *map(str, paths), "--format", "runs", "--out", str(out), "--quiet", "--elements", "4"]
    assert main([*argv, "--no-spread", "--workers", "1", *flags]) == 0
    return json.loads((out / "fit.json").read_text())


def test_gls_resolves_a_pair_at_one_percent_read_noise(tmp_path):
    from aimc.calibration.response_numbers import crossing
    from aimc.devices import load_device

    ols = _fit_pair(tmp_path)
    assert ols["best"] == "linear"  # the increments alone: docs/calibration.md, one pair at 1% read noise
    warned = json.loads((tmp_path / "fit" / "device.json").read_text())["fit"]["warnings"]
    assert any(w.startswith("read noise dominates the increments (its share 0.50)") for w in warned), warned
    fit = _fit_pair(tmp_path, "--gls")
    assert fit["best"] == "SoftBounds", fit["ranking"]
    assert fit["quality"]["gls"].startswith("generalised least squares: consecutive single-pulse increments correlate")
    device = load_device(str(tmp_path / "fit--gls" / "device.json"))
    assert not any(
        "read noise dominates" in w
        for w in json.loads((tmp_path / "fit--gls" / "device.json").read_text())["fit"]["warnings"]
    )
    c = crossing(device, measured=tuple(fit["data"]["bounds_plateau"]))
    for label, name in (("LTP", "up"), ("LTD", "down")):  # NeuroSim's A / P_max of each direction, within 5%
        assert c[f"A_over_Pmax_{label}"] == pytest.approx(A_NORM[name], rel=0.05), label
