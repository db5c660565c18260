"""Unit cells of several devices (devices.unit_cells, devices.unit_cell_array): W as the gamma-weighted sum,
each update policy's routing, set_weights, the cell's granularity, the presets, checkpoint/resume, and
aihwkit 1.1.0 itself where a venv with it exists (its VectorUnitCell and ReferenceUnitCell in a subprocess).

Dyadic steps (dw_min = 1/16, 3/16) and a learning rate of whole steps make every pulse train deterministic
(probability 1 per slot) and every weight exact in float32, so the closed forms hold to the bit.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from aihwkit_helpers import PYTHON
from conftest import NO_SPREAD
from state_helpers import same_state

from aimc.common.errors import ConfigError
from aimc.devices import (
    PRESETS,
    UNIT_CELL_PRESETS,
    AnalogTile,
    ConstantStep,
    ReferenceUnitCell,
    UpdateConfig,
    VectorUnitCell,
    get_preset,
    load_device,
    parse_device,
)

ONE = np.ones((1, 1), np.float32)
BL = UpdateConfig(desired_bl=31)


def _step(dw: float) -> ConstantStep:
    return ConstantStep(dw_min=dw, w_max=1.0, w_min=-1.0, **NO_SPREAD)


def _tile(cell, out: int = 1, inp: int = 1, seed: int = 0) -> AnalogTile:
    return AnalogTile(out, inp, cell, update=BL, seed=seed)


def _trace(cell, signs, lr: float = 0.25, batch: int = 1, w0: float = 0.0) -> np.ndarray:
    """Device weights after each mini-batch of `batch` equal samples x = 1, d = sign (1 x 1 tile)."""
    tile = _tile(cell)
    tile.set_weight(np.full((1, 1), w0, np.float32))
    out = []
    for s in signs:
        tile.update(np.ones((batch, 1), np.float32), np.full((batch, 1), s, np.float32), lr)
        out.append([float(a.w[0, 0]) for a in tile.arrays[0].parts])
    return np.array(out)


TWO = [_step(1 / 16), _step(3 / 16)]  # mean granularity 1/8: lr 1/4 is two pulses into each device it updates


def test_all_policy_moves_every_device_and_reads_the_mean():
    """ALL: each update is 2 pulses into both devices (granularity = mean dw_min = 1/8); W = (w_0 + w_1) / 2."""
    cell = VectorUnitCell(devices=TWO)
    tile = _tile(cell)
    assert tile.granularity(0) == 0.125
    for k in range(1, 5):
        tile.update(ONE, -ONE, 0.25)
        w0, w1 = k * 2 / 16, min(k * 6 / 16, 1.0)
        assert [a.w[0, 0] for a in tile.arrays[0].parts] == [w0, w1]
        assert tile.forward_weight()[0, 0] == (w0 + w1) / 2


def test_all_policy_shares_trains_but_not_write_noise():
    """ALL on two equal devices with write noise: the same pulses reach both (equal hidden weights), their
    apparent weights are redrawn independently."""
    noisy = ConstantStep(dw_min=1 / 16, w_max=1.0, w_min=-1.0, write_noise_std=2.0, **NO_SPREAD)
    tile = AnalogTile(4, 3, VectorUnitCell(devices=[noisy, noisy]), update=BL)
    tile.update(np.ones((2, 3), np.float32), -np.ones((2, 4), np.float32), 0.125)
    a, b = tile.arrays[0].parts
    np.testing.assert_array_equal(a.hidden, b.hidden)
    assert np.all(a.hidden > 0) and not np.any(a.w == b.w)


def test_gamma_vec_weights_the_devices():
    """W = sum_k gamma_k w_k, and set_weights writes W into each device (so W reads back as 2.3 W here)."""
    cell = VectorUnitCell(devices=TWO, gamma_vec=[0.3, 2.0])
    tile = _tile(cell)
    tile.set_weight(np.full((1, 1), 0.25, np.float32))
    assert [a.w[0, 0] for a in tile.arrays[0].parts] == [0.25, 0.25]
    assert tile.forward_weight()[0, 0] == pytest.approx(2.3 * 0.25)
    assert cell.bounds == pytest.approx((-2.3, 2.3))


def test_single_fixed_updates_and_sets_only_its_device():
    """SINGLE_FIXED (first_update_idx 1): set_weights writes W into device 1 and 0 into device 0, updates
    move device 1 only (2 pulses of 3/16 each)."""
    cell = VectorUnitCell(devices=TWO, update_policy="SINGLE_FIXED", first_update_idx=1)
    trace = _trace(cell, [-1, -1, 1], w0=0.25)
    np.testing.assert_array_equal(trace, [[0, 0.625], [0, 1.0], [0, 0.625]])


def test_single_sequential_steps_one_device_per_sample():
    """SINGLE_SEQUENTIAL, 3 devices, first_update_idx 0, mini-batches of 2: sample t goes to device
    (t + 1) mod 3, so mini-batch 1 moves devices 1, 2, mini-batch 2 devices 0, 1, and so on."""
    cell = VectorUnitCell(devices=[*TWO, _step(1 / 8)], update_policy="SINGLE_SEQUENTIAL")
    trace = _trace(cell, [-1, -1, -1], batch=2)  # granularity 18/144 = 1/8: 2 pulses per sample
    np.testing.assert_array_equal(trace, [[0, 0.375, 0.25], [0.125, 0.75, 0.25], [0.25, 0.75, 0.5]])


def test_single_random_picks_one_device_per_sample_uniformly():
    """SINGLE_RANDOM: a single-sample update moves exactly one device by 2 pulses; over 600 such updates of
    3 devices the counts per device are uniform (within 4 binomial std)."""
    cell = VectorUnitCell(devices=[_step(1 / 8)] * 3, update_policy="SINGLE_RANDOM")
    tile = _tile(cell)
    moved = np.zeros(3)
    for _ in range(600):
        tile.set_weight(np.zeros((1, 1), np.float32))
        tile.update(ONE, -ONE, 0.25)
        after = np.array([a.w[0, 0] for a in tile.arrays[0].parts])
        assert sorted(after) == [0.0, 0.0, 0.25]
        moved += after > 0
    assert np.all(np.abs(moved - 200) < 4 * np.sqrt(600 * (1 / 3) * (2 / 3)))


def test_reference_cell_subtracts_a_fixed_device():
    """ReferenceUnitCell: W = w_0 - w_1, set_weights writes W into device 0 and 0 into device 1, updates
    move device 0 only; one device given is used twice."""
    cell = ReferenceUnitCell(devices=TWO)
    tile = _tile(cell)
    tile.set_weight(np.full((1, 1), 0.25, np.float32))
    tile.update(ONE, -ONE, 0.25)
    assert [a.w[0, 0] for a in tile.arrays[0].parts] == [0.375, 0.0]
    assert tile.forward_weight()[0, 0] == 0.375
    tile.arrays[0].set_device_weights(1, np.full((1, 1), 0.125, np.float32))
    tile.invalidate()
    assert tile.forward_weight()[0, 0] == 0.25
    assert len(ReferenceUnitCell(devices=[_step(1 / 16)]).cell_devices) == 2
    assert cell.bounds == (-2.0, 2.0)


def test_bad_cell_configs_are_refused_naming_the_field():
    dev = {"kind": "ConstantStep"}
    with pytest.raises(ConfigError, match="gamma_vec"):
        parse_device({"kind": "VectorUnitCell", "devices": [dev, dev], "gamma_vec": [1.0]})
    with pytest.raises(ConfigError, match="first_update_idx"):
        parse_device({"kind": "VectorUnitCell", "devices": [dev], "first_update_idx": 1})
    with pytest.raises(ConfigError, match="devices"):
        parse_device({"kind": "ReferenceUnitCell", "devices": [dev, dev, dev]})
    with pytest.raises(ConfigError, match="update_policy"):
        parse_device({"kind": "VectorUnitCell", "devices": [dev], "update_policy": "SOME"})
    with pytest.raises(ConfigError, match="devices"):
        parse_device({"kind": "VectorUnitCell", "devices": [{"kind": "linear"}]})


def test_checkpoint_resume_is_bit_exact():
    """A 4 x 3 tile of aihwkit_reram_sb_2 (noise, write noise, SINGLE_RANDOM): 3 updates, save, 3 more;
    a fresh tile loaded from the save and given the same 3 updates ends in the same state."""
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32))]
    data *= 6
    cell = get_preset("aihwkit_reram_sb_2")
    a, b = AnalogTile(4, 3, cell, seed=3), AnalogTile(4, 3, cell, seed=3)
    for x, d in data[:3]:
        a.update(x, d, 0.1)
    b.load_state_dict(a.state_dict())
    for x, d in data[3:]:
        a.update(x, d, 0.1)
        b.update(x, d, 0.1)
    assert same_state(a.state_dict(), b.state_dict())
    np.testing.assert_array_equal(a.forward_weight(), b.forward_weight())


def test_expected_update_moves_each_device_by_its_share():
    """Expected mode under ALL: each device takes the mean change lr d x / granularity pulses (2 here)."""
    tile = AnalogTile(1, 1, VectorUnitCell(devices=TWO), update=UpdateConfig(mode="expected"))
    tile.update(ONE, -ONE, 0.25)
    assert [a.w[0, 0] for a in tile.arrays[0].parts] == [0.125, 0.375]


@pytest.mark.parametrize("name", sorted(UNIT_CELL_PRESETS))
def test_unit_cell_presets_are_their_aihwkit_devices(name):
    """aihwkit_<device>_<n>: n copies of aihwkit_<device>, SINGLE_RANDOM, gamma 1/n; they resolve by name and
    round-trip through their dump."""
    base, n = name.rsplit("_", 1)
    cell = get_preset(name)
    assert cell.devices == [PRESETS[base].device] * int(n)
    assert (cell.update_policy, cell.gammas) == ("SINGLE_RANDOM", [1 / int(n)] * int(n))
    assert load_device(name) is cell and load_device(cell.model_dump()) == cell
    assert load_device({"preset": name, "first_update_idx": 1}).first_update_idx == 1
    tile = AnalogTile(3, 2, cell, seed=1)
    tile.set_weight(np.full((3, 2), 0.1, np.float32))
    assert tile.update(np.ones((2, 2), np.float32), np.ones((2, 3), np.float32), 0.01) > 0


# -- aihwkit 1.1.0 itself ---------------------------------------------------------------------------------

AIHWKIT = r"""
import json, sys
import numpy as np, torch
from aihwkit.simulator.configs import UnitCellRPUConfig
from aihwkit.simulator.configs import devices
from aihwkit.simulator.parameters.enums import VectorUnitCellUpdatePolicy
from aihwkit.simulator.tiles import AnalogTile
spec = json.loads(sys.argv[1])
torch.set_num_threads(1)
torch.manual_seed(0)
devs = [devices.ConstantStepDevice(**f) for f in spec["devices"]]
extra = dict(gamma_vec=spec["gamma_vec"]) if spec["gamma_vec"] else {}
cell = getattr(devices, spec["kind"])(unit_cell_devices=devs,
                                      update_policy=VectorUnitCellUpdatePolicy[spec["policy"]],
                                      first_update_idx=spec["first"], **extra)
cfg = UnitCellRPUConfig(device=cell)
cfg.update.desired_bl = 31
tile = AnalogTile(1, 1, cfg, bias=False)
tile.set_learning_rate(spec["lr"])
out = []
for rep in range(spec["reps"]):
    tile.set_weights(torch.full((1, 1), spec["w0"]))
    for s in spec["signs"]:
        tile.update(torch.ones(spec["batch"], 1), torch.full((spec["batch"], 1), float(s)))
        h = tile.get_hidden_parameters()
        if spec["reps"] == 1:
            out.append([float(h[f"hidden_weights_{k}"].flatten()[0]) for k in range(len(devs))])
    if spec["reps"] > 1:
        out.append(float(tile.get_weights()[0].flatten()[0]))
print(json.dumps(out))
"""

needs_aihwkit = pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")
INERT_STEP = dict(construction_seed=0, w_max=1.0, w_min=-1.0, **NO_SPREAD)


def _aihwkit(cell, signs, lr=0.25, batch=1, w0=0.0, reps=1):
    spec = dict(
        kind="ReferenceUnitCell" if cell.kind == "ReferenceUnitCell" else "VectorUnitCell",
        devices=[dict(INERT_STEP, dw_min=dev.dw_min) for dev in cell.devices],
        policy=cell.update_policy,
        first=cell.first_update_idx,
        gamma_vec=list(cell.gamma_vec) if cell.kind == "VectorUnitCell" else [],
        signs=list(signs),
        lr=lr,
        batch=batch,
        w0=w0,
        reps=reps,
    )
    out = subprocess.run([str(PYTHON), "-c", AIHWKIT, json.dumps(spec)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return np.array(json.loads(out.stdout.strip().splitlines()[-1]))


THREE = [*TWO, _step(1 / 8)]
TRACE_CASES = {  # cell, mini-batch size
    "all": (VectorUnitCell(devices=TWO), 1),
    "all_gamma": (VectorUnitCell(devices=THREE, gamma_vec=[0.3, 2.0, -1.0]), 2),
    "fixed": (VectorUnitCell(devices=THREE, update_policy="SINGLE_FIXED", first_update_idx=2), 1),
    "sequential": (VectorUnitCell(devices=THREE, update_policy="SINGLE_SEQUENTIAL", first_update_idx=1), 2),
    "reference": (ReferenceUnitCell(devices=TWO), 1),
}


@needs_aihwkit
@pytest.mark.parametrize("case", TRACE_CASES)
def test_noiseless_trace_matches_aihwkit(case):
    """From W0 = 0.25, 6 mini-batches down then 5 up (deterministic trains): every device's weight after
    every mini-batch equals aihwkit 1.1.0's."""
    cell, batch = TRACE_CASES[case]
    signs = [-1] * 6 + [1] * 5
    ours = _trace(cell, signs, batch=batch, w0=0.25)
    np.testing.assert_allclose(ours, _aihwkit(cell, signs, batch=batch, w0=0.25), rtol=0, atol=1e-6)


@needs_aihwkit
def test_single_random_mean_weight_matches_aihwkit():
    """SINGLE_RANDOM, devices of dw_min 1/16 and 3/16, 8 single-sample updates down from 0: m of them go to
    device 0 with m ~ Binomial(8, 1/2), W = (m / 8 + min(3 (8 - m) / 8, 1)) / 2. Our mean W over 300 repeats,
    aihwkit's and the closed form agree within 4 standard errors."""
    from math import comb

    cell = VectorUnitCell(devices=TWO, update_policy="SINGLE_RANDOM")
    exact = sum(comb(8, m) / 256 * (m / 8 + min(3 * (8 - m) / 8, 1.0)) / 2 for m in range(9))
    var = sum(comb(8, m) / 256 * ((m / 8 + min(3 * (8 - m) / 8, 1.0)) / 2 - exact) ** 2 for m in range(9))
    tile = _tile(cell, seed=5)
    ours = []
    for _ in range(300):
        tile.set_weight(np.zeros((1, 1), np.float32))
        for _ in range(8):
            tile.update(ONE, -ONE, 0.25)
        ours.append(float(tile.forward_weight()[0, 0]))
    theirs = _aihwkit(cell, [-1] * 8, reps=300)
    se = np.sqrt(var / 300)
    assert abs(np.mean(ours) - exact) < 4 * se and abs(np.mean(theirs) - exact) < 4 * se


PRESET_FIELDS = r"""
import json
from aihwkit.simulator import presets
out = {}
for name in ("ReRamES", "ReRamSB", "Capacitor", "EcRam", "EcRamMO", "Idealized"):
    for n in (2, 4):
        cell = getattr(presets, f"{name}{n}Preset")().device
        out[f"{name}{n}Preset"] = [type(cell).__name__, cell.update_policy.name, list(cell.gamma_vec),
                                   [type(d).__name__ for d in cell.unit_cell_devices]]
print(json.dumps(out))
"""


@needs_aihwkit
def test_unit_cell_presets_have_aihwkit_s_structure():
    """Each aihwkit <Device><n>Preset is a VectorUnitCell of n <Device>PresetDevice, SINGLE_RANDOM, default
    gamma; our preset of it holds n copies of the device preset pinned to that aihwkit device elsewhere."""
    out = subprocess.run([str(PYTHON), "-c", PRESET_FIELDS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ak = json.loads(out.stdout.strip().splitlines()[-1])
    for name, p in UNIT_CELL_PRESETS.items():
        cls = p.source.split()[2]
        kind, policy, gamma, devs = ak[cls]
        assert (kind, policy, gamma) == ("VectorUnitCell", p.device.update_policy, [])
        assert len(devs) == len(p.device.devices)
        base = PRESETS[name.rsplit("_", 1)[0]]
        assert devs[0] in base.source
