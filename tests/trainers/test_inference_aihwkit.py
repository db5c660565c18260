"""Inference tiles against aihwkit 1.1.0's InferenceTile, where a venv with aihwkit exists (skipped otherwise;
`AIMC_AIHWKIT_PYTHON` names its interpreter).

One small FCN (784-64-10, ReLU) is trained digitally on the shipped mnist_small, then programmed in both
simulators with the default inference config (R1's periphery = aihwkit's default IOParameters, PCM-like
noise, global drift compensation) and evaluated at 1 s, 1 d and 1 y after programming over 6 draws: the
mean accuracies agree within 3 standard errors of their difference (plus 0.5 points of slack) at every
time, and both lose accuracy from 1 s to 1 y.
"""

from __future__ import annotations

import json
import subprocess
import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from aihwkit_helpers import PYTHON
from torch import nn

from aimc import trainers
from aimc.datasets import load_dataset

pytestmark = pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")

TIMES = (1.0, 86400.0, 365.25 * 86400.0)
DRAWS = 6

AIHWKIT = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    from aihwkit.nn import AnalogLinear, AnalogSequential
    from aihwkit.simulator.configs import InferenceRPUConfig
    z = np.load(sys.argv[1])
    model = AnalogSequential(AnalogLinear(784, 64, rpu_config=InferenceRPUConfig()), torch.nn.ReLU(),
                             AnalogLinear(64, 10, rpu_config=InferenceRPUConfig()))
    model[0].set_weights(torch.tensor(z["w0"]), torch.tensor(z["b0"]))
    model[2].set_weights(torch.tensor(z["w1"]), torch.tensor(z["b1"]))
    x, y = torch.tensor(z["x"]), torch.tensor(z["y"])
    model.eval()
    out = {}
    for draw in range(int(sys.argv[2])):
        torch.manual_seed(draw)
        model.program_analog_weights()
        for t in json.loads(sys.argv[3]):
            model.drift_analog_weights(t)
            with torch.no_grad():
                out.setdefault(str(t), []).append(float((model(x).argmax(1) == y).float().mean()))
    print(json.dumps(out))
    """
)


def _trained() -> tuple[nn.Sequential, torch.Tensor, torch.Tensor]:
    x_tr, y_tr, x, y = load_dataset("mnist_small").tensors()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(5):
        for i in range(0, len(y_tr), 50):
            opt.zero_grad()
            F.cross_entropy(model(x_tr[i : i + 50].reshape(-1, 784)), y_tr[i : i + 50]).backward()
            opt.step()
    return model, x.reshape(-1, 784), y


def test_accuracy_over_time_matches_aihwkit(tmp_path):
    model, x, y = _trained()
    np.savez(
        tmp_path / "fcn.npz",
        **{f"w{i}": m.weight.detach().numpy() for i, m in enumerate((model[0], model[2]))},
        **{f"b{i}": m.bias.detach().numpy() for i, m in enumerate((model[0], model[2]))},
        x=x.numpy(),
        y=y.numpy(),
    )
    done = subprocess.run(
        [str(PYTHON), "-c", AIHWKIT, str(tmp_path / "fcn.npz"), str(DRAWS), json.dumps(TIMES)],
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = {float(k): np.array(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    trainers.convert(model, trainers.InferenceTileConfig()).eval()
    ours = {t: [] for t in TIMES}
    for draw in range(DRAWS):
        trainers.program(model, draw=draw)
        for t in TIMES:
            trainers.drift(model, t)
            with torch.no_grad():
                ours[t].append(float((model(x).argmax(1) == y).float().mean()))
    for t in TIMES:
        a, b = np.array(ours[t]), theirs[t]
        se = np.sqrt(a.var(ddof=1) / DRAWS + b.var(ddof=1) / DRAWS)
        assert abs(a.mean() - b.mean()) <= 3 * se + 0.005, (t, a, b)
    assert np.mean(ours[TIMES[-1]]) < np.mean(ours[TIMES[0]])
    assert np.mean(theirs[TIMES[-1]]) < np.mean(theirs[TIMES[0]])
