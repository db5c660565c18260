"""GPU tiles and layers on GPU tiles against their CPU twins: updates, reads, state, a few training steps.

Under Numba's CUDA simulator the GPU tile's tensors stay on the CPU (gpu_helpers.DEVICE) and its kernels run
there; the comparisons are those a GPU run must pass too, except where the docstrings say rounding enters.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gpu_helpers import DEVICE, assert_twins, needs_kernels
from torch import nn

from aimc import trainers as T
from aimc.devices import AnalogTile, PeripheryConfig, UpdateConfig, load_device
from aimc.devices.gpu.tile import GpuTile

pytestmark = needs_kernels

DEVICES = ["r1_power_1", "aihwkit_reram_es"]


def _batch(rng, b, n_in, n_out):
    x = rng.uniform(-1, 1, (b, n_in)).astype(np.float32)
    d = rng.uniform(-1, 1, (b, n_out)).astype(np.float32)
    return x, d


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a).to(DEVICE)


@pytest.mark.parametrize("device", DEVICES)
def test_pulsed_updates_equal_the_cpu_tile_bit_for_bit(device):
    cpu = AnalogTile(6, 5, load_device(device), seed=3)
    gpu = GpuTile(copy.deepcopy(cpu), DEVICE)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, d = _batch(rng, 4, 5, 6)
        assert gpu.update(_t(x), _t(d), 0.2) == cpu.update(x, d, 0.2)
    _assert_same_state(gpu, cpu)


def _assert_same_state(gpu: GpuTile, cpu: AnalogTile) -> None:
    for mine, theirs in zip(gpu.state_dict()["arrays"], cpu.state_dict()["arrays"]):
        for key in ("w", "reference", "hidden"):
            if key in theirs:
                assert_twins(mine[key], theirs[key])
        assert mine["counter"] == theirs["counter"] and mine["pulses"] == theirs["pulses"]


EFFECTS = dict(preset="aihwkit_reram_es", diffusion=0.01, lifetime=20.0, reset=0.05, reset_dtod=0.5)
"""aihwkit's ReRAM ExpStep preset (write noise, cycle noise, spread) with diffusion and a decay."""


def test_write_noise_diffusion_decay_and_pulses_equal_the_cpu_tile_bit_for_bit():
    cpu = AnalogTile(6, 70, load_device(EFFECTS), seed=5)  # 70 columns: two words of a pulsed set
    gpu = GpuTile(copy.deepcopy(cpu), DEVICE)
    rng = np.random.default_rng(6)
    for _ in range(2):
        x, d = _batch(rng, 3, 70, 6)
        assert gpu.update(_t(x), _t(d), 0.3) == cpu.update(x, d, 0.3)
        gpu.post_update_step()
        cpu.post_update_step()
    counts = rng.integers(-3, 4, (6, 70)) * (rng.uniform(size=(6, 70)) < 0.3)
    assert gpu.pulse(counts) == cpu.pulse(counts)
    _assert_same_state(gpu, cpu)


def test_expected_updates_match_the_cpu_tile_to_a_pulse():
    """The expected update's mean change d^T x is torch's matmul on the GPU path and numpy's on the CPU: where
    the two sums round apart, an element's stochastic rounding can land one pulse apart (rarely)."""
    cfg = UpdateConfig(mode="expected")
    cpu = AnalogTile(6, 5, load_device("r1_power_1"), update=cfg, seed=3)
    gpu = GpuTile(copy.deepcopy(cpu), DEVICE)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x, d = _batch(rng, 4, 5, 6)
        gpu.update(_t(x), _t(d), 0.2)
        cpu.update(x, d, 0.2)
    diff = np.abs(gpu.state_dict()["arrays"][0]["w"] - cpu.state_dict()["arrays"][0]["w"])
    assert (diff > 0).sum() <= 1 and diff.max() <= 2.0 * cpu.granularity(0)


@pytest.mark.parametrize("periphery", [PeripheryConfig.perfect(), PeripheryConfig()])
def test_reads_match_the_cpu_tile(periphery):
    """Forward and backward reads: the product is torch's, so values agree to float32 rounding, and after
    the ADC to one level where a value sits on a level's edge."""
    cpu = AnalogTile(6, 5, load_device("r1_power_1"), forward=periphery, backward=periphery, seed=4)
    cpu.set_weight(np.random.default_rng(2).uniform(-0.5, 0.5, (6, 5)).astype(np.float32))
    gpu = GpuTile(copy.deepcopy(cpu), DEVICE)
    x, d = _batch(np.random.default_rng(3), 4, 5, 6)
    bits = periphery.out_bits
    step = 0.0 if bits is None else 2 * periphery.out_bound / (2**bits - 2)
    for mine, theirs in ((gpu.forward(_t(x)), cpu.forward(x)), (gpu.backward(_t(d)), cpu.backward(d))):
        np.testing.assert_allclose(mine.cpu().numpy(), theirs, rtol=0, atol=1e-5 + 1.01 * step)
    assert gpu.reads == cpu.reads


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))


ALGORITHMS = [
    T.AnalogSGDConfig(lr=0.1),
    T.TikiTakaConfig(lr=0.1, transfer_every=2),
    T.TTv2Config(lr=0.1),
    T.RiderConfig(lr=0.1),
    T.MixedPrecisionConfig(lr=0.1),
]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_model_on_gpu_tiles_trains_as_on_the_cpu_and_its_state_loads_on_either(algorithm):
    tile = T.TileConfig(device="r1_power_1", forward=PeripheryConfig.perfect(), backward=PeripheryConfig.perfect())
    cpu = T.convert(_model(), tile, seed=1)
    gpu = copy.deepcopy(cpu)
    for layer in T.analog_layers(gpu):
        layer.move_tiles(DEVICE, gpu_kernels=True)
    opts = [T.build_optimizer(m, algorithm) for m in (cpu, gpu)]
    rng = np.random.default_rng(5)
    losses = []
    for _ in range(4):
        x = torch.from_numpy(rng.uniform(0, 1, (8, 5)).astype(np.float32))
        y = torch.from_numpy(rng.integers(0, 3, 8))
        step = []
        for m, opt in zip((cpu, gpu), opts):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(x.to(DEVICE) if m is gpu else x), y.to(DEVICE) if m is gpu else y)
            loss.backward()
            opt.step()
            step.append(loss.item())
        losses.append(step)
    np.testing.assert_allclose(*np.array(losses).T, rtol=1e-4)
    w_cpu = [layer.analog_weight() for layer in T.analog_layers(cpu)]
    w_gpu = [layer.analog_weight() for layer in T.analog_layers(gpu)]
    for a, b in zip(w_cpu, w_gpu):  # the reads round apart by ~1e-7, which can move a pulse train's coin
        assert np.mean(a != b) <= 0.1 and np.abs(a - b).max() <= 0.05
    fresh = T.convert(_model(), tile, seed=1)
    T.build_optimizer(fresh, algorithm)
    fresh.load_state_dict(gpu.state_dict())  # a GPU checkpoint into a CPU model
    for layer, expected in zip(T.analog_layers(fresh), w_gpu):
        np.testing.assert_array_equal(layer.analog_weight(), expected)
    for layer in T.analog_layers(fresh):
        layer.move_tiles(DEVICE, gpu_kernels=True)
    fresh.load_state_dict(cpu.state_dict())  # a CPU checkpoint into a model on GPU tiles
    for layer, expected in zip(T.analog_layers(fresh), w_cpu):
        np.testing.assert_array_equal(layer.analog_weight(), expected)
