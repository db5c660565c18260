"""Cross-check against IBM aihwkit 1.1.0 itself, where a venv with it exists (skipped otherwise).

aihwkit needs its own torch, so it runs as a subprocess: `AIMC_AIHWKIT_PYTHON` names its interpreter
(default ~/aihwkit-venv/bin/python). The same mini-batch update of a SoftBounds tile from the same start
weights, repeated many times, must give the same mean change and spread per element in both simulators.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from devices import ConductanceArray, UpdateConfig, parse_device

PYTHON = Path(os.path.expanduser(os.environ.get("AIMC_AIHWKIT_PYTHON", "~/aihwkit-venv/bin/python")))

SCRIPT = r"""
import json, sys
import numpy as np, torch
from aihwkit.simulator.configs import SingleRPUConfig, SoftBoundsDevice
from aihwkit.simulator.tiles import AnalogTile
spec = json.loads(sys.argv[1])
torch.set_num_threads(1)
torch.manual_seed(0)
cfg = SingleRPUConfig(device=SoftBoundsDevice(**spec["device"]))
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


def test_soft_bounds_update_matches_aihwkit():
    rng = np.random.default_rng(0)
    x = (rng.uniform(0.2, 1, (2, 16)) * rng.choice([-1, 1], (2, 16))).astype(np.float32)
    d = (rng.uniform(0.2, 1, (2, 12)) * rng.choice([-1, 1], (2, 12))).astype(np.float32)
    device = dict(dw_min_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0, up_down_dtod=0.0, dw_min_std=0.3,
                  up_down=0.2, w_max=0.8, w_min=-0.5)
    lr, w0, reps = 3e-3, 0.3, 2000
    spec = dict(device=device, x=x.tolist(), d=d.tolist(), lr=lr, w0=w0, reps=reps)
    out = subprocess.run([str(PYTHON), "-c", SCRIPT, json.dumps(spec)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ak = json.loads(out.stdout.strip().splitlines()[-1])
    ak_mean, ak_var = np.array(ak["mean"]), np.array(ak["var"])

    arr = ConductanceArray(12, 16, parse_device(dict(kind="SoftBounds", **device)), seed=0)
    dws = np.empty((reps, *arr.shape))
    for r in range(reps):
        arr.w[...] = np.float32(w0)
        arr.update(x, d, lr, UpdateConfig(mode="pulsed"))
        dws[r] = arr.w.astype(float) - float(np.float32(w0))
    se = np.sqrt((dws.var(0) + ak_var) / reps)
    assert np.abs(dws.mean(0) - ak_mean).max() < 5 * se.max()
    assert np.abs(dws.mean(0)).sum() == pytest.approx(np.abs(ak_mean).sum(), rel=0.02)
    assert dws.var(0).sum() == pytest.approx(ak_var.sum(), rel=0.08)
    # and both are the per-sample Analog Update of the aihwkit formula: dw_up (1 - w/b_max), dw_down (1 - w/b_min)
    q_up, q_dn = 1.0 * (1 - w0 / 0.8), (1 - 0.2) * (1 - w0 / -0.5)
    want = sum(np.where(np.outer(d[b], x[b]) < 0, -lr * np.outer(d[b], x[b]) * q_up,
                        -lr * np.outer(d[b], x[b]) * q_dn) for b in range(2))
    assert np.abs(ak_mean - want).max() < 5 * math.sqrt(ak_var.max() / reps)
