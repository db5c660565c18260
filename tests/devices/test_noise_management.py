"""Noise management abs_max_np_sum and average_abs_max: closed-form scales, the running average of a tile,
and reads against aihwkit 1.1.0's binary (ABS_MAX_NP_SUM, AVERAGE_ABS_MAX)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from aihwkit_helpers import PYTHON as AIHWKIT
from pydantic import ValidationError

from aimc.common.validation import format_validation_error
from aimc.devices import AnalogTile, PeripheryConfig, analog_mvm, parse_device
from aimc.devices.noise_management import fresh_average, nm_scales
from aimc.devices.rng import Stream

F32 = np.float32
CLEAN = dict(out_noise=0.0, bound_management=False)  # R1's 7-bit DAC, 9-bit ADC, output bound 12


def _vectors() -> np.ndarray:
    """Rows: one entry, many positives, mostly negatives, a few small mixed, zeros (64 inputs each)."""
    x = np.zeros((5, 64), np.float32)
    x[0, 3] = -2.0
    x[1] = np.random.default_rng(1).uniform(0.05, 1.0, 64)  # no entry on a DAC level's edge at its scale
    x[2, :38], x[2, 38:] = -0.7, 0.45
    x[3, :4] = (0.5, -0.3, 0.15, 0.2)
    return x


def _np_sum_closed_form(x: np.ndarray, wmax: float, out_bound: float, dac_limit: float, thres: float) -> list:
    """max(a, min(S wmax / out_bound, a dac_limit)), a = max |x| (at most thres > 0), S = max(sum x+, -sum x-)."""
    out = []
    for row in x.astype(np.float64):
        a = np.abs(row).max()
        a = min(a, thres) if thres > 0 else a
        s = max(row[row > 0].sum(), -row[row < 0].sum()) * wmax / out_bound
        out.append(max(a, s if np.isinf(dac_limit) else min(s, a * dac_limit)))
    return out


@pytest.mark.parametrize(
    "kw, dac_limit",
    [
        ({}, 0.25 * 63),  # max_bm_res / the 7-bit DAC's step 2 / 126
        ({"nm_assumed_wmax": 0.3, "out_bound": 4.0}, 0.25 * 63),
        ({"nm_thres": 0.5}, 0.25 * 63),
        ({"inp_bits": None}, np.inf),  # no DAC: no limit
        ({"inp_bits": 5, "max_bm_res": 0.5}, 0.5 * 15),
    ],
)
def test_np_sum_scale_is_its_closed_form(kw, dac_limit):
    """abs_max_np_sum's scale: e.g. row 2 (38 entries -0.7, 26 of 0.45: S = 26.6) with wmax 0.6 and out_bound
    12: max(0.7, min(1.33, 0.7 x 15.75)) = 1.33; a single entry keeps its max |x|; a zero row gets 0."""
    cfg = PeripheryConfig(noise_management="abs_max_np_sum", **kw)
    x = _vectors()
    got = nm_scales(x, cfg.nm_settings, fresh_average())
    want = _np_sum_closed_form(x, cfg.nm_assumed_wmax, cfg.out_bound, dac_limit, cfg.nm_thres)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    if not kw:
        assert got[2] == pytest.approx(1.33, rel=1e-6) and got[0] == 2.0 and got[4] == 0.0


def test_np_sum_read_is_the_dac_at_its_scale():
    """The read under abs_max_np_sum (ADC off): x / s through the 7-bit DAC, times W, times s."""
    w = np.random.default_rng(0).uniform(-0.6, 0.6, (8, 64)).astype(np.float32)
    x = _vectors()
    cfg = PeripheryConfig(noise_management="abs_max_np_sum", out_bits=None, **CLEAN)
    s = np.array(_np_sum_closed_form(x, 0.6, 12.0, 0.25 * 63, 0.0))[:, None]
    step = 2 / 126
    xq = np.rint(np.clip(x / np.where(s > 0, s, 1), -1, 1) / step) * step
    np.testing.assert_allclose(analog_mvm(w, x, cfg, Stream(0)), xq @ w.T.astype(np.float64) * s, rtol=1e-5, atol=1e-6)


def _running_average(batches: list[np.ndarray], decay: float) -> tuple[list[np.ndarray], float]:
    """aihwkit 1.1.0's CPU running average in float32: per vector in order, first value its max |x|."""
    a, scales, keep = None, [], F32(1) - F32(decay)
    for x in batches:
        out = []
        for m in np.abs(x).max(1).astype(np.float32):
            a = m if a is None else a * keep + F32(decay) * m
            out.append(a)
        scales.append(np.array(out, np.float32))
    return scales, float(a)


def _tile(fwd: PeripheryConfig, bwd: PeripheryConfig, w: np.ndarray) -> AnalogTile:
    dev = parse_device(dict(kind="ideal", tau=100.0, dw_min=1e-4))
    tile = AnalogTile(*w.shape, dev, forward=fwd, backward=bwd)
    tile.set_weight(w)
    return tile


def _scale_probe(decay: float) -> tuple[PeripheryConfig, np.ndarray]:
    """A read whose output is 1e-4 times the scale: W = e_0, every x_0 > 1e-4 scale, output bound 1e-4."""
    cfg = PeripheryConfig(
        noise_management="average_abs_max", nm_decay=decay, inp_bits=None, out_bits=None, out_bound=1e-4, **CLEAN
    )
    return cfg, np.eye(4, dtype=np.float32)


def test_running_average_over_three_batches():
    """nm_decay 0.3 over three batches of three vectors (max |x| 5, 3, 8; 1, 2, 9; 4, 4, 0.5): the scales are
    5, 5 0.7 + 0.3 3 = 4.4, 4.4 0.7 + 0.3 8 = 5.48, ... one update per vector, in batch order; the tile keeps
    the last value and its state_dict carries it."""
    cfg, w = _scale_probe(0.3)
    batches = [
        np.array([[5, 1, -2, 0.5], [3, -1, -3, 0], [8, 1, 1, 1]], np.float32),
        np.array([[1, 0.5, 0, 0], [2, -2, 0, 0], [-9, 1, 1, 1]], np.float32),
        np.array([[4, 0, 0, 0], [4, -4, 0, 0], [0.5, 0, 0, 0.25]], np.float32),
    ]
    want, last = _running_average(batches, 0.3)
    np.testing.assert_allclose(want[0], [5.0, 4.4, 5.48], rtol=1e-6)
    tile = _tile(cfg, cfg, w)
    for x, s in zip(batches, want):
        y = tile.forward(x)[:, 0]
        np.testing.assert_allclose(y, 1e-4 * s * np.sign(x[:, 0]), rtol=1e-6)
    assert tile.nm_average[0] == F32(last)
    assert tile.state_dict()["nm_average"] == float(F32(last))


def test_forward_and_backward_reads_share_the_average():
    """aihwkit 1.1.0's CPU tile keeps one average for both directions (measured: a backward read after
    forward reads continues their average); column reads leave it alone and see scale 1."""
    cfg, w = _scale_probe(0.5)
    tile = _tile(cfg, cfg, w)
    tile.forward(np.array([[4, 0, 0, 0]], np.float32))
    z = tile.backward(np.array([[2, 1, 0, 0]], np.float32))
    assert z[0, 0] == pytest.approx(1e-4 * 3.0, rel=1e-6) and tile.nm_average[0] == 3.0
    cols = tile.read_columns(0, np.arange(4))
    np.testing.assert_allclose(np.diag(cols), 1e-4, rtol=1e-6)  # scale 1, clipped at the bound
    assert tile.nm_average[0] == 3.0


def test_state_dict_round_trip_and_old_checkpoints():
    """The average is saved and loaded; a checkpoint without it loads as an average before its first vector."""
    cfg, w = _scale_probe(0.5)
    tile = _tile(cfg, cfg, w)
    tile.forward(np.array([[4, 0, 0, 0], [2, 0, 0, 0]], np.float32))
    state = tile.state_dict()
    other = _tile(cfg, cfg, w)
    other.load_state_dict(state)
    assert other.nm_average[0] == 3.0
    x = np.array([[6, 0, 0, 0]], np.float32)
    assert np.array_equal(other.forward(x), tile.forward(x))  # 4.5 both
    del state["nm_average"]
    other.load_state_dict(state)
    assert other.nm_average[0] == -1.0
    assert other.forward(x)[0, 0] == pytest.approx(6e-4, rel=1e-6)  # first value: its own max |x|


def test_reads_without_an_average_start_a_fresh_one():
    """analog_mvm without nm_average: a running average of this read alone (first value row 0's max |x|)."""
    cfg, w = _scale_probe(0.5)
    x = np.array([[4, 0, 0, 0], [2, 0, 0, 0]], np.float32)
    np.testing.assert_allclose(analog_mvm(w, x, cfg, Stream(0))[:, 0], [4e-4, 3e-4], rtol=1e-6)
    np.testing.assert_allclose(analog_mvm(w, x, cfg, Stream(0))[:, 0], [4e-4, 3e-4], rtol=1e-6)


@pytest.mark.parametrize(
    "kw, scale",
    [
        (dict(noise_management="abs_max_np_sum", nm_assumed_wmax=30.0), 2.5),  # max(1, min(30 / 12, 15.75))
        (dict(noise_management="abs_max_np_sum", nm_assumed_wmax=30.0, nm_thres=0.1), 1.575),  # min(2.5, 0.1 x 15.75)
        (dict(noise_management="average_abs_max", nm_decay=0.3), 1.0),
    ],
)
def test_one_hot_column_read_is_the_read_of_a_unit_vector(kw, scale):
    """read_one_hot (the column reads inside kernels) equals analog_mvm of the column with input [[1]], bit for
    bit, saturating re-reads included, at the scale PeripheryConfig.one_hot_scale."""
    from aimc.devices.column_read import one_hot_settings
    from aimc.devices.periphery import read_one_hot

    col = np.linspace(-30, 30, 16, dtype=np.float32)
    cfg = PeripheryConfig(**kw)
    want = analog_mvm(col[:, None], np.ones((1, 1), np.float32), cfg, Stream(3))[0]
    out = np.empty(16, np.float32)
    read_one_hot(col, one_hot_settings(cfg), 3, 0, out)
    assert np.array_equal(out, want)
    assert cfg.one_hot_scale == pytest.approx(scale, rel=1e-6)


@pytest.mark.parametrize(
    "field, value", [("nm_decay", 1.5), ("nm_decay", -0.1), ("nm_assumed_wmax", 0.0), ("noise_management", "avg")]
)
def test_bad_values_name_their_field(field, value):
    with pytest.raises(ValidationError) as err:
        PeripheryConfig(**{field: value})
    lines = format_validation_error(err.value, "forward").splitlines()  # noise_management: its bool and str forms
    assert len(lines) == (2 if field == "noise_management" else 1)
    assert all(line.startswith(f"forward.{field}") for line in lines)


# -- aihwkit 1.1.0's binary ---------------------------------------------------------------------------------

AIHWKIT_SCRIPT = r"""
import json, sys
from dataclasses import dataclass
import torch
from aihwkit.simulator.configs import SingleRPUConfig
from aihwkit.simulator.configs.devices import ConstantStepDevice
from aihwkit.simulator.parameters import IOParameters
from aihwkit.simulator.parameters.enums import BoundManagementType, NoiseManagementType
from aihwkit.simulator.rpu_base import devices
from aihwkit.simulator.tiles import AnalogTile

BINARY = devices.AnalogTileInputOutputParameter()

@dataclass
class IO(IOParameters):  # the binding's fields that IOParameters 1.1.0 leaves out, at the binary's defaults
    nm_assumed_wmax: float = BINARY.nm_assumed_wmax
    nm_decay: float = BINARY.nm_decay

def io(spec):
    p = IO(out_noise=0.0)
    for k, v in spec.items():
        if k == "noise_management":
            v = NoiseManagementType(v)
        elif k == "bound_management":
            v = BoundManagementType(v)
        setattr(p, k, v)
    return p

out = []
for case in json.loads(sys.stdin.read()):
    cfg = SingleRPUConfig(
        device=ConstantStepDevice(w_max=1e4, w_min=-1e4, w_max_dtod=0.0, w_min_dtod=0.0),
        forward=io(case["forward"]), backward=io(case["backward"]))
    w = torch.tensor(case["w"])
    tile = AnalogTile(w.shape[0], w.shape[1], cfg, bias=False)
    tile.set_weights(w)
    reads = []
    for kind, v in case["reads"]:
        v = torch.tensor(v)
        reads.append((tile.joint_forward(v) if kind == "f" else tile.backward(v)).tolist())
    out.append({"reads": reads, "aux": tile.tile.dump_extra()["rpu.fb_pass.aux_nm_value"][0]})
print(json.dumps(out))
"""

IO_NAMES = {  # our field: (aihwkit's field, value map)
    "noise_management": (
        "noise_management",
        {True: "AbsMax", "abs_max_np_sum": "AbsMaxNPSum", "average_abs_max": "AverageAbsMax"},
    ),
    "bound_management": ("bound_management", {True: "Iterative", False: "None"}),
    "inp_bits": ("inp_res", lambda b: -1.0 if b is None else 1 / (2**b - 2)),
    "out_bits": ("out_res", lambda b: -1.0 if b is None else 1 / (2**b - 2)),
}


def _aihwkit_io(cfg: PeripheryConfig) -> dict:
    """aihwkit's IOParameters of our periphery (the fields these cases set; nm_assumed_wmax and nm_decay only
    where a case sets them: the others compare our defaults with the binary's)."""
    out = {}
    for k in ("noise_management", "bound_management", "inp_bits", "out_bits", "out_bound", "nm_thres", "max_bm_res"):
        name, conv = IO_NAMES.get(k, (k, None))
        v = getattr(cfg, k)
        out[name] = conv(v) if callable(conv) else conv[v] if conv else v
    out.update({k: getattr(cfg, k) for k in ("nm_assumed_wmax", "nm_decay") if k in cfg.model_fields_set})
    return out


def _cases() -> dict[str, tuple[PeripheryConfig, PeripheryConfig, np.ndarray, list]]:
    """name: (forward, backward, W (out, in), reads [("f" | "b", batch)]) with R1's converters, no output noise."""
    rng = np.random.default_rng(4)
    w = rng.uniform(-0.6, 0.6, (8, 64)).astype(np.float32)
    x = np.concatenate([_vectors()[:4], rng.uniform(-1, 1, (4, 64)), rng.uniform(0, 2, (4, 64))]).astype(np.float32)
    d = rng.uniform(-1, 1, (6, 8)).astype(np.float32)
    d[0] = 0.4
    nps = dict(noise_management="abs_max_np_sum", out_noise=0.0)
    avg = dict(noise_management="average_abs_max", out_noise=0.0)
    back = dict(bound_management=False)
    batches = [("f", x[:5] * 3), ("f", x[5:]), ("b", d), ("f", x[::-1] * 0.5)]
    return {
        "np_sum": (PeripheryConfig(**nps, bound_management=False), PeripheryConfig(**nps, **back), w, [("f", x)]),
        "np_sum_bm": (PeripheryConfig(**nps, out_bound=3.0), PeripheryConfig(**nps, **back), w * 3, [("f", x)]),
        "np_sum_wmax_thres": (
            PeripheryConfig(**nps, nm_assumed_wmax=0.25, nm_thres=0.75, bound_management=False),
            PeripheryConfig(**nps, **back),
            w,
            [("f", x), ("b", d)],
        ),
        "np_sum_no_dac": (
            PeripheryConfig(**nps, inp_bits=None, bound_management=False),
            PeripheryConfig(**nps, **back),
            w,
            [("f", x)],
        ),
        "average": (PeripheryConfig(**avg, nm_decay=0.3), PeripheryConfig(**avg, nm_decay=0.3, **back), w, batches),
        "average_default_decay": (
            PeripheryConfig(**avg),
            PeripheryConfig(noise_management=True, out_noise=0.0, **back),
            w,
            batches,
        ),
    }


@pytest.fixture(scope="module")
def aihwkit_reads() -> dict:
    cases = _cases()
    spec = [
        {
            "forward": _aihwkit_io(f),
            "backward": _aihwkit_io(b),
            "w": w.tolist(),
            "reads": [(k, v.tolist()) for k, v in reads],
        }
        for f, b, w, reads in cases.values()
    ]
    out = subprocess.run(
        [str(AIHWKIT), "-c", AIHWKIT_SCRIPT], input=json.dumps(spec), capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return dict(zip(cases, json.loads(out.stdout.strip().splitlines()[-1])))


@pytest.mark.skipif(not AIHWKIT.exists(), reason=f"no aihwkit interpreter at {AIHWKIT}")
@pytest.mark.parametrize("case", list(_cases()))
def test_reads_match_aihwkit(case, aihwkit_reads):
    """The same W and inputs read through our tile and aihwkit 1.1.0's AnalogTile (7-bit DAC, 9-bit ADC,
    output bound 12, no output noise), forward and backward in the same order: the outputs agree to float32
    rounding and the running average (aihwkit's aux_nm_value) is the same number."""
    fwd, bwd, w, reads = _cases()[case]
    tile = _tile(fwd, bwd, w)
    theirs = aihwkit_reads[case]
    for (kind, v), want in zip(reads, theirs["reads"]):
        got = tile.forward(v) if kind == "f" else tile.backward(v)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    if fwd.noise_management == "average_abs_max":
        assert tile.nm_average[0] == pytest.approx(theirs["aux"], rel=1e-6)
