"""Cross-check against IBM aihwkit 1.1.0 itself, where a venv with it exists (skipped otherwise).

aihwkit needs its own torch, so it runs as a subprocess: `AIMC_AIHWKIT_PYTHON` names its interpreter
(default ~/aihwkit-venv/bin/python). The same mini-batch update of a tile of each of aihwkit's pulsed
families from the same start weights, repeated many times, must give the same mean change and spread per
element in both simulators: the step formulas and the granularity a pulse counts for (PowStep, ExpStep and
PiecewiseStep do not count pulses in dw_min, devices.md).
"""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
from aihwkit_helpers import PYTHON
from conftest import NO_SPREAD

from aimc.devices import ConductanceArray, UpdateConfig, parse_device

SCRIPT = r"""
import json, sys
import numpy as np, torch
from aihwkit.simulator.configs import SingleRPUConfig
from aihwkit.simulator.configs import devices
from aihwkit.simulator.tiles import AnalogTile
spec = json.loads(sys.argv[1])
torch.set_num_threads(1)
torch.manual_seed(0)
cfg = SingleRPUConfig(device=getattr(devices, spec["kind"] + "Device")(**spec["device"]))
x = torch.tensor(spec["x"], dtype=torch.float32)
d = torch.tensor(spec["d"], dtype=torch.float32)
tile = AnalogTile(d.shape[1], x.shape[1], cfg, bias=False)
tile.set_learning_rate(spec["lr"])
w0 = torch.full((d.shape[1], x.shape[1]), spec["w0"])
acc = np.zeros((d.shape[1], x.shape[1]))
acc2 = np.zeros_like(acc)
for _ in range(spec["reps"]):
    tile.set_weights(w0)
    tile.update(x, d)
    dw = tile.get_weights()[0].numpy().astype(float) - spec["w0"]
    acc += dw
    acc2 += dw ** 2
m = acc / spec["reps"]
print(json.dumps({"mean": m.tolist(), "var": (acc2 / spec["reps"] - m ** 2).tolist()}))
"""

pytestmark = pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")


CYCLE_NOISE = dict(NO_SPREAD, dw_min_std=0.3)  # identical elements, aihwkit's default cycle noise
CASES = {
    "SoftBounds": dict(up_down=0.2, w_max=0.8, w_min=-0.5),
    "ConstantStep": dict(up_down=-0.1),
    "LinearStep": dict(gamma_up=0.5, gamma_down=0.3, gamma_up_dtod=0.0, gamma_down_dtod=0.0, w_max=0.8, w_min=-0.5),
    "ExpStep": dict(gamma_up=0.5, gamma_down=0.5),  # R1's code's exponential device: granularity 0.67 dw_min
    "PowStep": dict(pow_gamma=2.0, pow_gamma_dtod=0.0),  # granularity dw_min / 4
    "PiecewiseStep": dict(piecewise_up=[1.2, 0.8, 0.5, 0.3, 0.2], piecewise_down=[0.2, 0.3, 0.6, 0.9, 1.1]),
    "SoftBoundsReference": dict(up_down=0.2, w_max=0.8, w_min=-0.5, reference_mean=0.1, subtract_symmetry_point=True),
    "PowStepReference": dict(pow_gamma=2.0, pow_gamma_dtod=0.0, reference_mean=-0.05, subtract_symmetry_point=True),
    "ExpStep+noise": dict(gamma_up=0.5, gamma_down=0.5, dw_min_std_add=0.002, dw_min_std_slope=0.005),
}
LR, W0, REPS = 3e-3, 0.3, 2000


def _batch():
    rng = np.random.default_rng(0)
    x = (rng.uniform(0.2, 1, (2, 16)) * rng.choice([-1, 1], (2, 16))).astype(np.float32)
    d = (rng.uniform(0.2, 1, (2, 12)) * rng.choice([-1, 1], (2, 12))).astype(np.float32)
    return x, d


def _aihwkit_mean_var(kind: str, device: dict) -> tuple[np.ndarray, np.ndarray]:
    x, d = _batch()
    spec = dict(kind=kind, device=device, x=x.tolist(), d=d.tolist(), lr=LR, w0=W0, reps=REPS)
    out = subprocess.run([str(PYTHON), "-c", SCRIPT, json.dumps(spec)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ak = json.loads(out.stdout.strip().splitlines()[-1])
    return np.array(ak["mean"]), np.array(ak["var"])


@pytest.mark.parametrize("case", list(CASES))
def test_pulsed_update_matches_aihwkit(case):
    kind = case.split("+")[0]
    device = dict(CYCLE_NOISE, **CASES[case])
    ak_mean, ak_var = _aihwkit_mean_var(kind, device)
    x, d = _batch()
    arr = ConductanceArray(12, 16, parse_device(dict(kind=kind, **device)), seed=0)
    dws = np.empty((REPS, *arr.shape))
    for r in range(REPS):
        arr.w[...] = np.float32(W0)
        arr.update(x, d, LR, UpdateConfig(mode="pulsed"))
        dws[r] = arr.w.astype(float) - float(np.float32(W0))
    se = np.sqrt((dws.var(0) + ak_var) / REPS)
    assert np.abs(dws.mean(0) - ak_mean).max() < 5 * se.max()
    assert np.abs(dws.mean(0)).sum() == pytest.approx(np.abs(ak_mean).sum(), rel=0.02)
    assert dws.var(0).sum() == pytest.approx(ak_var.sum(), rel=0.08)


def test_aihwkit_soft_bounds_update_is_the_analog_update_of_its_formula():
    """aihwkit's mean update is the per-sample Analog Update of dw_up (1 - w/b_max), dw_down (1 - w/b_min)."""
    ak_mean, ak_var = _aihwkit_mean_var("SoftBounds", dict(CYCLE_NOISE, **CASES["SoftBounds"]))
    x, d = _batch()
    q_up, q_dn = 1.0 * (1 - W0 / 0.8), (1 - 0.2) * (1 - W0 / -0.5)
    want = sum(
        np.where(np.outer(d[b], x[b]) < 0, -LR * np.outer(d[b], x[b]) * q_up, -LR * np.outer(d[b], x[b]) * q_dn)
        for b in range(2)
    )
    assert np.abs(ak_mean - want).max() < 5 * math.sqrt(ak_var.max() / REPS)
