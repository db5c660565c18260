"""The chopped transfers (c-TTv2, AGAD) on a GPU tile against the CPU kernel on the CPU tile it was made from:
trainers/algorithms/chopped_gpu.py against chopped_kernel.chopped_transfer_kernel, bit for bit under Numba's
CUDA simulator (the same buffer rule, the same streams), over the rule's options; a model trained with c-TTv2
on GPU tiles against the same model on CPU tiles; the buffer kernel compiled to PTX."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from chopped_helpers import RULE, transfer_tile
from gpu_helpers import DEVICE, assert_twins, gpu_code, needs_kernels, needs_ptx
from torch import nn

from aimc import trainers as T
from aimc.devices import Linear, PeripheryConfig, get_preset
from aimc.devices.gpu.tile import GpuTile
from aimc.trainers.algorithms.chopped_gpu import buffer_read_kernel
from aimc.trainers.algorithms.chopped_kernel import ChopperState, buffer_rule, chopped_transfer

N_OUT, N_IN, N = 6, 5, 14


AGAD = RULE._replace(dynamic=True, beta=0.4, write_after=0, chop_random=False, period=2)

LINEAR = Linear(tau=1.0, dw_min=1e-2, c=0.1, dw_min_std=0.3, dw_min_dtod=0.2)

CASES = {
    "c_ttv2": (LINEAR, "pulsed", RULE, 1),
    "c_ttv2_forget_step": (LINEAR, "pulsed", RULE._replace(forget_buffer=True, step=0.5), 2),
    "c_ttv2_expected": (LINEAR, "expected", RULE._replace(out_chop_prob=0.0, no_buffer=True, scale=90.0), 3),
    "c_ttv2_write_noise": (get_preset("aihwkit_reram_sb"), "pulsed", RULE, 2),
    "agad": (LINEAR, "pulsed", AGAD, 1),
    "agad_correct_accumulation": (LINEAR, "pulsed", AGAD._replace(correct_accumulation=True, chop_random=True), 2),
    "agad_feedback": (LINEAR, "pulsed", AGAD._replace(fast_lr_feedback=True, out_chop_prob=0.0), 1),
    "agad_expected_step": (LINEAR, "expected", AGAD._replace(step=0.7, fast_lr_feedback=True), 1),
}


def _state(rng) -> ChopperState:
    return ChopperState(
        rng.uniform(-0.5, 0.5, (N_OUT, N_IN)).astype(np.float32),
        np.where(rng.uniform(size=N_IN) < 0.5, -1, 1).astype(np.float32),
        np.ones(N_OUT, np.float32),
        rng.uniform(-0.01, 0.01, (N_OUT, N_IN)).astype(np.float32),
        np.zeros((N_OUT, N_IN), np.float32),
        np.array([True, False, True, False, False]),
        np.array([1.0, 0.0, 0.0, 0.02, 6.0, 3.0]),  # AGAD's feedback: scale, estimate, previous, target, period, t
        np.zeros((N_OUT, N_IN), np.int64),
        np.zeros(N_IN, bool),
    )


@needs_kernels
@pytest.mark.parametrize("case", list(CASES))
def test_a_gpu_tile_transfers_as_the_cpu_kernel_bit_for_bit(case):
    device, mode, rule, every = CASES[case]
    cpu = transfer_tile(N_OUT, N_IN, device, mode)
    gpu = GpuTile(copy.deepcopy(cpu), DEVICE)
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (N, N_IN)).astype(np.float32)
    d = rng.uniform(-1, 1, (N, N_OUT)).astype(np.float32)
    x[3] = 0  # a piece that fires nothing
    eta = rng.uniform(0.01, 0.05, N) if mode == "pulsed" else 0.03  # per vector, or one lr for all
    u = rng.random(N + 8 * N_OUT)
    st_cpu = _state(rng)
    st_gpu = copy.deepcopy(st_cpu)
    first, position = 1, (2, 1)
    want = chopped_transfer(cpu, (1, 0), x, d, eta, rule, u, st_cpu, (first, every), position)
    xt, dt = (torch.from_numpy(v).to(DEVICE) for v in (x, d))
    got = chopped_transfer(gpu, (1, 0), xt, dt, eta, rule, u, st_gpu, (first, every), position)
    assert got == want
    assert want.transfer_pulses > 0 and want.reads == len(range(first, N, every))
    for a, b in zip(st_gpu, st_cpu):  # H, M and Pref within GPU_ATOL on a GPU; the rest exactly
        assert_twins(a, b) if a.dtype == np.float32 else np.testing.assert_array_equal(a, b)
    gpu_state, cpu_state = gpu.state_dict(), cpu.state_dict()
    for mine, theirs in zip(gpu_state["arrays"], cpu_state["arrays"]):
        for key in ("w", "reference", "hidden"):
            if key in theirs:
                assert_twins(mine[key], theirs[key])
        assert (mine["counter"], mine["pulses"]) == (theirs["counter"], theirs["pulses"])
    assert (gpu.stream.counter, gpu.reads) == (cpu.stream.counter, cpu.reads)


MODEL_ALGORITHMS = [
    T.CTTv2Config(lr=0.5, transfer_every=2, in_chop_prob=0.5, out_chop_prob=0.3),
    T.AGADConfig(
        lr=0.5,
        in_chop_prob=0.5,
        in_chop_random=True,
        experimental_correct_accumulation=True,
        experimental_fast_lr_feedback=True,
    ),
]


@needs_kernels
@pytest.mark.parametrize("cfg", MODEL_ALGORITHMS, ids=["c_ttv2", "agad"])
def test_a_model_trained_with_chopped_transfers_on_gpu_tiles_equals_the_cpu_model(cfg):
    """Bit for bit under the simulator where the forward products agree: each input vector has one nonzero
    (the GPU's product is torch's matmul, whose sums may round apart from the CPU's)."""
    tile = T.TileConfig(device="r1_power_1", forward=PeripheryConfig.perfect(), backward=PeripheryConfig.perfect())
    torch.manual_seed(0)
    cpu = T.convert(nn.Sequential(nn.Linear(5, 4)), tile, seed=1)
    gpu = copy.deepcopy(cpu)
    for layer in T.analog_layers(gpu):
        layer.move_tiles(DEVICE, gpu_kernels=True)
    opts = [T.build_optimizer(m, cfg) for m in (cpu, gpu)]
    rng = np.random.default_rng(5)
    for _ in range(2):
        x = np.zeros((6, 5), np.float32)  # one input each: the product W x has no sum to round apart
        x[np.arange(6), rng.integers(0, 5, 6)] = rng.uniform(0.5, 1, 6)
        x = torch.from_numpy(x)
        y = torch.from_numpy(rng.integers(0, 4, 6))
        for m, opt in zip((cpu, gpu), opts):
            opt.zero_grad()
            on = DEVICE if m is gpu else "cpu"
            nn.functional.cross_entropy(m(x.to(on)), y.to(on)).backward()
            opt.step()
    assert opts[0].counts == opts[1].counts and opts[0].counts["transfer_reads"] > 0
    for a, b in zip(opts[1].tile_state[0], opts[0].tile_state[0]):
        assert a.keys() == b.keys()
        for key in a:
            if not key.startswith("_"):
                assert_twins(a[key], b[key])
    for mine, theirs in zip(T.analog_layers(gpu), T.analog_layers(cpu)):
        t_gpu, t_cpu = mine.blocks[0].tile.to_host(), theirs.blocks[0].tile
        for a, b in zip(t_gpu.state_dict()["arrays"], t_cpu.state_dict()["arrays"]):
            assert_twins(a["w"], b["w"])
            assert (a["counter"], a["pulses"]) == (b["counter"], b["pulses"])
        assert (t_gpu.stream.counter, t_gpu.reads) == (t_cpu.stream.counter, t_cpu.reads)


@needs_ptx
def test_buffer_read_kernel_compiles():
    """One signature: buffer_rule gives the same types for every rule, and Pref and M are (0, 0) arrays of
    the same type without the dynamic reference."""
    f32 = np.zeros((N_OUT, N_IN), np.float32)
    assert [type(a) for a in buffer_rule(RULE)] == [type(a) for a in buffer_rule(AGAD)]
    args = (
        np.zeros(N_OUT, np.float32),  # the read
        2,  # column k
        -1.0,  # c_in[k]
        np.ones(N_OUT, np.float32),  # c_out
        40.0,  # s
        buffer_rule(AGAD),
        True,  # latch
        f32,  # H
        f32,  # Pref
        f32,  # M
        np.zeros(N_OUT, np.int64),  # pulses
        np.zeros(N_OUT, np.float32),  # change
    )
    assert "buffer_read_kernel" in gpu_code(buffer_read_kernel, *args)
