"""c-TTv2 and AGAD against aihwkit 1.1.0 itself, where a venv with it exists (skipped otherwise).

aihwkit runs as a subprocess (benchmarks/aihwkit/transfer_sequence_aihwkit.py; `AIMC_AIHWKIT_PYTHON` names
its interpreter, default ~/aihwkit-venv/bin/python). A rank-1 sequence (24 single samples) and a mini-batch
sequence (6 batches of 4) on a 3 x 4 tile of a noiseless constant-step device, aihwkit's build_config
settings (auto-scaled fast step, fast update BL 5, a column read after every sample), a regular chopper
and perfect reads, or aihwkit's random chopper and noisy reads, and the options step, transfer_every 2
and experimental_correct_accumulation: both simulators draw stochastic pulse
trains, so the mean and the spread of the fast array A and of the weight C over repetitions must agree
within their sampling error.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from aihwkit_helpers import PYTHON
from torch import nn

from aimc import trainers as T
from aimc.devices import ConstantStep, PeripheryConfig, UpdateConfig

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "aihwkit" / "transfer_sequence_aihwkit.py"
pytestmark = pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")

DW = 2.0**-9
DEVICE = dict(
    dw_min=DW,
    dw_min_dtod=0.0,
    dw_min_std=0.0,
    up_down=0.0,
    up_down_dtod=0.0,
    w_max=8.0,
    w_min=-8.0,
    w_max_dtod=0.0,
    w_min_dtod=0.0,
)
REPS = 200


def _batches(kind):
    rng = np.random.default_rng(7)
    m, n = (1, 24) if kind == "rank1" else (4, 6)
    return [(rng.uniform(-1, 1, (m, 4)).round(3), rng.uniform(-1, 1, (m, 3)).round(3)) for _ in range(n)]


def _ours(algorithm, batches, lr, compound, perfect_reads=True):
    cfg_cls = T.CTTv2Config if algorithm == "c-ttv2" else T.AGADConfig
    forward = PeripheryConfig.perfect() if perfect_reads else PeripheryConfig()
    tile = T.TileConfig(
        device=ConstantStep(**DEVICE),
        forward=forward,
        backward=PeripheryConfig.perfect(),
        update=UpdateConfig(desired_bl=5),
    )
    a_end, c_end = [], []
    for rep in range(REPS):
        lin = nn.Linear(4, 3, bias=False)
        model = T.convert(nn.Sequential(lin), tile, seed=rep)
        model[0].set_weights(torch.zeros(3, 4))
        opt = T.build_optimizer(model, cfg_cls(lr=lr, **compound))
        for x, d in batches:
            opt.zero_grad()
            (model(torch.tensor(x, dtype=torch.float32)) * torch.tensor(d, dtype=torch.float32)).sum().backward()
            opt.step()
        a_end.append(model[0].tiles[0].arrays[1].w.astype(float))
        c_end.append(model[0].tiles[0].arrays[0].w.astype(float))
    return {
        "A_mean": np.mean(a_end, 0),
        "A_std": np.std(a_end, 0),
        "C_mean": np.mean(c_end, 0),
        "C_std": np.std(c_end, 0),
    }


@pytest.mark.parametrize(
    "algorithm, kind, compound, perfect_reads",
    [
        ("c-ttv2", "rank1", {"in_chop_prob": 0.5, "in_chop_random": False}, True),
        ("c-ttv2", "batch", {"in_chop_prob": 0.5, "in_chop_random": False}, True),
        ("agad", "rank1", {"in_chop_prob": 0.5, "in_chop_random": False}, True),
        ("agad", "batch", {"in_chop_prob": 0.5, "in_chop_random": False}, True),
        # aihwkit's defaults: random chopper, column reads with output noise 0.06 and a 9-bit ADC
        ("c-ttv2", "rank1", {"in_chop_prob": 0.1, "in_chop_random": True}, False),
        # a write lr of step dw_C = dw_C / 2 (each pulse with probability 1/2); a read every second sample (aihwkit's
        # CPU simulator reads each column twice per read event where transfer_every < 0, see docs/trainers.md)
        ("c-ttv2", "rank1", {"in_chop_prob": 0.5, "in_chop_random": False, "step": 0.5}, True),
        ("c-ttv2", "rank1", {"in_chop_prob": 0.5, "in_chop_random": False, "transfer_every": 2}, True),
        (
            "agad",
            "batch",
            {"in_chop_prob": 0.5, "in_chop_random": False, "experimental_correct_accumulation": True},
            True,
        ),
        ("agad", "rank1", {"in_chop_prob": 0.5, "in_chop_random": False, "step": 0.5}, True),
    ],
)
def test_transfer_sequence_matches_aihwkit(algorithm, kind, compound, perfect_reads, tmp_path):
    batches = _batches(kind)
    lr = 0.5
    spec = {
        "algorithm": algorithm,
        "device": DEVICE,
        "compound": compound,
        "update_bl": 5,
        "lr": lr,
        "reps": REPS,
        "perfect_reads": perfect_reads,
        "batches": [[x.tolist(), d.tolist()] for x, d in batches],
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = subprocess.run([str(PYTHON), str(SCRIPT), str(path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    ref = {k: np.asarray(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    ours = _ours(algorithm, batches, lr, compound, perfect_reads)
    for arr in ("A", "C"):
        m1, m2, s1, s2 = ours[arr + "_mean"], ref[arr + "_mean"], ours[arr + "_std"], ref[arr + "_std"]
        se = np.sqrt((s1**2 + s2**2) / REPS)
        assert np.all(np.abs(m1 - m2) <= 4 * se + 0.05 * DW), (arr, m1 / DW, m2 / DW)
        assert np.all(np.abs(s1 - s2) <= 0.25 * np.maximum(s1, s2) + 0.1 * DW), (arr, s1 / DW, s2 / DW)
    assert ref["C_std"].max() > 0.5 * DW  # the sequence does write into the weight
