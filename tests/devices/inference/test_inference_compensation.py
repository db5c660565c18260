"""Global and per-column drift compensation (aihwkit 1.1.0, inference/compensation/drift.py): closed forms of the
probe readout and the scale, and the scale's distribution after PCM programming and drift against aihwkit's
InferenceTile (is_perfect forward, so the read is x @ W^T in both), where its venv exists."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
import torch
from aihwkit_helpers import PYTHON

from aimc.devices import inference
from aimc.devices.inference import (
    GlobalDriftCompensation,
    GlobalDriftCompensationWithExactReference,
    PCMLikeNoiseModel,
    PerColumnDriftCompensation,
)


def linear_read(w: torch.Tensor):
    return lambda x: x @ w.T


def test_registries_name_every_class():
    assert sorted(inference.DRIFT_COMPENSATIONS) == [
        "GlobalDriftCompensation",
        "GlobalDriftCompensationWithExactReference",
        "PerColumnDriftCompensation",
    ]
    assert sorted(inference.NOISE_MODELS) == [
        "CustomDriftPCMLikeNoiseModel",
        "PCMLikeNoiseModel",
        "ReRamCMONoiseModel",
        "ReRamWan2022NoiseModel",
        "StateIndependentNoiseModel",
    ]
    assert all(issubclass(cls, inference.NoiseModel) for cls in inference.NOISE_MODELS.values())


def test_probe_is_the_identity():
    probe = GlobalDriftCompensation().get_readout_tensor(5)
    assert probe.dtype == torch.float32 and torch.equal(probe, torch.eye(5))
    with pytest.raises(ValueError, match="^in_size: "):
        GlobalDriftCompensation().get_readout_tensor(0)


def test_global_readout_is_mean_abs_weight_and_undoes_a_common_drift_factor():
    w = torch.randn(6, 9, generator=torch.Generator().manual_seed(0))
    comp = GlobalDriftCompensation()
    baseline = comp.init_baseline(linear_read(w), 9)
    assert baseline.shape == () and float(baseline) == pytest.approx(float(w.abs().mean()), rel=1e-6)
    assert float(comp.compensation_scale(linear_read(0.37 * w), 9, baseline)) == pytest.approx(1 / 0.37, rel=1e-5)
    assert float(comp.get_readout(linear_read(torch.zeros(6, 9)), 9)) == pytest.approx(1e-4)
    assert GlobalDriftCompensationWithExactReference.exact_reference and not comp.exact_reference


def test_per_column_readout_is_per_output_and_undoes_per_output_factors():
    w = torch.randn(6, 9, generator=torch.Generator().manual_seed(1))
    comp = PerColumnDriftCompensation()
    baseline = comp.init_baseline(linear_read(w), 9)
    assert torch.allclose(baseline, w.abs().mean(dim=1))
    factors = torch.linspace(0.3, 0.9, 6)
    alpha = comp.compensation_scale(linear_read(factors[:, None] * w), 9, baseline)
    assert torch.allclose(alpha, 1 / factors, rtol=1e-5)
    w[2] = 0.0
    assert float(comp.init_baseline(linear_read(w), 9)[2]) == pytest.approx(1e-4)


SCRIPT = r"""
import json, sys
import numpy as np, torch
from aihwkit.nn import AnalogLinear
from aihwkit.simulator.configs import InferenceRPUConfig
from aihwkit.simulator.parameters import IOParameters
from aihwkit.inference import PCMLikeNoiseModel
from aihwkit.inference.compensation.drift import GlobalDriftCompensation, PerColumnDriftCompensation
spec = json.loads(sys.argv[1])
torch.manual_seed(0)
cfg = InferenceRPUConfig()
cfg.forward = IOParameters(is_perfect=True)
cfg.noise_model = PCMLikeNoiseModel()
cfg.drift_compensation = {"global": GlobalDriftCompensation, "column": PerColumnDriftCompensation}[spec["kind"]]()
w = torch.tensor(spec["w"])
layer = AnalogLinear(w.shape[1], w.shape[0], bias=False, rpu_config=cfg)
layer.set_weights(w)
tile = next(layer.analog_tiles())
alphas = []
for _ in range(spec["reps"]):
    tile.program_weights()
    tile.drift_weights(spec["t"])
    alphas.append(tile.alpha.reshape(-1).tolist())
print(json.dumps(alphas))
"""
REPS = 400


def our_alphas(kind: str, w: torch.Tensor, t: float) -> np.ndarray:
    model, gen = PCMLikeNoiseModel(), torch.Generator().manual_seed(2)
    comp = GlobalDriftCompensation() if kind == "global" else PerColumnDriftCompensation()
    alphas = []
    for _ in range(REPS):
        w_prog, state = model.apply_programming_noise(w, gen)
        baseline = comp.init_baseline(linear_read(w_prog), w.shape[1])
        w_t = model.apply_drift_noise(w_prog, state, t, gen)
        alphas.append(comp.compensation_scale(linear_read(w_t), w.shape[1], baseline).reshape(-1).numpy())
    return np.array(alphas, dtype=float)


@pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")
@pytest.mark.parametrize("kind", ["global", "column"])
@pytest.mark.parametrize("t", [3600.0, 365 * 24 * 3600.0])
def test_compensation_scale_matches_aihwkit(kind, t):
    w = torch.randn(8, 32, generator=torch.Generator().manual_seed(3))
    spec = dict(kind=kind, w=w.tolist(), t=t, reps=REPS)
    done = subprocess.run([str(PYTHON), "-c", SCRIPT, json.dumps(spec)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = np.array(json.loads(done.stdout.strip().splitlines()[-1]), dtype=float)
    ours = our_alphas(kind, w, t)
    assert ours.shape == theirs.shape == (REPS, 1 if kind == "global" else 8)
    for a, b in zip(ours.T, theirs.T):
        se = math.sqrt((a.var() + b.var()) / REPS)
        assert abs(a.mean() - b.mean()) <= 5 * se, (a.mean(), b.mean(), se)
        # std of a sample std ~ s / sqrt(2 n) for these near-normal scales
        assert abs(a.std() - b.std()) <= 5 * math.sqrt((a.var() + b.var()) / (2 * REPS)), (a.std(), b.std())
    # an hour of PCM drift (nu ~ 0.05 .. 0.1) needs a scale of about (3620 / 20)^0.06 ~ 1.4
    assert 1.1 < ours.mean() < 3.0
