"""The one-sided unit cell (devices.one_sided): routing of pulses, set_weights, the refresh criterion and
rewrite, the refresh schedule, checkpoint/resume, training with the PCM preset, and aihwkit 1.1.0 itself
where a venv with it exists (its OneSidedUnitCell run in a subprocess, as tests/devices/test_aihwkit.py).

Dyadic steps (dw_min = 1/16) keep every weight exact in float32, so the closed forms hold to the bit.
"""

from __future__ import annotations

import io
import json
import subprocess

import numpy as np
import pytest
import torch
from aihwkit_helpers import INERT, PYTHON
from conftest import NO_SPREAD
from state_helpers import same_state
from torch import nn

from aimc import trainers as T
from aimc.devices import AnalogTile, ConstantStep, ExpStep, PeripheryConfig, UpdateConfig, get_preset, parse_device
from aimc.devices.one_sided import OneSided

DW = 1.0 / 16
STEP = ConstantStep(dw_min=DW, w_max=1.0, w_min=0.0, reset=0.0, reset_std=0.0, **NO_SPREAD)
ONE_PULSE = UpdateConfig(desired_bl=1)  # lr |x| |d| >= dw_min: exactly one pulse per sample


def _cell(device=STEP, **kw) -> OneSided:
    return OneSided(device=device, refresh_forward=PeripheryConfig.perfect(), **kw)


def _tile(out: int, inp: int, cell: OneSided, seed: int = 0) -> AnalogTile:
    return AnalogTile(out, inp, cell, update=ONE_PULSE, seed=seed)


def test_set_weights_splits_into_positive_parts():
    w = np.array([[0.5, -0.25, 0.0], [-0.75, 0.125, 2.0]], np.float32)
    tile = _tile(2, 3, _cell())
    tile.set_weight(w)
    a = tile.arrays[0]
    assert np.array_equal(a.plus.w, [[0.5, 0, 0], [0, 0.125, 1.0]])  # 2.0 clipped to G+'s w_max 1
    assert np.array_equal(a.minus.w, [[0, 0.25, 0], [0.75, 0, 0]])
    assert np.array_equal(tile.forward_weight(), np.clip(w, -1, 1))


def test_idle_drifts_both_devices_by_the_power_law():
    """aihwkit's drift on each device of the cell: from a fresh clock, t = 100 s with t_0 = 1 s and nu = 0.1
    scales every conductance, so W = G+ - G-, by 100^-0.1 (closed form)."""
    from aimc.devices.drift import DriftParameter

    w = np.array([[0.5, -0.25, 0.0], [-0.75, 0.125, 1.0]], np.float32)
    tile = _tile(2, 3, _cell())
    tile.set_weight(w)
    tile.idle(100.0, drift=DriftParameter(nu=0.1))
    np.testing.assert_allclose(tile.forward_weight(), w * 100.0**-0.1, rtol=1e-6)
    a = tile.arrays[0]
    assert np.all(a.plus.w >= 0) and np.all(a.minus.w >= 0)


def test_update_routes_each_direction_to_its_device():
    """x = (1, -1, 1), d = (1): lr d x > 0 lowers W (one up pulse on G-), < 0 raises it (one on G+)."""
    tile = _tile(1, 3, _cell())
    a = tile.arrays[0]
    for _ in range(3):
        n = tile.update(np.array([[1.0, -1.0, 1.0]], np.float32), np.array([[1.0]], np.float32), DW)
        assert n == 3
    assert np.array_equal(a.plus.w, [[0, 3 * DW, 0]])
    assert np.array_equal(a.minus.w, [[3 * DW, 0, 3 * DW]])
    assert np.array_equal(tile.forward_weight(), [[-3 * DW, 3 * DW, -3 * DW]])


def test_down_going_update_only_potentiates_g_minus():
    tile = _tile(2, 2, _cell())
    tile.set_weight(np.full((2, 2), 0.5, np.float32))
    a = tile.arrays[0]
    for _ in range(4):  # W -= lr d x with d, x > 0: every pulse lowers W
        tile.update(np.ones((1, 2), np.float32), np.ones((1, 2), np.float32), DW)
    assert np.array_equal(a.plus.w, np.full((2, 2), 0.5))
    assert np.array_equal(a.minus.w, np.full((2, 2), 4 * DW))


def test_pulse_counts_route_by_sign():
    tile = _tile(1, 2, _cell())
    assert tile.pulse(np.array([[3, -2]])) == 5
    a = tile.arrays[0]
    assert np.array_equal(a.plus.w, [[3 * DW, 0]]) and np.array_equal(a.minus.w, [[0, 2 * DW]])


def test_refresh_criterion_reset_and_rewrite():
    """2x2 by hand (w_max 1, thresholds 0.75 / 0.25, reset to 0): (0,0) g+ .8125 > .75, g- .3125 > .25:
    refreshed, G+ = .5; (0,1) g- .25 is not above .25: kept; (1,0) g- .875 > .75, g+ .3125 > .25:
    refreshed, G- = .5625; (1,1) .5 / .5: kept."""
    tile = _tile(2, 2, _cell())
    a = tile.arrays[0]
    gp = np.array([[0.8125, 0.8125], [0.3125, 0.5]], np.float32)
    gm = np.array([[0.3125, 0.25], [0.875, 0.5]], np.float32)
    a.plus.set_weights(gp)
    a.minus.set_weights(gm)
    assert a.refresh() == 2
    assert np.array_equal(a.plus.w, [[0.5, 0.8125], [0, 0.5]])
    assert np.array_equal(a.minus.w, [[0, 0.25], [0.5625, 0.5]])
    assert np.array_equal(a.w, a.plus.w - a.minus.w)
    assert (a.refreshes, a.resets, a.reads) == (2, 4, 4)  # two reads per column (G+ and G-)
    assert a.pulses == 8 + 9 + 4  # rewrites of .5 and .5625 in steps of 1/16, and four resets


@pytest.mark.parametrize("units_in_mbatch, every, cycles", [(True, 2, [6, 12]), (False, 4, [4, 8, 12])])
def test_refresh_schedule(units_in_mbatch, every, cycles):
    """Cycles are samples; the refresh follows every `every` of them, or `every` mini-batches of 3."""
    tile = _tile(2, 2, _cell(refresh_every=every, units_in_mbatch=units_in_mbatch))
    a = tile.arrays[0]
    seen = []
    a.refresh = lambda: seen.append(a.cycles)
    for _ in range(4):
        tile.update(np.ones((3, 2), np.float32), np.ones((3, 2), np.float32), DW)
    assert seen == cycles
    tile.set_weight(np.zeros((2, 2), np.float32))
    assert a.cycles == 0


def test_copy_inverted_mirrors_g_plus_own_draw():
    """G+ swaps its own up and down steps and mirrors its own bounds; G- keeps its draw."""
    dev = ConstantStep(dw_min=DW, up_down=0.5, w_max=1.0, w_min=0.0, **NO_SPREAD)  # dw_down = dw_min / 2
    a = _tile(1, 1, _cell(dev, copy_inverted=True)).arrays[0]
    assert [float(b[0, 0]) for b in a.plus.bounds] == [-1.0, 0.0]
    assert [float(b[0, 0]) for b in a.minus.bounds] == [0.0, 1.0]
    assert a.plus.params.ep[0, 0, :2].tolist() == [DW / 2, DW] and a.minus.params.ep[0, 0, :2].tolist() == [DW, DW / 2]


def test_bad_cell_config_is_refused():
    with pytest.raises(Exception, match="write_noise_std"):
        parse_device({"kind": "OneSided", "device": {"kind": "ExpStep", "write_noise_std": 1.0}})
    with pytest.raises(Exception, match="refresh_every"):
        parse_device({"kind": "OneSided", "device": {"kind": "ExpStep"}, "refresh_every": -1})
    with pytest.raises(ValueError, match="symmetric point"):
        AnalogTile(2, 2, get_preset("aihwkit_pcm")).zero_shift(0)


def _pcm_model(device="aihwkit_pcm") -> nn.Module:
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(6, 5), nn.Sigmoid(), nn.Linear(5, 2))
    return T.convert(net, T.TileConfig(device=device, max_in=4), seed=2)


def _uniform_pcm() -> OneSided:
    """aihwkit_pcm without device-to-device spread (its cycle noise and noisy refresh reads kept): the same
    kernel build as the exact tests above (shared element parameters), one compilation less in a test run."""
    pcm = get_preset("aihwkit_pcm")
    spread = dict(dw_min_dtod=0.0, w_max_dtod=0.0, up_down_dtod=0.0, reset_dtod=0.0)
    return pcm.model_copy(update={"device": pcm.device.model_copy(update=spread)})


def _steps(model, opt, data) -> list[float]:
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).sum(dim=1).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def _data(n: int):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 8, 6, generator=g)
    return [(xb, xb[:, :2] - xb[:, 2:4]) for xb in x]


def test_checkpoint_resume_is_bit_exact():
    data = _data(6)
    model = _pcm_model(_uniform_pcm())
    opt = T.build_optimizer(model, T.AnalogSGDConfig(lr=0.5))  # large enough to refresh in 6 steps
    _steps(model, opt, data[:3])
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    _steps(model, opt, data[3:])
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    model2 = _pcm_model(_uniform_pcm())
    opt2 = T.build_optimizer(model2, T.AnalogSGDConfig(lr=0.5))
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    _steps(model2, opt2, data[3:])
    assert same_state(model.state_dict(), model2.state_dict())
    assert opt.costs() == opt2.costs()
    cells = [b.tile.arrays[0] for layer in T.analog_layers(model) for b in layer.blocks]
    assert sum(c.refreshes for c in cells) > 0  # the refresh ran (and resumed) too


@pytest.mark.slow
def test_analog_sgd_trains_with_the_pcm_preset():
    """A smoke test: the loss falls clearly in 200 steps (PCM's cycle noise, several dw_min per pulse, keeps
    it from falling much further at this rate)."""
    model = _pcm_model()
    opt = T.build_optimizer(model, T.AnalogSGDConfig(lr=0.1))
    losses = _steps(model, opt, _data(200))
    assert np.mean(losses[-20:]) < 0.75 * np.mean(losses[:20])
    costs = opt.costs()
    assert costs["pulses"] > 0 and costs["reads"] > 200 * 8 * 2


# -- aihwkit 1.1.0 itself ---------------------------------------------------------------------------------

AIHWKIT = r"""
import json, sys
import numpy as np, torch
from aihwkit.simulator.configs import UnitCellRPUConfig
from aihwkit.simulator.configs import devices
from aihwkit.simulator.parameters import IOParameters, UpdateParameters
from aihwkit.simulator.tiles import AnalogTile
spec = json.loads(sys.argv[1])
torch.set_num_threads(1)
torch.manual_seed(0)
dev = getattr(devices, spec["kind"] + "Device")(**spec["device"])
cell = devices.OneSidedUnitCell(unit_cell_devices=[dev], refresh_every=spec["every"],
                                units_in_mbatch=spec["units"], refresh_upper_thres=spec["upper"],
                                refresh_forward=IOParameters(is_perfect=True),
                                refresh_update=UpdateParameters(desired_bl=spec["refresh_bl"]))
cfg = UnitCellRPUConfig(device=cell)
cfg.update.desired_bl = spec["bl"]
x, d = np.array(spec["x"], np.float32), np.array(spec["d"], np.float32)
tile = AnalogTile(d.shape[-1], x.shape[-1], cfg, bias=False)
tile.set_learning_rate(spec["lr"])
out = []
for rep in range(spec["reps"]):
    tile.set_weights(torch.tensor(spec["w0"]))
    for xb, db in zip(x, d):
        tile.update(torch.tensor(xb), torch.tensor(db))
        if spec["trace"]:
            h = tile.get_hidden_parameters()
            out.append([h["hidden_weights_1"].flatten().tolist(), h["hidden_weights_0"].flatten().tolist()])
    if not spec["trace"]:
        out.append(tile.get_weights()[0].flatten().tolist())
print(json.dumps(out))
"""


def _aihwkit(
    kind: str,
    device: dict,
    x,
    d,
    lr: float,
    w0,
    bl: int,
    refresh_bl: int,
    every: int,
    units: bool,
    upper: float = 0.75,
    reps: int = 1,
    trace: bool = True,
):
    spec = dict(
        kind=kind,
        device=device,
        x=np.asarray(x).tolist(),
        d=np.asarray(d).tolist(),
        lr=lr,
        w0=np.asarray(w0).tolist(),
        bl=bl,
        refresh_bl=refresh_bl,
        every=every,
        units=units,
        upper=upper,
        reps=reps,
        trace=trace,
    )
    out = subprocess.run([str(PYTHON), "-c", AIHWKIT, json.dumps(spec)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return np.array(json.loads(out.stdout.strip().splitlines()[-1]))


needs_aihwkit = pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")
PCM_SHAPE = dict(
    dw_min=0.01,
    w_max=2.0,
    w_min=0.0,
    a=-1.0,
    b=0.0,
    gamma_up=2.5,
    gamma_down=2.5,
    A_up=-27.235,
    A_down=-2.235,
    reset=0.01,
    reset_std=0.0,
)
TRACE_CASES = {  # one pulse per sample; the rewrite saturates its trains (deterministic) or is dyadic;
    # refresh_upper_thres
    "ConstantStep": (STEP, 31, DW, 0.75),
    "ExpStep": (ExpStep(**PCM_SHAPE, **NO_SPREAD), 2, 0.05, 0.5),
}


@needs_aihwkit
@pytest.mark.parametrize("kind", TRACE_CASES)
def test_noiseless_trace_matches_aihwkit(kind):
    """A 1x1 cell driven 5 down, 14 up, 17 down, 4 up (one pulse each) refreshes twice per direction; G+
    and G- after every sample equal aihwkit 1.1.0's to float32 rounding."""
    device, refresh_bl, lr, upper = TRACE_CASES[kind]
    signs = [1] * 5 + [-1] * 14 + [1] * 17 + [-1] * 4
    d = np.array(signs, np.float32).reshape(-1, 1, 1)
    x = np.ones_like(d)
    cell = _cell(
        device,
        refresh_every=1,
        units_in_mbatch=False,
        refresh_upper_thres=upper,
        refresh_update=UpdateConfig(desired_bl=refresh_bl),
    )
    tile = _tile(1, 1, cell)
    a = tile.arrays[0]
    ours = []
    for xb, db in zip(x, d):
        tile.update(xb, db, lr)
        ours.append([a.plus.w.ravel().tolist(), a.minus.w.ravel().tolist()])
    fields = {k: v for k, v in device.model_dump(exclude_unset=True).items() if k != "kind"}
    theirs = _aihwkit(kind, fields, x, d, lr, [[0.0]], 1, refresh_bl, 1, False, upper)
    assert a.refreshes >= 2
    np.testing.assert_allclose(np.array(ours), theirs, rtol=0, atol=2e-6)


@needs_aihwkit
@pytest.mark.slow
def test_noisy_cell_means_and_spreads_match_aihwkit():
    """PCM's ExpStep with its cycle noise (dw_min_std, dw_min_std_add, dw_min_std_slope), 3x4 tile, 12
    mini-batches of 4 from W0, refresh after every mini-batch (upper threshold 0.5; about 17 refreshed
    elements per run): the mean and std over 400 repeats of each
    final weight agree with aihwkit 1.1.0's."""
    noise = dict(dw_min_std=0.6, dw_min_std_add=0.042, dw_min_std_slope=0.108)
    device = ExpStep(**PCM_SHAPE, **dict(NO_SPREAD, **noise))
    rng = np.random.default_rng(1)
    x = rng.uniform(0.2, 1.0, (12, 4, 4)).astype(np.float32)
    d = (rng.uniform(0.2, 1.0, (12, 4, 3)) * rng.choice([-1, 1], (12, 1, 3))).astype(np.float32)
    w0 = np.array([[0.3, -0.2, 0.1, 0.0], [-0.4, 0.5, 0.2, -0.1], [0.0, 0.3, -0.3, 0.4]], np.float32)
    reps, lr = 400, 0.05
    cell = OneSided(device=device, refresh_every=1, refresh_upper_thres=0.5, refresh_forward=PeripheryConfig.perfect())
    tile = AnalogTile(3, 4, cell, seed=7)
    ours = []
    for _ in range(reps):
        tile.set_weight(w0)
        for xb, db in zip(x, d):
            tile.update(xb, db, lr)
        ours.append(tile.forward_weight().ravel().copy())
    ours = np.array(ours)
    fields = {k: v for k, v in device.model_dump(exclude_unset=True).items() if k != "kind"}
    theirs = _aihwkit("ExpStep", fields, x, d, lr, w0, 31, 31, 1, True, 0.5, reps=reps, trace=False)
    assert tile.arrays[0].refreshes > 10 * reps
    se = np.sqrt((ours.var(0) + theirs.var(0)) / reps)
    assert np.all(np.abs(ours.mean(0) - theirs.mean(0)) < 4 * se + 1e-3)
    np.testing.assert_allclose(ours.std(0), theirs.std(0), rtol=0.2, atol=2e-3)


FIELDS = r"""
import dataclasses, json
from aihwkit.simulator.presets import PCMPresetUnitCell
cell = PCMPresetUnitCell()
dev = {k: v for k, v in dataclasses.asdict(cell.unit_cell_devices[0]).items() if not isinstance(v, dict)}
io, up = cell.refresh_forward, cell.refresh_update
print(json.dumps(dict(device=dev, n_devices=len(cell.unit_cell_devices), refresh_every=cell.refresh_every,
                      units_in_mbatch=cell.units_in_mbatch, refresh_upper_thres=cell.refresh_upper_thres,
                      refresh_lower_thres=cell.refresh_lower_thres, copy_inverted=cell.copy_inverted,
                      out_noise=io.out_noise, out_bound=io.out_bound, inp_res=io.inp_res, out_res=io.out_res,
                      desired_bl=up.desired_bl)))
"""


@needs_aihwkit
def test_pcm_preset_has_the_fields_of_aihwkit_s_pcm_unit_cell():
    """Every field of aihwkit's PCMPresetUnitCell and its PCMPresetDevice has our value, except fields
    without effect there (INERT)."""

    out = subprocess.run([str(PYTHON), "-c", FIELDS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ak = json.loads(out.stdout.strip().splitlines()[-1])
    cell = get_preset("aihwkit_pcm")
    ours = cell.device.model_dump()
    missing = {k: v for k, v in ak["device"].items() if k not in ours and not (k in INERT and INERT[k] == v)}
    assert missing == {}
    for k, v in ak["device"].items():
        if k in ours:
            assert ours[k] == pytest.approx(v, rel=1e-12), k
    assert ak["n_devices"] == 2
    for k in ("refresh_every", "units_in_mbatch", "refresh_upper_thres", "refresh_lower_thres", "copy_inverted"):
        assert getattr(cell, k) == ak[k], k
    io = cell.refresh_forward
    assert (io.out_noise, io.out_bound, cell.refresh_update.desired_bl) == (
        ak["out_noise"],
        ak["out_bound"],
        ak["desired_bl"],
    )
    assert 1 / (2**io.inp_bits - 2) == pytest.approx(ak["inp_res"]) and 1 / (2**io.out_bits - 2) == pytest.approx(
        ak["out_res"]
    )
