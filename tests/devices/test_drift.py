"""Drift of an idle array (devices.drift), idle time (ConductanceArray.idle) and the global drift
compensation (devices.drift_compensation), against closed forms of the equations; aihwkit 1.1.0's own
`drift_weights` where a venv with it exists (AIMC_AIHWKIT_PYTHON, as tests/devices/test_aihwkit.py)."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
from aihwkit_helpers import PYTHON
from conftest import NO_SPREAD

from aimc.devices import AnalogTile, ConductanceArray, PeripheryConfig, parse_device
from aimc.devices.drift import DriftParameter
from aimc.devices.drift_compensation import compensate, probe_readout

W0 = 0.5


def _array(shape=(200, 200), w0=W0, seed=0, **fields) -> ConductanceArray:
    device = parse_device(dict(kind="ConstantStep", w_max=1.0, w_min=-1.0, **NO_SPREAD, **fields))
    a = ConductanceArray(*shape, device, seed=seed)
    a.set_weights(np.full(shape, w0))
    return a


def test_drift_is_the_power_law_of_the_clock_in_units_of_t0():
    a = _array((4, 5), drift=dict(nu=0.07, t_0=2.0))
    a.idle(100.0)  # T = 50 units of t_0
    np.testing.assert_allclose(a.w, W0 * 50.0**-0.07, rtol=1e-6)
    a.idle(100.0)  # T = 100: the clock accumulates, w0 and the restart time stay
    np.testing.assert_allclose(a.w, W0 * 100.0**-0.07, rtol=1e-6)
    b = _array((4, 5), drift=dict(nu=0.07, t_0=2.0))
    b.idle(1.5)  # below one unit of t_0: f = max(T, 1)^-nu = 1
    np.testing.assert_array_equal(b.w, W0)


def test_nu_spread_gives_the_log_normal_mean_and_spread():
    nu, dtod, t = 0.05, 0.4, 1e6
    a = _array(drift=dict(nu=nu, nu_dtod=dtod))
    a.idle(t)
    s = nu * dtod * math.log(t)  # ln(w / w0) = -nu_ij ln t, nu_ij ~ N(nu, (nu dtod)^2)
    expected = W0 * math.exp(-nu * math.log(t) + 0.5 * s * s)
    n = a.w.size
    sd_mean = W0 * math.exp(-nu * math.log(t)) * math.sqrt(math.exp(s * s) - 1) * math.exp(0.5 * s * s) / n**0.5
    assert abs(a.w.mean() - expected) < 5 * sd_mean
    log_ratio = np.log(a.w / W0) / -math.log(t)
    assert abs(log_ratio.std() - nu * dtod) < 5 * nu * dtod / (2 * n) ** 0.5


def test_nu_std_varies_nu_every_call():
    nu, nu_std, t = 0.05, 0.3, 1e4
    a = _array(drift=dict(nu=nu, nu_std=nu_std))
    a.idle(t)
    log_ratio = np.log(a.w / W0) / -math.log(t)
    n = a.w.size
    assert abs(log_ratio.mean() - nu) < 5 * nu * nu_std / n**0.5
    assert abs(log_ratio.std() - nu * nu_std) < 5 * nu * nu_std / (2 * n) ** 0.5


def test_a_written_element_restarts_its_drift():
    nu = 0.1
    a = _array((3, 4), drift=dict(nu=nu))
    a.idle(10.0)
    w = a.w.copy()
    w[1, 2] = 0.2  # written between two idle calls: moved far above reset_tol
    a.set_weights(w)
    written = a.w[1, 2]
    a.idle(90.0)  # T = 100: the written element restarts (t0 = 100, no drift now), the others drift on
    assert a.w[1, 2] == written
    others = np.ones((3, 4), bool)
    others[1, 2] = False
    np.testing.assert_allclose(a.w[others], W0 * 100.0**-nu, rtol=1e-6)
    a.idle(50.0)  # T = 150: the written element drifts from its restart at 100
    np.testing.assert_allclose(a.w[1, 2], written * 50.0**-nu, rtol=1e-6)
    np.testing.assert_allclose(a.w[others], W0 * 150.0**-nu, rtol=1e-6)


def test_conductance_offsets_and_nu_k_follow_the_equation():
    p = dict(nu=0.06, nu_k=0.02, log_g0=-0.3, g_offset=0.5, wg_ratio=2.0, w_offset=0.1)
    a = _array((2, 3), drift=p)
    a.idle(400.0)
    nu_a = (
        p["nu"] - p["nu_k"] * math.log((W0 - p["w_offset"]) / p["wg_ratio"] + p["g_offset"]) + p["nu_k"] * p["log_g0"]
    )
    f = 400.0**-nu_a
    off = p["g_offset"] * p["wg_ratio"] + p["w_offset"]
    np.testing.assert_allclose(a.w, W0 * f + off * (f - 1), rtol=1e-6)


def test_w_noise_std_adds_fresh_gaussian_noise_per_call():
    a = _array(drift=dict(nu=0.05, w_noise_std=0.02))
    a.idle(10.0)
    a.idle(10.0)
    n = a.w.size
    d = a.w - W0 * 20.0**-0.05  # w0 f + noise of the last call only: aihwkit's noise does not accumulate
    sd = 0.02
    assert abs(d.mean()) < 5 * sd / n**0.5
    assert abs(d.std() - sd) < 5 * sd / (2 * n) ** 0.5


def test_idle_decays_as_n_optimizer_steps_and_redraws_write_noise():
    lifetime, reset, steps = 40.0, 0.1, 25
    a = _array((8, 8), lifetime=lifetime, reset=reset, reset_std=0.0)
    a.idle(steps * 0.5, step_s=0.5)
    np.testing.assert_allclose(a.w, reset + (W0 - reset) * (1 - 1 / lifetime) ** steps, rtol=1e-5)
    noisy = _array(write_noise_std=3.0, dw_min=0.01, drift=dict(nu=0.05))
    noisy.idle(1000.0)
    np.testing.assert_allclose(noisy.hidden, W0 * 1000.0**-0.05, rtol=1e-6)
    n = noisy.w.size
    std = (noisy.w - noisy.hidden).std()
    assert abs(std - 0.03) < 5 * 0.03 / (2 * n) ** 0.5  # write_noise_std * dw_min around the hidden weight


def test_idle_diffusion_is_a_random_walk_of_n_steps():
    rate, steps = 0.002, 16
    a = _array(diffusion=rate)
    a.idle(float(steps))
    n = a.w.size
    sd = rate * steps**0.5
    assert abs((a.w - W0).std() - sd) < 5 * sd / (2 * n) ** 0.5


def test_drift_off_by_default_changes_nothing_and_keeps_the_dump():
    a = _array((3, 3))
    a.idle(1e9, drift=DriftParameter(nu=0.0, nu_k=0.1, w_noise_std=0.1))  # nu = 0: off, as in aihwkit
    np.testing.assert_array_equal(a.w, W0)
    assert a.drift is None
    assert "drift" not in a.device.model_dump()
    with pytest.raises(ValueError, match="delta_t"):
        a.idle(-1.0)


def test_drift_state_survives_a_state_dict_round_trip():
    a = _array((3, 3), drift=dict(nu=0.1))
    a.idle(10.0)
    b = _array((3, 3), drift=dict(nu=0.1))
    b.load_state_dict(a.state_dict())
    a.idle(90.0)
    b.idle(90.0)
    np.testing.assert_array_equal(a.w, b.w)
    np.testing.assert_allclose(b.w, W0 * 100.0**-0.1, rtol=1e-6)


def test_global_compensation_undoes_a_uniform_drift_exactly():
    device = parse_device(dict(kind="ConstantStep", **NO_SPREAD))
    exact = PeripheryConfig(ideal=True)
    tile = AnalogTile(6, 10, device, forward=exact, seed=3)
    w = np.random.default_rng(1).uniform(-0.4, 0.4, (6, 10)).astype(np.float32)
    tile.set_weight(w)
    x = np.random.default_rng(2).uniform(-1, 1, (5, 10)).astype(np.float32)
    baseline = probe_readout(tile)
    np.testing.assert_allclose(baseline, np.abs(w).mean(), rtol=1e-6)  # one-hot probe: mean |w|
    before = tile.forward(x)
    tile.idle(3600.0, drift=DriftParameter(nu=0.05))
    drifted = tile.forward(x)
    np.testing.assert_allclose(drifted, before * 3600.0**-0.05, rtol=1e-5, atol=1e-7)
    alpha = compensate(tile, baseline)
    np.testing.assert_allclose(alpha, 3600.0**0.05, rtol=1e-5)
    np.testing.assert_allclose(tile.forward(x), before, rtol=1e-5, atol=1e-6)


AIHWKIT_SCRIPT = r"""
import json, sys
import torch
from aihwkit.simulator.configs import SingleRPUConfig
from aihwkit.simulator.configs.devices import ConstantStepDevice
from aihwkit.simulator.parameters import DriftParameter
from aihwkit.simulator.tiles import AnalogTile
spec = json.loads(sys.argv[1])
dev = ConstantStepDevice(w_max=1.0, w_min=-1.0, w_max_dtod=0.0, w_min_dtod=0.0, dw_min_dtod=0.0, up_down_dtod=0.0,
                         dw_min_std=0.0, drift=DriftParameter(**spec["drift"]))
tile = AnalogTile(len(spec["w"]), len(spec["w"][0]), SingleRPUConfig(device=dev), bias=False)
out = []
for op, arg in spec["ops"]:
    if op == "set":
        tile.set_weights(torch.tensor(arg))
    else:
        tile.drift_weights(arg)
        out.append(tile.get_weights()[0].tolist())
print(json.dumps(out))
"""


@pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")
def test_matches_aihwkit_drift_weights():
    drift = dict(nu=0.06, nu_k=0.02, log_g0=-0.3, g_offset=0.5, wg_ratio=2.0, w_offset=0.1, t_0=2.0)
    rng = np.random.default_rng(0)
    w = rng.uniform(-0.5, 0.5, (3, 4)).round(3)
    w2 = w.copy()
    w2[0, :2] = [0.25, -0.125]
    ops = [
        ("set", w.tolist()),
        ("drift", 5.0),
        ("drift", 20.0),
        ("set", w2.tolist()),
        ("drift", 50.0),
        ("drift", 1000.0),
        ("drift", 0.5),
    ]
    res = subprocess.run(
        [str(PYTHON), "-c", AIHWKIT_SCRIPT, json.dumps(dict(drift=drift, w=w.tolist(), ops=ops))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    theirs = json.loads(res.stdout.strip().splitlines()[-1])
    a = _array(w.shape, drift=drift)
    ours = []
    for op, arg in ops:
        if op == "set":
            a.set_weights(np.asarray(arg))
        else:
            a.idle(arg)
            ours.append(a.w.tolist())
    np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=2e-6, atol=2e-7)
