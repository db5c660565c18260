"""aihwkit 1.1.0 itself against our pulsed update, where a venv with it exists (skipped otherwise): noiseless
pulse traces of every aihwkit family, and the per-element mean and spread of one mini-batch update with
aihwkit's default device-to-device and cycle spreads, unsaturated and saturated (k > desired_bl).

aihwkit runs as a subprocess of its own interpreter (`AIMC_AIHWKIT_PYTHON`, default ~/aihwkit-venv/bin/python)
on benchmarks/aihwkit/device_update_aihwkit.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from aihwkit_helpers import INERT, PYTHON
from conftest import NO_SPREAD, TRACE_SIGNS, one_element_traces

from aimc.devices import PRESETS, ConductanceArray, UpdateConfig, parse_device, soft_bounds_pmax

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "aihwkit" / "device_update_aihwkit.py"

pytestmark = pytest.mark.skipif(not PYTHON.exists(), reason=f"no aihwkit interpreter at {PYTHON}")


def run_aihwkit(specs: list[dict]) -> list[dict]:
    """Answers of aihwkit 1.1.0 to the specs (one subprocess for all)."""
    out = subprocess.run(
        [str(PYTHON), str(SCRIPT)], input=json.dumps(specs), capture_output=True, text=True, timeout=1200
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- noiseless traces -------------------------------------------------------------------------------------

TRACE_CASES = {
    "ConstantStep": dict(up_down=-0.1),
    "LinearStep": dict(gamma_up=0.5, gamma_down=0.3, gamma_up_dtod=0.0, gamma_down_dtod=0.0, w_max=0.8, w_min=-0.5),
    "SoftBounds": dict(up_down=0.2, w_max=0.8, w_min=-0.5),
    "ExpStep": dict(),
    "PowStep": dict(pow_gamma=2.0, pow_gamma_dtod=0.0, pow_up_down=0.2),
    "PiecewiseStep": dict(piecewise_up=[1.2, 0.8, 0.5, 0.3, 0.2], piecewise_down=[0.2, 0.3, 0.6, 0.9, 1.1]),
}


def _trace_device(kind: str) -> dict:
    return dict(NO_SPREAD, dw_min=0.01, **TRACE_CASES[kind])


@pytest.fixture(scope="module")
def aihwkit_traces() -> dict[str, np.ndarray]:
    specs = [
        dict(
            mode="trace",
            kind=kind,
            device=_trace_device(kind),
            w0=0.0,
            signs=TRACE_SIGNS.tolist(),
            lr=4 * parse_device(dict(kind=kind, **_trace_device(kind))).granularity,
        )
        for kind in TRACE_CASES
    ]
    specs.append(
        dict(
            mode="trace",
            kind="SoftBoundsPmax",
            device=dict(NO_SPREAD),
            w0=-1.0,
            signs=TRACE_SIGNS.tolist(),
            lr=4 * soft_bounds_pmax().granularity,
        )
    )
    return {kind: np.array(a["w"]) for kind, a in zip([*TRACE_CASES, "SoftBoundsPmax"], run_aihwkit(specs))}


@pytest.mark.parametrize("kind", list(TRACE_CASES))
def test_noiseless_trace_equals_aihwkit(kind, aihwkit_traces):
    """Through `pulse` and through a one-pulse `update` (BL 1, managements off, lr 4 granularities: the
    probability clips at 1), the weight after each of 800 pulses equals aihwkit's to 1e-6."""
    w_pulse, w_update = one_element_traces(parse_device(dict(kind=kind, **_trace_device(kind))))
    want = aihwkit_traces[kind]
    assert np.ptp(want) > 0.3  # the trace covers much of the range
    assert np.abs(w_pulse - want).max() < 1e-6
    assert np.abs(w_update - want).max() < 1e-6


def test_soft_bounds_pmax_trace_equals_aihwkit(aihwkit_traces):
    """aihwkit's SoftBoundsPmaxDevice (defaults, no spread) from -1: our soft_bounds_pmax pulse by pulse."""
    arr = ConductanceArray(1, 1, soft_bounds_pmax(**NO_SPREAD))
    arr.set_weights(np.full((1, 1), -1.0))
    w = []
    for s in TRACE_SIGNS:
        arr.pulse(np.array([[s]]))
        w.append(float(arr.w[0, 0]))
    assert np.abs(np.array(w) - aihwkit_traces["SoftBoundsPmax"]).max() < 1e-6


# -- one mini-batch update, statistics over device draws and pulses -----------------------------------------

SEEDS, LR, W0 = 1000, 0.1, 0.1


def _batch(kind: str, k_mean: float) -> tuple[np.ndarray, np.ndarray]:
    """x, d (16 samples, 64 x 64 tile) scaled so that k = lr max|x| max|d| / granularity averages k_mean."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (16, 64)).astype(np.float32)
    d = rng.normal(0, 1, (16, 64))
    g = parse_device(dict(kind=kind)).granularity
    d *= k_mean * g / (LR * np.abs(x).max(1) * np.abs(d).max(1)).mean()
    return x, d.astype(np.float32)


def _change_stats(dev, x: np.ndarray, d: np.ndarray, update: UpdateConfig | None = None):
    """Per element, the mean and variance over SEEDS device draws (from W0) of one update's weight change."""
    shape = (d.shape[1], x.shape[1])
    acc, acc2 = np.zeros(shape), np.zeros(shape)
    for seed in range(SEEDS):
        arr = ConductanceArray(*shape, dev, seed=seed)
        arr.w[...] = np.clip(np.float32(W0), *arr.bounds)
        w0 = arr.w.astype(float)
        arr.update(x, d, LR, update)
        acc += arr.w - w0
        acc2 += (arr.w - w0) ** 2
    mean = acc / SEEDS
    return mean, acc2 / SEEDS - mean**2


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["SoftBounds", "PowStep"])
@pytest.mark.parametrize("k_mean", [10.0, 150.0])  # unsaturated (k < 31) and saturated (k about 120-190)
def test_minibatch_update_mean_and_spread_equal_aihwkit(kind, k_mean):
    """aihwkit's default spreads (a new device draw per seed) and pulse trains: per element, the mean change
    over 1000 seeds agrees within its standard error (z-scores: max below 5, mean square 1 +- 0.1) and the
    spread within 5%."""
    x, d = _batch(kind, k_mean)
    k = LR * np.abs(x).max(1) * np.abs(d).max(1) / parse_device(dict(kind=kind)).granularity
    assert (k.max() < 31) if k_mean < 31 else (k.min() > 31)
    (ak,) = run_aihwkit(
        [dict(mode="stats", kind=kind, device={}, x=x.tolist(), d=d.tolist(), lr=LR, w0=W0, seeds=SEEDS)]
    )
    ak_mean, ak_var = np.array(ak["mean"]), np.array(ak["var"])
    dev = parse_device(dict(kind=kind))
    mean, var = _change_stats(dev, x, d)
    z = (mean - ak_mean) / np.sqrt((var + ak_var) / SEEDS)
    assert np.abs(z).max() < 5
    assert (z**2).mean() == pytest.approx(1.0, abs=0.1)
    assert np.sqrt(var.sum() / ak_var.sum()) == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("k_mean", [60.0, 150.0])  # trains of about 30 to 90 slots, and saturated at BL 100
def test_long_train_update_mean_and_spread_equal_aihwkit(k_mean):
    """desired_bl 100 (trains of several 32-bit words in aihwkit, chunks of 32 slots here): ConstantStep with
    aihwkit's default spreads, 4 samples on a 32 x 32 tile, 1000 seeds: per element, the mean change agrees
    within its standard error (z-scores: max below 5, mean square 1 +- 0.15) and the spread within 5%."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (4, 32)).astype(np.float32)
    d = rng.normal(0, 1, (4, 32))
    g = parse_device(dict(kind="ConstantStep")).granularity
    d *= k_mean * g / (LR * np.abs(x).max(1) * np.abs(d).max(1)).mean()
    d = d.astype(np.float32)
    k = LR * np.abs(x).max(1) * np.abs(d).max(1) / g
    assert k.max() > 32 and (k.min() > 100 if k_mean > 100 else k.max() < 100)
    update = dict(desired_bl=100)
    spec = dict(mode="stats", kind="ConstantStep", device={}, x=x.tolist(), d=d.tolist(), lr=LR, w0=W0, seeds=SEEDS)
    (ak,) = run_aihwkit([dict(spec, update=update)])
    ak_mean, ak_var = np.array(ak["mean"]), np.array(ak["var"])
    dev = parse_device(dict(kind="ConstantStep"))
    mean, var = _change_stats(dev, x, d, UpdateConfig(**update))
    z = (mean - ak_mean) / np.sqrt((var + ak_var) / SEEDS)
    assert np.abs(z).max() < 5
    assert (z**2).mean() == pytest.approx(1.0, abs=0.15)
    assert np.sqrt(var.sum() / ak_var.sum()) == pytest.approx(1.0, abs=0.05)


# -- effects and presets ----------------------------------------------------------------------------------

_FLAT = dict(w_max=10.0, w_min=-10.0, w_max_dtod=0.0, w_min_dtod=0.0)  # nothing clips
EFFECT_CASES = {
    "write noise on set": (dict(write_noise_std=5.0, dw_min=0.01), dict(w0=0.2)),
    "decay": (dict(lifetime=20.0, reset=0.1), dict(w0=0.9, steps=7)),
    "diffusion": (dict(diffusion=0.01, diffusion_dtod=0.5), dict(w0=0.0, steps=16)),
    "reset": (dict(reset=0.1, reset_dtod=0.05, reset_std=0.02), dict(w0=-1.0, reset=True)),
}


def test_effects_equal_aihwkit():
    """200 x 200 SoftBounds tiles: mean and std of the weights after write noise on set, 7 decay steps,
    16 diffusion steps and a reset agree with aihwkit's (std within 4%)."""
    specs = [
        dict(mode="effects", kind="SoftBounds", device=dict(_FLAT, **dev), **how) for dev, how in EFFECT_CASES.values()
    ]
    for (name, (dev, how)), ak in zip(EFFECT_CASES.items(), run_aihwkit(specs)):
        arr = ConductanceArray(200, 200, parse_device(dict(kind="SoftBounds", **_FLAT, **dev)), seed=3)
        arr.set_weights(np.full(arr.shape, how["w0"]))
        if how.get("reset"):
            arr.reset()
        for _ in range(how.get("steps", 0)):
            arr.post_update_step()
        w = arr.w.astype(float)
        # aihwkit's diffusion means stray by 10 of their iid standard errors (its draws are not independent
        # across elements): means within a tenth of the spread (decay: no spread, within 1e-6)
        assert abs(w.mean() - ak["mean"]) <= 0.1 * ak["std"] + 1e-6, name
        assert w.std() == pytest.approx(ak["std"], rel=0.04, abs=1e-6), name


AIHWKIT_PRESETS = {
    "aihwkit_reram_sb": "ReRamSBPresetDevice",
    "aihwkit_reram_es": "ReRamESPresetDevice",
    "aihwkit_ecram": "EcRamPresetDevice",
    "aihwkit_ecram_mo": "EcRamMOPresetDevice",
    "aihwkit_capacitor": "CapacitorPresetDevice",
    "aihwkit_idealized": "IdealizedPresetDevice",
    "aihwkit_gokmen_vlasov": "GokmenVlasovPresetDevice",
}


def test_presets_carry_every_field_of_aihwkit_s_preset_classes():
    """Every field of aihwkit's preset class has our preset's value, or is one of INERT at its inert value."""
    answers = run_aihwkit([dict(mode="fields", preset=cls) for cls in AIHWKIT_PRESETS.values()])
    for (name, cls), ak in zip(AIHWKIT_PRESETS.items(), answers):
        ours = PRESETS[name].device.model_dump()
        assert cls in PRESETS[name].source
        for field, value in ak.items():
            if field in ours:
                assert ours[field] == pytest.approx(value, rel=1e-12), (name, field)
            else:
                assert field in INERT and INERT[field] == value, (name, field, value)
