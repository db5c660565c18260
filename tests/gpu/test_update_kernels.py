"""The GPU twins of the expected update, the pulse kernels and the effects (devices.gpu.expected_update,
pulses, effects) against their CPU kernels on the same arrays and keys: bit-identical under the simulator,
over response families with and without device-to-device spread, additive and multiplicative cycle noise,
write noise, diffusion and decay; and each kernel compiled to PTX."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAMILY_CONFIGS, SPREAD_CONFIGS
from gpu_helpers import assert_twins, gpu_code, needs_kernels, needs_ptx, on_device

from aimc.devices import ConductanceArray
from aimc.devices.array_update import expected_array_update
from aimc.devices.effects import DIFFUSE, WRITE, decay_kernel, redraw_kernel
from aimc.devices.expected_update import expected_update_kernel
from aimc.devices.gpu import effects as gpu_effects
from aimc.devices.gpu import expected_update as gpu_expected
from aimc.devices.gpu import pulses as gpu_pulses
from aimc.devices.presets import load_device
from aimc.devices.pulsed_set import NO_SET, new_set, set_of_mask
from aimc.devices.pulses import pulse_columns_kernel, pulse_kernel

EFFECTS = dict(
    preset="aihwkit_reram_es",
    diffusion=0.01,
    diffusion_dtod=0.3,
    lifetime=20.0,
    lifetime_dtod=0.3,
    reset=0.05,
    reset_dtod=0.5,
)
"""aihwkit's ReRAM ExpStep preset (write noise, additive cycle noise, spread) with diffusion and a decay
toward spread reset values, some outside their elements' bounds (the decay then clips)."""

DEVICES = {
    "linear": FAMILY_CONFIGS["linear"],  # no cycle noise
    "exponential": FAMILY_CONFIGS["exponential"],  # one shared gamma: the step's denominator from consts
    "exponential_spread": SPREAD_CONFIGS["exponential"],  # gamma per element, additive noise
    "power_multiplicative": SPREAD_CONFIGS["power"],
    "ExpStep": SPREAD_CONFIGS["ExpStep"],
    "PiecewiseStep": SPREAD_CONFIGS["PiecewiseStep"],
    "SoftBoundsReference": SPREAD_CONFIGS["SoftBoundsReference"],
    "reram_es_effects": EFFECTS,
}


def _array(name: str, shape=(6, 70)) -> ConductanceArray:
    """An array of DEVICES[name] with weights spread over its range."""
    arr = ConductanceArray(*shape, load_device(DEVICES[name]), seed=5)
    lo, hi = arr.bounds
    u = np.random.default_rng(1).uniform(size=shape)
    arr.set_weights(lo + (hi - lo) * u)
    return arr


def _on_device(params: tuple) -> tuple:
    """ElementKernelParams with its arrays as tensors on DEVICE."""
    return tuple(on_device(p) if isinstance(p, np.ndarray) else p for p in params)


def _weights(arr: ConductanceArray) -> np.ndarray:
    """The weights pulses move (the hidden ones under write noise)."""
    return (arr.w if arr.hidden is None else arr.hidden).copy()


# -- expected update -------------------------------------------------------------------------------------------
@needs_kernels
@pytest.mark.parametrize("name", list(DEVICES))
def test_expected_update_equals_cpu(name):
    """Weights, pulses fired and the pulsed set of one expected update, with and without marking."""
    arr = _array(name)
    g = arr.params.granularity
    rng = np.random.default_rng(2)
    dw = rng.normal(0.0, 4 * g, arr.shape) * (rng.uniform(size=arr.shape) < 0.7)
    for mark in (True, False):
        w = _weights(arr)
        pulsed = new_set(*arr.shape, mark)
        fired = expected_update_kernel(w, dw, g, arr.params.kernel, arr.seed, 9, pulsed)
        w_gpu, pulsed_gpu = on_device(_weights(arr)), on_device(new_set(*arr.shape, mark))
        fired_gpu = gpu_expected.expected_update(
            w_gpu, on_device(dw), g, _on_device(arr.params.kernel), arr.seed, 9, pulsed_gpu
        )
        assert fired_gpu == fired > 0 and isinstance(fired_gpu, int)
        assert_twins(w_gpu.cpu().numpy(), w)
        assert_twins(pulsed_gpu.cpu().numpy(), pulsed)


# -- pulses ----------------------------------------------------------------------------------------------------
@needs_kernels
@pytest.mark.parametrize("name", ["linear", "exponential_spread", "power_multiplicative", "ExpStep", "PiecewiseStep"])
def test_pulse_equals_cpu(name):
    """Signed pulse counts into every element (pulse_kernel) and into chosen columns (pulse_columns_kernel)."""
    arr = _array(name)
    rng = np.random.default_rng(3)
    counts = rng.integers(-4, 5, arr.shape) * (rng.uniform(size=arr.shape) < 0.6)
    cols = np.array([0, 3, 4, 17, 40, 69])
    in_cols = np.zeros_like(counts)
    in_cols[:, cols] = counts[:, cols]
    params = _on_device(arr.params.kernel)
    w, w_gpu = _weights(arr), on_device(_weights(arr))
    fired = pulse_kernel(w, counts, arr.params.kernel, arr.seed, 4)
    assert gpu_pulses.pulse(w_gpu, on_device(counts), params, arr.seed, 4) == fired == np.abs(counts).sum()
    assert_twins(w_gpu.cpu().numpy(), w)
    w, w_gpu = _weights(arr), on_device(_weights(arr))
    fired = pulse_columns_kernel(w, in_cols, cols, arr.params.kernel, arr.seed, 4)
    fired_gpu = gpu_pulses.pulse_columns(w_gpu, on_device(in_cols), on_device(cols), params, arr.seed, 4)
    assert fired_gpu == fired == np.abs(in_cols).sum() and isinstance(fired_gpu, int)
    assert_twins(w_gpu.cpu().numpy(), w)


# -- effects ---------------------------------------------------------------------------------------------------
@needs_kernels
@pytest.mark.parametrize("chosen", ["every", "set"])
@pytest.mark.parametrize("clip", [False, True])
def test_redraw_equals_cpu(chosen, clip):
    """base + scale xi over a set of chosen elements (rows of 0 to 150 elements: several blocks of normals, a
    partial last one) or over every element, with an expanded scale, clipped or not."""
    rng = np.random.default_rng(4)
    shape = (5, 150)
    density = np.array([0.0, 0.05, 0.5, 0.9, 1.0])[:, None]
    pulsed = set_of_mask(rng.uniform(size=shape) < density) if chosen == "set" else NO_SET
    base = rng.normal(0.0, 0.3, shape).astype(np.float32)
    std = np.full((1, 1), np.float32(0.2))
    lo, hi = np.full(shape, np.float32(-0.4)), rng.uniform(0.2, 0.5, shape).astype(np.float32)
    w = rng.normal(0.0, 0.3, shape).astype(np.float32)
    w_gpu = on_device(w)
    redraw_kernel(w, base, pulsed, np.broadcast_to(std, shape), lo, hi, clip, 11, 7, WRITE)
    gpu_effects.redraw(
        w_gpu, on_device(base), on_device(pulsed), on_device(std).expand(shape), on_device(lo), on_device(hi), clip,
        11, 7, WRITE,
    )  # fmt: skip
    assert_twins(w_gpu.cpu().numpy(), w)


@needs_kernels
@pytest.mark.parametrize("clip", [False, True])
def test_decay_equals_cpu(clip):
    """bias + (w - bias) scale per element with per-element and expanded (one value) biases and scales."""
    arr = _array("reram_es_effects")
    fx = arr.effects
    lo, hi = (np.ascontiguousarray(b) for b in arr.bounds)
    for bias, scale in ((fx.reset_bias, fx.decay_scale), (np.full((1, 1), np.float32(0.9)), fx.decay_scale)):
        w = _weights(arr)
        w_gpu = on_device(w)
        decay_kernel(w, np.broadcast_to(bias, arr.shape), scale, lo, hi, clip)
        gpu_effects.decay(
            w_gpu, on_device(bias).expand(arr.shape), on_device(scale), on_device(lo), on_device(hi), clip
        )
        assert_twins(w_gpu.cpu().numpy(), w)


@needs_kernels
def test_post_update_step_of_the_twins_equals_the_array():
    """ConductanceArray.post_update_step (diffusion, decay, then the write-noise redraw of every apparent weight)
    and an expected update's write-noise redraw of the elements it moved, made of the GPU twins."""
    arr = _array("reram_es_effects")
    fx, shape = arr.effects, arr.shape
    lo, hi = (on_device(np.ascontiguousarray(b)) for b in arr.bounds)
    hidden, app = on_device(arr.hidden), on_device(arr.w)
    std = on_device(arr.write_std).expand(shape)
    every = on_device(NO_SET)
    for _ in range(2):
        counter = arr.counter
        assert arr.post_update_step()
        gpu_effects.redraw(
            hidden, hidden, every, on_device(fx.diffusion_rate), lo, hi, True, arr.seed, counter + 1, DIFFUSE
        )
        gpu_effects.decay(hidden, on_device(fx.reset_bias), on_device(fx.decay_scale), lo, hi, True)
        gpu_effects.redraw(app, hidden, every, std, app, app, False, arr.seed, counter + 2, WRITE)
        assert_twins(hidden.cpu().numpy(), arr.hidden)
        assert_twins(app.cpu().numpy(), arr.w)
    counter, g = arr.counter, arr.params.granularity
    dw = np.random.default_rng(5).normal(0.0, 3 * g, shape)
    fired = expected_array_update(arr.handle(), dw, g)
    moved = on_device(new_set(*shape, True))
    assert (
        gpu_expected.expected_update(
            hidden, on_device(dw), g, _on_device(arr.params.kernel), arr.seed, counter + 1, moved
        )
        == fired
    )
    gpu_effects.redraw(app, hidden, moved, std, app, app, False, arr.seed, counter + 2, WRITE)
    assert_twins(hidden.cpu().numpy(), arr.hidden)
    assert_twins(app.cpu().numpy(), arr.w)


# -- compiled for the GPU --------------------------------------------------------------------------------------
def _ptx_params() -> tuple:
    """An array's ElementKernelParams as the kernels take them, with C-contiguous arrays."""
    params = _array("PiecewiseStep", (4, 8)).params.kernel
    return tuple(np.ascontiguousarray(p) if isinstance(p, np.ndarray) else p for p in params)


def _expanded(shape) -> np.ndarray:
    """A writable float32 array of stride 0, the type an expanded tensor has in a kernel."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape, (0, 0))


@needs_ptx
def test_expected_update_kernel_compiles():
    w, fired = np.zeros((4, 8), np.float32), np.zeros(4, np.int64)
    for pulsed in (new_set(4, 8, True), NO_SET):
        assert gpu_code(
            gpu_expected.expected_update_kernel, w, np.zeros((4, 8)), 0.1, _ptx_params(), 1, 2, pulsed, fired
        )


@needs_ptx
def test_pulse_kernel_compiles():
    w, counts, cols, fired = (
        np.zeros((4, 8), np.float32),
        np.zeros((4, 8), np.int64),
        np.arange(8),
        np.zeros(4, np.int64),
    )
    assert gpu_code(gpu_pulses.pulse_kernel, w, counts, cols, _ptx_params(), 1, 2, fired)


@needs_ptx
def test_redraw_kernel_compiles():
    w, xi = np.zeros((4, 8), np.float32), np.zeros((4, 32), np.float32)
    for scale in (w, _expanded(w.shape)):
        for pulsed in (new_set(4, 8, True), NO_SET):
            assert gpu_code(gpu_effects.redraw_kernel, w, w, pulsed, scale, w, w, True, 1, 2, WRITE, xi)


@needs_ptx
def test_decay_kernel_compiles():
    w = np.zeros((4, 8), np.float32)
    for bias in (w, _expanded(w.shape)):
        for scale in (w, _expanded(w.shape)):
            assert gpu_code(gpu_effects.decay_kernel, w, bias, scale, w, w, True)
