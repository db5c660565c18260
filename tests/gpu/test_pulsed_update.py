"""The GPU pulsed update (devices.gpu.pulsed_update) against its CPU twin, pulsed_update_kernel: the same weights
bit for bit and the same pulse count under the simulator, for every response family, both noise forms,
without noise, BL 1, longer trains and trains of several 32-slot chunks, update management on and off, a
negative lr and write noise; and its three kernels compile to PTX."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import FAMILY_CONFIGS, SPREAD_CONFIGS
from gpu_helpers import assert_twins, gpu_code, needs_kernels, needs_ptx, on_device
from numba import njit, typeof

from aimc.devices import ConductanceArray, UpdateConfig, parse_device
from aimc.devices.device_base import CONST, EXP_R1, EXP_STEP, LINEAR, POWER, SOFT_REF, TABLE
from aimc.devices.gpu import pulsed_update as gpu
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.normals import BLOCK, fill_normals, normal_at
from aimc.devices.presets import get_preset
from aimc.devices.pulse_trains import split_long_trains
from aimc.devices.pulsed_update import SERIAL_PULSES, pulsed_update_kernel

SEED_COUNTER = 5
WN_COUNTER = 6
SETTINGS = {
    "BL management": (0.5, UpdateConfig()),
    "negative lr, BL 9": (-0.2, UpdateConfig(update_bl_management=False, desired_bl=9)),
    "no management": (0.3, UpdateConfig(update_management=False, update_bl_management=False, desired_bl=4)),
    "BL 1": (0.5, UpdateConfig(update_bl_management=False, desired_bl=1)),
    "BL 100 (trains of several chunks)": (0.5, UpdateConfig(desired_bl=100)),
}


def _batch(rows: int, cols: int, batch: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """x (batch, cols) and d (batch, rows) float32 with a sample of zeros and one probability above 1."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.5, (batch, cols)).astype(np.float32)
    d = rng.normal(0, 0.5, (batch, rows)).astype(np.float32)
    x[1] = 0.0  # a sample without pulses
    x[0, 0] = 4.0  # a train that fires in every slot
    return x, d


def _compare(dev, lr: float, ucfg: UpdateConfig, rows: int = 6, cols: int = 5, batch: int = 3) -> int:
    """Run one update of lr on an array of `dev` on the CPU and on the GPU path; assert equal weights (and
    apparent weights), equal pulse counts; return the count."""
    arr = ConductanceArray(rows, cols, dev, seed=3)
    w, app, _, wn, params, granularity, seed, _ = arr.handle()
    scale = 30 * granularity / abs(lr)  # lr max|x| max|d| of about 30 granularities: most trains fire
    x, d = _batch(rows, cols, batch)
    d *= np.float32(scale)
    settings = update_settings(lr, granularity, ucfg)
    cpu_w, cpu_app = w.copy(), app.copy() if app is not w else None
    n_cpu = pulsed_update_kernel(
        cpu_w, x, d, settings, params, seed, SEED_COUNTER, cpu_w if cpu_app is None else cpu_app, wn, WN_COUNTER
    )
    gpu_w = on_device(w)
    gpu_app = gpu_w if cpu_app is None else on_device(app)
    gpu_params = tuple(on_device(a) if isinstance(a, np.ndarray) else a for a in params)
    n_gpu = gpu.pulsed_update(
        gpu_w, on_device(x), on_device(d), settings, gpu_params, seed, SEED_COUNTER, gpu_app, on_device(wn), WN_COUNTER
    )
    assert n_gpu == n_cpu
    assert_twins(gpu_w.cpu().numpy(), cpu_w)
    if cpu_app is not None:
        assert np.count_nonzero(cpu_app != app) > 0  # redrawn
        assert_twins(gpu_app.cpu().numpy(), cpu_app)
    return n_cpu


@njit
def _normals_by_index(key, n):
    out = np.empty(n, np.float32)
    for k in range(n):
        out[k] = normal_at(key, k)
    return out


def test_normal_at_equals_fill_normals():
    """Normal k of a stream computed alone is the value fill_normals writes at index k, bit for bit (the
    coincidence threads' cycle noise), over 100 blocks and two keys."""
    for key in (np.uint64(1), np.uint64(0x9E3779B97F4A7C15)):
        ring = np.empty(100 * BLOCK, np.float32)
        fill_normals(ring, 0, ring.size, key, 0)
        assert_twins(_normals_by_index(key, ring.size), ring)


@needs_kernels
def test_pulsed_update_equals_the_cpu_kernel_for_every_family():
    """Every family with cycle noise and device-to-device spread (both noise forms), under BL management:
    all seven family codes."""
    codes = set()
    for kind, cfg in SPREAD_CONFIGS.items():
        dev = parse_device(cfg)
        codes.add(dev.draw((1, 1), np.random.default_rng(0)).kernel[1])
        assert _compare(dev, *SETTINGS["BL management"]) > 0, kind
    assert codes == {CONST, LINEAR, EXP_STEP, TABLE, SOFT_REF, POWER, EXP_R1}
    assert {parse_device(c).draw((1, 1), np.random.default_rng(0)).kernel[7] for c in SPREAD_CONFIGS.values()} == {
        True,
        False,
    }


@needs_kernels
@pytest.mark.parametrize("case", list(SETTINGS))
@pytest.mark.parametrize("kind", ["SoftBounds", "LinearStep", "tabulated"])
def test_pulsed_update_equals_the_cpu_kernel_for_every_setting(case, kind):
    """Multiplicative noise (SoftBounds), additive noise (LinearStep) and a table, under each UpdateSettings
    case: BL management, a negative lr with fixed BL 9, no management, one-slot trains."""
    assert _compare(parse_device(SPREAD_CONFIGS[kind]), *SETTINGS[case]) > 0


@needs_kernels
@pytest.mark.parametrize("kind", ["SoftBounds", "ExpStep", "exponential"])
def test_pulsed_update_equals_the_cpu_kernel_without_noise(kind):
    """sigma 0: no normals drawn."""
    dev = parse_device(FAMILY_CONFIGS[kind])
    assert dev.draw((1, 1), np.random.default_rng(0)).kernel[6] == 0.0
    assert _compare(dev, *SETTINGS["negative lr, BL 9"]) > 0


@needs_kernels
def test_pulsed_update_equals_the_cpu_kernel_past_64_samples():
    """70 samples: the CPU kernel visits a row's samples by 64-bit masks, the GPU thread one by one, in the
    same order; over SERIAL_PULSES pulses the CPU kernel fires its rows in parallel."""
    assert _compare(parse_device(SPREAD_CONFIGS["SoftBounds"]), *SETTINGS["BL management"], batch=70) > SERIAL_PULSES


@needs_kernels
def test_pulsed_update_equals_the_cpu_kernel_with_write_noise():
    """aihwkit's ReRAM ExpStep preset (write noise 75 dw_min): the hidden weights and the redrawn apparent
    ones, on a row of 40 columns (two words of the pulsed set) with more than one block of normals a row."""
    dev = get_preset("aihwkit_reram_es")
    assert dev.write_noise_std > 0
    assert _compare(dev, *SETTINGS["BL management"], rows=4, cols=40, batch=3) > 4 * 32


def test_split_long_trains_equals_the_cpu_split():
    """The chunks of trains of 0, 5, 32, 33 and 100 slots: the same rows, lengths and scales as
    devices.pulse_trains.split_long_trains."""
    x, d = _batch(3, 2, 5)
    plan = (np.array([0, 5, 32, 33, 100], np.int32), np.linspace(0.1, 0.5, 5), np.linspace(1.0, 5.0, 5))
    cpu = split_long_trains(x, d, *plan)
    gx, gd, gplan = gpu.split_long_trains(on_device(x), on_device(d), tuple(on_device(a) for a in plan))
    for want, got in zip(cpu, (gx, gd, *gplan)):
        assert got.dtype == on_device(want).dtype
        assert np.array_equal(got.cpu().numpy(), want)


@needs_kernels
def test_pulsed_update_rejects_nan_and_infinity():
    """The CPU kernel's error, before any launch (w unchanged)."""
    arr = ConductanceArray(3, 4, parse_device(FAMILY_CONFIGS["linear"]), seed=1)
    w, app, _, wn, params, granularity, seed, _ = arr.handle()
    x, d = _batch(3, 4, 2)
    for bad in (np.nan, np.inf):
        x[0, 1] = bad
        gpu_w = on_device(w)
        gpu_params = tuple(on_device(a) if isinstance(a, np.ndarray) else a for a in params)
        args = (on_device(x), on_device(d), update_settings(0.1, granularity, UpdateConfig()), gpu_params, seed, 1)
        with pytest.raises(ValueError, match="NaN or an infinity"):
            gpu.pulsed_update(gpu_w, *args, gpu_w, on_device(wn), 0)
        with pytest.raises(ValueError, match="NaN or an infinity"):
            pulsed_update_kernel(w.copy(), x, d, args[2], params, seed, 1, w.copy(), wn, 0)
        assert torch.equal(gpu_w, on_device(w))


def _numpy_args(write_noise: bool) -> dict[str, tuple]:
    """Arguments of each kernel as numpy arrays of the types the wrapper launches with (write noise on or off)."""
    dev = get_preset("aihwkit_reram_es") if write_noise else parse_device(SPREAD_CONFIGS["SoftBounds"])
    arr = ConductanceArray(6, 5, dev, seed=3)
    w, app, _, wn, params, granularity, seed, _ = arr.handle()
    x, d = _batch(6, 5, 3)
    inputs = (x, d)
    settings = update_settings(0.5, granularity, UpdateConfig())
    plan = (np.zeros(3, np.int32), np.zeros(3), np.zeros(3))
    trains = (
        np.zeros((3, 5), np.uint32),
        np.zeros((3, 6), np.uint32),
        np.zeros((3, 4, 5), np.uint32),
        np.zeros((3, 4), np.int32),
        np.zeros((3, 4), np.int32),
    )
    pulsed = np.zeros((6, 1) if write_noise else (0, 0), np.uint32)
    state = (w, app, wn, np.zeros(6, np.int64), pulsed)
    return {
        "plan": (inputs, settings, plan),
        "trains": (inputs, plan, int(seed), SEED_COUNTER, trains),
        "coincidences": (state, inputs, trains, 1.0, tuple(params), (int(seed), SEED_COUNTER, WN_COUNTER)),
    }


@needs_ptx
def test_plan_kernel_compiles():
    assert "plan_kernel" in gpu_code(gpu.plan_kernel, *_numpy_args(False)["plan"])


@needs_ptx
def test_trains_kernel_compiles():
    assert "trains_kernel" in gpu_code(gpu.trains_kernel, *_numpy_args(False)["trains"])


@needs_ptx
def test_coincidences_kernel_compiles():
    """With write noise and without: the same argument types."""
    on, off = _numpy_args(True)["coincidences"], _numpy_args(False)["coincidences"]
    assert [typeof(a) for a in on] == [typeof(a) for a in off]
    assert "coincidences_kernel" in gpu_code(gpu.coincidences_kernel, *on)
