"""The chopped-transfer kernel (trainers/algorithms/chopped_kernel.py) against the tile's own methods run one by one:
AnalogTile.update for each piece, AnalogTile.read_columns for each read, AnalogTile.pulse for C, with the
buffer, threshold and chopper recursion written out in numpy (aihwkit 1.1.0's ChoppedTransferCompound /
DynamicTransferCompound, arXiv:2303.04721 Eq. 10-14)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from chopped_helpers import RULE, transfer_tile

from aimc.devices import AnalogTile, Linear, PeripheryConfig, analog_mvm, get_preset
from aimc.devices.array_update import pulse_array
from aimc.devices.column_read import one_hot_settings
from aimc.devices.periphery import read_one_hot
from aimc.devices.pulses import pulse_columns_kernel, pulse_kernel
from aimc.devices.rng import Stream
from aimc.trainers.algorithms.chopped_kernel import ChopperState, chopped_transfer, running_estimate


def _reference(tile, x, d, eta, first, every, rule, u, st):
    """The recursion with the tile's methods, one piece and one read at a time; st changes in place."""
    n_out, n_in = tile.out_size, tile.in_size
    counts = np.zeros((n_out, n_in), np.int64)
    queued = np.zeros(n_in, bool)
    up = tr = 0
    ui = 0

    def flush():
        nonlocal tr
        if queued.any():
            tr += tile.pulse(counts, 0)
            counts[:, queued] = 0
            queued[:] = False

    reads = list(range(first, len(x), every))
    start = 0
    for end, read in [(r + 1, True) for r in reads] + [(len(x), False)]:
        if end > start:
            ds = (d[start:end] * st["c_out"]) * eta[start:end, None].astype(np.float32)
            up += tile.update(x[start:end] * st["c_in"], ds, 1.0, 1)
            start = end
        if not read:
            continue
        k = st["col"]
        v = tile.read_columns(1, np.array([k]))[0]
        if rule.dynamic and st["switched"][k]:
            st["Pref"][:, k] = st["M"][:, k]
            st["switched"][k] = False
        dv = v - st["Pref"][:, k] if rule.dynamic else v
        h = st["H"][:, k] + np.float32(rule.scale) * (st["c_in"][k] * st["c_out"] * dv)
        if rule.dynamic:
            beta = np.float32(rule.beta)
            st["M"][:, k] = (np.float32(1) - beta) * st["M"][:, k] + beta * v
        hit = np.abs(h) >= 1
        n = np.where(hit, np.clip(np.trunc(h), -rule.transfer_bl, rule.transfer_bl), 0).astype(np.int64)
        h[hit] -= np.float32(1 - rule.momentum) * n[hit].astype(np.float32)
        lim = np.float32(rule.buffer_cap * rule.transfer_bl)
        h[hit] = np.clip(h[hit], -lim, lim)
        st["H"][:, k] = h
        if st["sweeps"] > rule.write_after and n.any():
            if queued[k]:
                flush()
            counts[:, k] = n
            queued[k] = True
        flip = st["sweeps"] % rule.period + 1 == rule.period
        if u[ui] < rule.chop_prob:
            flip = True
        ui += 1
        if flip:
            st["c_in"][k] *= -1
            if rule.dynamic:
                st["switched"][k] = True
        st["col"] = (k + 1) % n_in
        if k == n_in - 1:
            st["c_out"][u[ui : ui + n_out] < rule.out_chop_prob] *= -1
            ui += n_out
            st["sweeps"] += 1
    flush()
    return up, tr, len(reads)


@pytest.mark.parametrize(
    "device, mode, dynamic, every",
    [
        (Linear(tau=1.0, dw_min=1e-2, c=0.1, dw_min_std=0.3, dw_min_dtod=0.2), "pulsed", False, 1),
        (Linear(tau=1.0, dw_min=1e-2, c=0.1, dw_min_std=0.3, dw_min_dtod=0.2), "expected", True, 3),
        (get_preset("aihwkit_reram_sb"), "pulsed", True, 2),  # write noise: apparent weights redrawn
    ],
)
def test_kernel_equals_the_tile_methods_one_by_one(device, mode, dynamic, every):
    n_out, n_in, n = 5, 4, 23
    tile = transfer_tile(n_out, n_in, device, mode)
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (n, n_in)).astype(np.float32)
    d = rng.uniform(-1, 1, (n, n_out)).astype(np.float32)
    x[3] = 0  # a piece that fires nothing
    eta = rng.uniform(0.01, 0.05, n)
    rule = RULE._replace(dynamic=dynamic, beta=0.4 if dynamic else 0.0, write_after=1 if dynamic else -1)
    u = rng.random(n + 8 * n_out)
    st = {
        "H": np.zeros((n_out, n_in), np.float32),
        "c_in": np.ones(n_in, np.float32),
        "c_out": np.ones(n_out, np.float32),
        "M": np.zeros((n_out, n_in), np.float32),
        "Pref": np.zeros((n_out, n_in), np.float32),
        "switched": np.zeros(n_in, bool),
        "col": 1,
        "sweeps": 0,
    }
    ref_tile, ref_st = copy.deepcopy(tile), copy.deepcopy(st)
    first = 1
    up, tr, reads = _reference(ref_tile, x, d, eta, first, every, rule, u, ref_st)
    state = ChopperState(
        st["H"],
        st["c_in"],
        st["c_out"],
        st["M"],
        st["Pref"],
        st["switched"],
        np.zeros(6),
        np.zeros((n_out, n_in), np.int64),
        np.zeros(n_in, bool),
    )
    res = chopped_transfer(tile, (1, 0), x, d, eta, rule, u, state, (first, every), (st["col"], st["sweeps"]))
    assert (res.update_pulses, res.transfer_pulses, res.reads) == (up, tr, reads)
    assert tr > 0 and reads == len(range(first, n, every))
    assert (res.col, res.sweeps) == (ref_st["col"], ref_st["sweeps"])
    for key in ("H", "c_in", "c_out", "M", "Pref", "switched"):
        assert np.array_equal(st[key], ref_st[key]), key
    for a, b in zip(tile.arrays, ref_tile.arrays):
        assert np.array_equal(a.w, b.w) and (a.counter, a.pulses) == (b.counter, b.pulses)
    assert (tile.stream.counter, tile.reads) == (ref_tile.stream.counter, ref_tile.reads)


@pytest.mark.parametrize(
    "cfg",
    [
        PeripheryConfig(),
        PeripheryConfig(out_bound=0.05, max_bm_reads=4),
        PeripheryConfig(inp_bits=None, out_bits=None, noise_management=False),
        PeripheryConfig.perfect(),
    ],
)
def test_one_hot_read_equals_analog_mvm(cfg):
    col = np.random.default_rng(2).normal(0, 0.1, 9).astype(np.float32)
    s1, s2 = Stream(4), Stream(4)
    out = np.empty(9, np.float32)
    for _ in range(3):
        s1.counter = read_one_hot(col, one_hot_settings(cfg), s1.seed, s1.counter, out)
        assert np.array_equal(out, analog_mvm(col[:, None], np.ones((1, 1), np.float32), cfg, s2)[0])
        assert s1.counter == s2.counter


def test_column_pulses_equal_the_pulse_kernel():
    tile = AnalogTile(6, 7, Linear(tau=1.0, dw_min=1e-2, c=0.1, dw_min_std=0.3, dw_min_dtod=0.2), seed=1)
    a = tile.arrays[0]
    counts = np.zeros((6, 7), np.int64)
    cols = np.array([1, 4, 5])
    counts[:, cols] = np.random.default_rng(0).integers(-3, 4, (6, 3))
    w = a.w.copy()
    n1 = pulse_kernel(a.w, counts, a.params.kernel, 9, 2)
    n2 = pulse_columns_kernel(w, counts, cols, a.params.kernel, 9, 2)
    assert n1 == n2 == np.abs(counts).sum() and np.array_equal(a.w, w)


def test_column_pulses_through_the_protocol_equal_the_array_pulse():
    """devices.array_update.pulse_array on a few columns (the kernel's writes into C) = ConductanceArray.pulse:
    weights, apparent weights under write noise, call counter and pulse count, which only devices change."""
    a = AnalogTile(6, 7, get_preset("aihwkit_reram_sb"), seed=1).arrays[0]
    b = copy.deepcopy(a)
    counts = np.zeros((6, 7), np.int64)
    cols = np.array([1, 4, 5])
    counts[:, cols] = np.random.default_rng(0).integers(-3, 4, (6, 3))
    n1 = a.pulse(counts)
    n2 = pulse_array(b.handle(), counts, cols)
    assert n1 == n2 == np.abs(counts).sum() and a.hidden is not None
    assert np.array_equal(a.w, b.w) and np.array_equal(a.hidden, b.hidden)
    assert (a.counter, a.pulses) == (b.counter, b.pulses) and a.pulses == n1
    with pytest.raises(AttributeError):
        a.counter = 0


def test_running_estimate_skips_values_at_zero():
    tau = 0.25
    out = running_estimate(np.array([0.0, 2.0, 0.0, 4.0, -1.0]), 0.0, tau)
    assert np.array_equal(out, [0.0, 2.0, 2.0, 0.75 * 2.0 + 0.25 * 4.0, 2.5])
