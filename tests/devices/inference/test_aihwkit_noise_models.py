"""The inference noise models against IBM aihwkit 1.1.0's own (aihwkit.inference), run in its venv
(`AIMC_AIHWKIT_PYTHON`, tests/aihwkit_helpers.py; skipped where it is absent).

The same target weights, a few weight levels each on M devices, go through programming, the drift
coefficients and the drift/read noise at several inference times in both, RUNS times with fresh draws; per
weight level the programmed weights, the drift coefficients of each device tensor and the weights at every
time, pooled over the runs, must be samples of one distribution. (The drift step converts the programmed
weights anew, with a scale set by the extreme programmed weight of the tensor: a random factor common to a
run's devices, so the samples are pooled over many small runs rather than drawn from one large one; for a
single device per weight, whose drift clips at g_min and g_max, the drifted weights are compared as the
conductances of that conversion, rounded to 1e-4 uS, so that the clipped devices of all runs coincide.) The
test: a two-sample Kolmogorov-Smirnov test at p > 1e-5, and means and standard deviations within 5 standard
errors of their difference (the std's from the samples' fourth moments).
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
runs = {}
for part in torch.tensor_split(w, spec["runs"], dim=1):
    w_prog, state = model.apply_programming_noise(part)
    saved = state
    if isinstance(model.g_converter, inf.SingleDeviceConductanceConverter):
        saved = [torch.stack(state)]  # its converter gives one tensor, iterated by rows
    run = {"w_prog": w_prog}
    run.update({f"state{i}": s for i, s in enumerate(saved)})
    run.update({f"w_t{i}": model.apply_drift_noise(w_prog, state, t) for i, t in enumerate(spec["times"])})
    if isinstance(model.g_converter, inf.SingleDeviceConductanceConverter):
        _, p = model.g_converter.convert_to_conductances(w_prog)
        for i in range(len(spec["times"])):
            g_t = (run[f"w_t{i}"] - p["min"]) * p["scale_ratio"] + model.g_converter.g_min
            run[f"w_t{i}"] = torch.round(g_t, decimals=4)
    for k, v in run.items():
        runs.setdefault(k, []).append(v)
out = {k: torch.cat(v, dim=1).numpy() for k, v in runs.items()}
np.savez(spec["out"], **out)
"""

LEVELS = [-1.0, -0.6, -0.2, 0.0, 0.1, 0.3, 0.5, 0.8, 1.0]
SINGLE_DEVICE_LEVELS = [-1.0, -0.5, 0.0, 0.25, 0.5, 0.75, 1.0]
RUNS, M = 200, 100
N = RUNS * M
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
        spec = dict(model=model, kwargs=kwargs, weights=str(Path(tmp) / "w.npy"), times=times, seed=0, runs=RUNS)
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
    runs: dict[str, list[torch.Tensor]] = {}
    for part in torch.tensor_split(torch.tensor(w), RUNS, dim=1):
        w_prog, state = model.apply_programming_noise(part, g)
        run = {"w_prog": w_prog}
        run.update({f"state{i}": s for i, s in enumerate(state)})
        run.update({f"w_t{i}": model.apply_drift_noise(w_prog, state, t, g) for i, t in enumerate(times)})
        if isinstance(model.g_converter, inference.SingleDeviceConductanceConverter):
            _, p = model.g_converter.convert_to_conductances(w_prog)
            for i in range(len(times)):
                g_t = (run[f"w_t{i}"] - p["min"]) * p["scale_ratio"] + model.g_converter.g_min
                run[f"w_t{i}"] = torch.round(g_t, decimals=4)
        for k, v in run.items():
            runs.setdefault(k, []).append(v)
    return {k: torch.cat(v, dim=1).numpy() for k, v in runs.items()}


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


DRIFT_TABLE = dict(
    g_lst=[0.0, 5.0, 15.0, 25.0], nu_mean_lst=[0.12, 0.08, 0.05, 0.04], nu_std_lst=[0.04, 0.02, 0.015, 0.01]
)
WAN_TIMES = [1.0, 86400.0, 172800.0]
PCM_SCALED = dict(g_max=40.0, prog_noise_scale=2.0, read_noise_scale=1.5, drift_scale=0.5, t_0=10.0)
SI_CUSTOM = dict(prog_coeff=[0.1, 0.4, -0.2], drift_nu_mean=0.02, drift_nu_std=0.04, read_noise_scale=0.05)
CASES = {  # aihwkit class, its keyword arguments (also ours), weight levels, inference times (s)
    "pcm-default": ("PCMLikeNoiseModel", {}, LEVELS, TIMES),
    "pcm-scaled": ("PCMLikeNoiseModel", PCM_SCALED, LEVELS, TIMES),
    "state-independent-default": ("StateIndependentNoiseModel", {}, LEVELS, TIMES),
    "state-independent-custom": ("StateIndependentNoiseModel", SI_CUSTOM, LEVELS, TIMES),
    "custom-drift-pcm": ("CustomDriftPCMLikeNoiseModel", dict(custom_drift_model=DRIFT_TABLE), LEVELS, TIMES),
    "reram-wan2022": ("ReRamWan2022NoiseModel", {}, LEVELS, WAN_TIMES),
    "reram-wan2022-g40": ("ReRamWan2022NoiseModel", dict(g_max=40.0, noise_scale=0.5), LEVELS, WAN_TIMES),
    "reram-cmo-default": ("ReRamCMONoiseModel", {}, SINGLE_DEVICE_LEVELS, TIMES),
    "reram-cmo-2percent": (
        "ReRamCMONoiseModel",
        dict(acceptance_range=2, drift_scale=0.5),
        SINGLE_DEVICE_LEVELS,
        TIMES,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_noise_model_matches_aihwkit(case):
    name, kwargs, levels, times = CASES[case]
    w = level_weights(levels)
    ours = run_ours(getattr(inference, name)(**kwargs), w, times)
    assert_same_distributions(ours, run_aihwkit(name, kwargs, w, times), levels)


READ_CASES = {  # aihwkit class, keyword arguments, conductance levels (uS)
    "pcm-default": ("PCMLikeNoiseModel", {}, [0.0, 0.5, 2.0, 8.0, 16.0, 25.0]),
    "state-independent-default": ("StateIndependentNoiseModel", {}, [0.0, 0.5, 2.0, 8.0, 16.0, 25.0]),
    "reram-cmo-default": ("ReRamCMONoiseModel", {}, [9.0, 20.0, 50.0, 88.199997]),
}


@pytest.mark.parametrize("case", sorted(READ_CASES))
def test_read_noise_matches_aihwkit_at_1s_1h_1y_10y(case):
    """Drift and read noise alone (drift exponents 0): at t = 0, 1 s, 1 h, 1 year and 10 years."""
    name, kwargs, levels = READ_CASES[case]
    g = level_weights(levels)
    ours = run_ours_read_only(getattr(inference, name)(**kwargs), g, [0.0, *TIMES])
    assert_same_distributions(ours, run_aihwkit(name, kwargs, g, [0.0, *TIMES], read_only=True), levels)
