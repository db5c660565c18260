"""R1's families in aihwkit: the PiecewiseStep tabulation of a fitted response reproduces the family's own
response (within the linear interpolation between nodes) and, built by IBM aihwkit 1.1.0 from the report's
snippet, the family's noise-free cycle trace (skipped without aihwkit's interpreter, tests/aihwkit_helpers.py)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from aihwkit_helpers import PYTHON

from aimc.calibration import measure_cycles
from aimc.calibration.aihwkit_export import aihwkit_snippet, piecewise_table
from aimc.devices import Exponential, Linear, Power

DEVICES = [
    Linear(tau=0.6, dw_min=0.01, dw_min_std=0.0),
    Power(tau=0.6, gamma=2.0, dw_min=0.01, dw_min_std=0.0),
    Exponential(dw_min=0.01, dw_min_std=0.0),
]
N_PULSES = 300

SCRIPT = r"""
import json, sys
import torch
from aihwkit.simulator.configs import SingleRPUConfig
from aihwkit.simulator.tiles import AnalogTile
spec = json.loads(sys.argv[1])
namespace = {}
exec(spec["snippet"], namespace)
cfg = SingleRPUConfig(device=namespace["device"])
cfg.update.desired_bl = 1
cfg.update.update_bl_management = False
cfg.update.update_management = False
tile = AnalogTile(1, 1, cfg, bias=False)
tile.set_learning_rate(100.0)
tile.set_weights(torch.zeros(1, 1))
x = torch.ones(1, 1)
for _ in range(spec["n"]):
    tile.update(x, torch.ones(1, 1))
reads = [float(tile.get_weights()[0][0, 0])]
for d in (-1.0, 1.0):
    for _ in range(spec["n"]):
        tile.update(x, torch.full((1, 1), d))
        reads.append(float(tile.get_weights()[0][0, 0]))
print(json.dumps(reads))
"""


def _trace(device) -> np.ndarray:
    return measure_cycles(device, n_pulses=N_PULSES, n_cycles=1, n_devices=1, seed=0).conductance


@pytest.mark.parametrize("device", DEVICES, ids=lambda d: d.kind)
def test_tabulation_reproduces_the_response_and_trace(device):
    table = piecewise_table(device)
    w = np.linspace(*device.bounds, 1001)
    np.testing.assert_allclose(table.q_plus(w), device.q_plus(w), atol=1e-3)
    np.testing.assert_allclose(table.q_minus(w), device.q_minus(w), atol=1e-3)
    a, b = _trace(device), _trace(table)
    assert np.abs(a - b).max() < 1e-3 * (a.max() - a.min())


@pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")
@pytest.mark.parametrize("device", DEVICES, ids=lambda d: d.kind)
def test_snippet_in_aihwkit_reproduces_the_trace(device):
    spec = {"snippet": aihwkit_snippet(device.model_dump(mode="json")), "n": N_PULSES}
    out = subprocess.run([str(PYTHON), "-c", SCRIPT, json.dumps(spec)], capture_output=True, text=True, check=True)
    theirs = np.array(json.loads(out.stdout.strip().splitlines()[-1]))
    ours = _trace(device)  # g_mid 20, g_scale 10 (uS per unit weight) of measure_cycles
    ours = (ours - 20.0) / 10.0
    assert len(theirs) == len(ours)
    assert np.abs(theirs - ours).max() < 2e-3 * (ours.max() - ours.min())
