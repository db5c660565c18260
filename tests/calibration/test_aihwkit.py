"""Round trips against IBM aihwkit 1.1.0: pulse traces of populations of 16 devices with aihwkit's own
device-to-device spread, simulated by aihwkit itself, are fitted; the family must be the simulated one and the
truth (aihwkit's parameters) must lie inside the 95% interval for >= 90% of the fitted parameters, counted over
the intervals of POPULATIONS populations (one population's 6 to 8 intervals all hold the truth only about 70% of
the time even when each holds it with probability 0.95, so a single population cannot test the 90%).

aihwkit runs in a subprocess of its own interpreter (`AIMC_AIHWKIT_PYTHON`, default ~/aihwkit-venv/bin/python,
as in tests/devices/test_aihwkit.py); the tests skip without it. One pulse per update: bit length 1, update
management off and a learning rate large enough that both pulse probabilities are 1, so every update of a
(16 x 1) tile with x = 1, d = -+1 fires exactly one up (down) pulse into each element.
"""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
from aihwkit_helpers import PYTHON

from aimc.calibration import cycle_polarity, fit, from_arrays
from aimc.calibration.families import expstep_canonical
from aimc.devices import ExpStep

needs_aihwkit = pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")

SCRIPT = r"""
import json, sys
import numpy as np, torch
from aihwkit.simulator.configs import SingleRPUConfig, devices
from aihwkit.simulator.presets import devices as presets
from aihwkit.simulator.tiles import AnalogTile
spec = json.loads(sys.argv[1])
torch.set_num_threads(1)
torch.manual_seed(spec["seed"])
cls = getattr(presets, spec["preset"]) if spec.get("preset") else getattr(devices, spec["kind"] + "Device")
cfg = SingleRPUConfig(device=cls(**spec["device"]))
cfg.update.desired_bl = 1
cfg.update.update_bl_management = False
cfg.update.update_management = False
n = spec["n_devices"]
tile = AnalogTile(n, 1, cfg, bias=False)
tile.set_learning_rate(100.0)
tile.set_weights(torch.zeros(n, 1))
x, up, down = torch.ones(1, 1), -torch.ones(1, n), torch.ones(1, n)
for _ in range(spec["n_pulses"]):
    tile.update(x, down)
reads = [tile.get_weights()[0][:, 0].numpy().astype(float).tolist()]
for _ in range(spec["n_cycles"]):
    for d in (up, down):
        for _ in range(spec["n_pulses"]):
            tile.update(x, d)
            reads.append(tile.get_weights()[0][:, 0].numpy().astype(float).tolist())
print(json.dumps(reads))
"""

# aihwkit 1.1.0 presets and parameters; truth in the fitted parameterisation (ExpStep: a = 0.5, b = 0)
RERAM_ES = dict(
    dw_min=0.00135,
    up_down=0.259359,
    w_max=1.0,
    w_min=-1.0,
    A_up=-1.18445,
    A_down=-0.081404,
    gamma_up=5.0,
    gamma_down=5.0,
    a=-0.5,
    b=-0.5,
)
CASES = {
    "EcRAM": (
        dict(preset="EcRamPresetDevice", device={}, n_pulses=1500, read_noise=5e-4),
        "LinearStep",
        dict(dw_min=0.002, up_down=0.0, w_max=1.1724, w_min=-0.8276, gamma_up=0.1153, gamma_down=0.5085),
    ),
    "ReRamES": (
        dict(preset="ReRamESPresetDevice", device={"write_noise_std": 0.0}, n_pulses=2200, read_noise=3e-4),
        "ExpStep",
        expstep_canonical(RERAM_ES),
    ),
    "PowStep": (
        dict(kind="PowStep", device={"dw_min": 0.02, "pow_gamma": 2.0}, n_pulses=600, read_noise=1.25e-3),
        "PowStep",
        dict(dw_min=0.02, up_down=0.0, w_max=0.6, w_min=-0.6, pow_gamma=2.0, pow_up_down=0.0),
    ),
}


def aihwkit_traces(spec: dict, n_cycles: int = 2, n_devices: int = 16, seed: int = 0):
    """Traces of n_devices aihwkit elements: a RESET of n_pulses down pulses, then n_cycles cycles of n_pulses
    up and n_pulses down, read after each pulse with Gaussian read noise (weight units) added here."""
    run = dict(spec, n_cycles=n_cycles, n_devices=n_devices, seed=seed)
    out = subprocess.run([str(PYTHON), "-c", SCRIPT, json.dumps(run)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    reads = np.array(json.loads(out.stdout.strip().splitlines()[-1]))
    reads += np.random.default_rng(seed).normal(0.0, spec["read_noise"], reads.shape)
    return from_arrays(
        20.0 + 10.0 * reads,
        cycle_polarity(spec["n_pulses"], n_cycles),
        unit="uS",
        meta={"g_mid": "20.0", "g_scale": "10.0"},
    )


def test_expstep_canonical_keeps_the_response():
    w = np.linspace(-0.99, 0.99, 41)
    original, canonical = ExpStep(**RERAM_ES), ExpStep(**expstep_canonical(RERAM_ES))
    z = 2 * RERAM_ES["a"] * w / 2.0 + RERAM_ES["b"]  # aihwkit 1.1.0's step shape at w, bounds -+1
    up = (1 + min(RERAM_ES["up_down"], 0.0)) * np.maximum(1 - RERAM_ES["A_up"] * np.exp(RERAM_ES["gamma_up"] * z), 0)
    np.testing.assert_allclose(original.q_plus(w), up, rtol=1e-12)
    np.testing.assert_allclose(canonical.q_plus(w), original.q_plus(w), rtol=1e-12)
    np.testing.assert_allclose(canonical.q_minus(w), original.q_minus(w), rtol=1e-12)
    assert canonical.a == 0.5 and canonical.b == 0.0 and math.isclose(canonical.gamma_up, -5.0)


# measured 2026-12-05 (docs/calibration.md, round trips against aihwkit): what does not hold yet
KNOWN_MISSES = {
    ("EcRAM", "pooled"): "tabulated chosen (PowStep +550, LinearStep +11754): the pooled response of devices with "
    "spread bounds is smooth; LinearStep's intervals hold the truth 0/6",
    ("ReRamES", "pooled"): "PowStep chosen by 76 over ExpStep; ExpStep's intervals hold the truth 4/8",
    ("PowStep", "pooled"): "passes in 1 of 2 runs: tabulated and PowStep within a few BIC units; PowStep's "
    "sandwich intervals hold the truth 2/6 (pooled fit of the bound spread, w_max_dtod 0.3)",
}
CANDIDATES = ["ConstantStep", "SoftBounds", "LinearStep", "ExpStep", "PowStep", "tabulated"]  # aihwkit's own


POPULATIONS = {"per-device": 8, "pooled": 1}  # seeds of each round trip (the pooled fit's misses are wide)


def _round_trip(name: str, method: str, seed: int, **options) -> tuple[str, list[bool]]:
    """(family chosen, truth inside each interval of the true family) for one population: per-device with the
    default intervals (the median's order statistics), pooled with the bootstrap over devices and cycles."""
    spec, kind, truth = CASES[name]
    pooled = method == "pooled"
    res = fit(
        aihwkit_traces(spec, seed=seed),
        kinds=CANDIDATES,
        spread=False,
        method=method,
        intervals="bootstrap" if pooled else "analytic",
        n_boot=100 if pooled else None,
        **options,
    )
    return res.best.kind, [lo <= truth[p] <= hi for p, (lo, hi) in res.fits[kind].ci95.items()]


def _check(name: str, found: list[tuple[str, list[bool]]]) -> None:
    kinds, hits = [best for best, _ in found], [h for _, own in found for h in own]
    assert kinds == [CASES[name][1]] * len(found) and np.mean(hits) >= 0.9, (kinds, np.mean(hits), found)


@needs_aihwkit
@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("method", ["per-device", "pooled"])
def test_aihwkit_population_round_trip(name, method, request):
    if (name, method) in KNOWN_MISSES:  # run all the same: an XPASS shows a miss that went away
        request.applymarker(pytest.mark.xfail(reason=KNOWN_MISSES[name, method], strict=False))
    _check(name, [_round_trip(name, method, seed) for seed in range(POPULATIONS[method])])


@needs_aihwkit
@pytest.mark.slow
def test_aihwkit_round_trip_with_the_likelihood():
    # the option built for cycle noise of several steps: ReRamES's 5, its per-device fits refined
    _check(
        "ReRamES",
        [_round_trip("ReRamES", "per-device", seed, likelihood=True) for seed in range(POPULATIONS["per-device"])],
    )
