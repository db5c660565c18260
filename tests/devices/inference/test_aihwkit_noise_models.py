"""The inference noise models against IBM aihwkit 1.1.0's own (aihwkit.inference), run in its venv
(`AIMC_AIHWKIT_PYTHON`, tests/aihwkit_helpers.py; skipped where it is absent).

The same target weights, a few weight levels each repeated on many devices, go through programming,
the drift coefficients and the drift/read noise at several inference times in both; per weight level the
programmed weights, the drift coefficients of each device tensor and the weights at every time must be
samples of one distribution: a two-sample Kolmogorov-Smirnov test at p > 1e-5, and means and standard
deviations within 5 standard errors of their difference (the std's from the samples' fourth moments).
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from aihwkit_helpers import PYTHON
from scipy.stats import ks_2samp

from aimc.devices import inference

pytestmark = pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")

SCRIPT = r"""
import json, sys
import numpy as np, torch
import aihwkit.inference as inf
spec = json.loads(sys.argv[1])
torch.manual_seed(spec["seed"])
kwargs = dict(spec["kwargs"])
if "coeff_dic" in kwargs:
    kwargs["coeff_dic"] = {float(k): v for k, v in kwargs["coeff_dic"].items()}
model = getattr(inf, spec["model"])(**kwargs)
w = torch.tensor(np.load(spec["weights"]))
if spec["read_only"]:  # the weights are conductances (uS) of devices with drift exponents 0
    out = {}
    for i, t in enumerate(spec["times"]):
        out[f"g_t{i}"] = model.apply_drift_noise_to_conductance(w.clone(), torch.zeros_like(w), t).numpy()
    np.savez(spec["out"], **out)
    sys.exit(0)
w_prog, state = model.apply_programming_noise(w)
if isinstance(model.g_converter, inf.SingleDeviceConductanceConverter):
    state = [torch.stack(state)]  # its converter gives one tensor, iterated by rows
out = {"w_prog": w_prog.numpy()}
for i, s in enumerate(state):
    out[f"state{i}"] = s.numpy()
for i, t in enumerate(spec["times"]):
    out[f"w_t{i}"] = model.apply_drift_noise(w_prog, state, t).numpy()
np.savez(spec["out"], **out)
"""

LEVELS = [-1.0, -0.6, -0.2, 0.0, 0.1, 0.3, 0.5, 0.8, 1.0]
SINGLE_DEVICE_LEVELS = [-1.0, -0.5, 0.0, 0.25, 0.5, 0.75, 1.0]
N = 20_000
YEAR = 365 * 24 * 3600.0
TIMES = [1.0, 3600.0, YEAR, 10 * YEAR]
KS_P_MIN = 1e-5


def run_aihwkit(
    model: str, kwargs: dict, w: np.ndarray, times: list[float], read_only: bool = False
) -> dict[str, np.ndarray]:
    """aihwkit's weights after programming and at the times, or (read_only) its conductances w (uS) after
    drift and read noise with drift exponents 0."""
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "w.npy", w)
        spec = dict(model=model, kwargs=kwargs, weights=str(Path(tmp) / "w.npy"), times=times, seed=0)
        spec["read_only"] = read_only
        spec["out"] = str(Path(tmp) / "out.npz")
        done = subprocess.run(
            [str(PYTHON), "-c", SCRIPT, json.dumps(spec)], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        with np.load(spec["out"]) as data:
            return {k: data[k] for k in data.files}


def run_ours(model: inference.NoiseModel, w: np.ndarray, times: list[float]) -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(1)
    w_prog, state = model.apply_programming_noise(torch.tensor(w), g)
    out = {"w_prog": w_prog.numpy()}
    for i, s in enumerate(state):
        out[f"state{i}"] = s.numpy()
    for i, t in enumerate(times):
        out[f"w_t{i}"] = model.apply_drift_noise(w_prog, state, t, g).numpy()
    return out


def run_ours_read_only(model: inference.NoiseModel, g: np.ndarray, times: list[float]) -> dict[str, np.ndarray]:
    gen = torch.Generator().manual_seed(1)
    g_t = torch.tensor(g)
    zeros = torch.zeros_like(g_t)
    return {f"g_t{i}": model.apply_drift_noise_to_conductance(g_t, zeros, t, gen).numpy() for i, t in enumerate(times)}


def level_weights(levels: list[float]) -> np.ndarray:
    """One row of N devices per weight level."""
    return np.repeat(np.array(levels, dtype=np.float32)[:, None], N, axis=1)


def std_error(x: np.ndarray) -> float:
    """Standard error of the sample std of x: sqrt((m4 - s^4) / n) / (2 s), m4 the fourth central moment."""
    var = x.var()
    if var == 0.0:
        return 0.0
    return math.sqrt(max(((x - x.mean()) ** 4).mean() - var**2, 0.0) / x.size) / (2 * math.sqrt(var))


def assert_same_distributions(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray], levels: list[float]):
    assert sorted(ours) == sorted(theirs)
    for key in ours:
        for row, level in enumerate(levels):
            a, b = ours[key][row].astype(float), theirs[key][row].astype(float)
            assert np.isfinite(a).all() and np.isfinite(b).all(), (key, level)
            p = ks_2samp(a, b).pvalue
            assert p > KS_P_MIN, f"{key} at w = {level}: KS p = {p:.2g}, means {a.mean():.5g} vs {b.mean():.5g}"
            se = math.sqrt((a.var() + b.var()) / N)
            assert abs(a.mean() - b.mean()) <= 5 * se + 1e-12, f"{key} at w = {level}: mean {a.mean()} vs {b.mean()}"
            se_std = math.sqrt(std_error(a) ** 2 + std_error(b) ** 2)
            assert abs(a.std() - b.std()) <= 5 * se_std + 1e-12, f"{key} at w = {level}: std {a.std()} vs {b.std()}"


CASES = {
    "pcm-default": ("PCMLikeNoiseModel", {}, lambda: inference.PCMLikeNoiseModel()),
    "pcm-scaled": (
        "PCMLikeNoiseModel",
        dict(g_max=40.0, prog_noise_scale=2.0, read_noise_scale=1.5, drift_scale=0.5, t_0=10.0),
        lambda: inference.PCMLikeNoiseModel(
            g_max=40.0, prog_noise_scale=2.0, read_noise_scale=1.5, drift_scale=0.5, t_0=10.0
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_noise_model_matches_aihwkit(case):
    name, kwargs, make = CASES[case]
    w = level_weights(LEVELS)
    assert_same_distributions(run_ours(make(), w, TIMES), run_aihwkit(name, kwargs, w, TIMES), LEVELS)


READ_CASES = {
    "pcm-default": ("PCMLikeNoiseModel", {}, lambda: inference.PCMLikeNoiseModel()),
}
G_LEVELS = [0.0, 0.5, 2.0, 8.0, 16.0, 25.0]


@pytest.mark.parametrize("case", sorted(READ_CASES))
def test_read_noise_matches_aihwkit_at_1s_1h_1y_10y(case):
    name, kwargs, make = READ_CASES[case]
    g = level_weights(G_LEVELS)
    ours = run_ours_read_only(make(), g, [0.0, *TIMES])
    assert_same_distributions(ours, run_aihwkit(name, kwargs, g, [0.0, *TIMES], read_only=True), G_LEVELS)
