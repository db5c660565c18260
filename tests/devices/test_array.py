"""ConductanceArray and AnalogTile: programming, zero shift, state round trips."""

from __future__ import annotations

import copy

import numba
import numpy as np
import pytest

from aimc.devices import AnalogTile, ConductanceArray, PeripheryConfig, UpdateConfig, parse_device
from aimc.devices.response_step import DW_DOWN, DW_UP, N_ELEMENT_PARAMS, W_MAX, W_MIN

CONST = dict(
    kind="ConstantStep",
    dw_min=2e-3,
    dw_min_std=0.0,
    dw_min_dtod=0.0,
    up_down_dtod=0.0,
    w_max=1.0,
    w_min=-1.0,
    w_max_dtod=0.0,
    w_min_dtod=0.0,
)


@pytest.mark.parametrize(
    "cfg,tol",
    [
        (CONST, None),
        (dict(CONST, dw_min_std=0.2, dw_min_dtod=0.2, up_down_dtod=0.05), None),
        (dict(kind="SoftBounds", dw_min=2e-3, dw_min_std=0.1, w_max_dtod=0.1, w_min_dtod=0.1), 3e-3),
    ],
)
def test_program_reaches_the_target(cfg, tol):
    dev = parse_device(cfg)
    a = ConductanceArray(20, 30, dev, seed=1)
    lo, hi = a.bounds
    target = np.random.default_rng(0).uniform(-0.25, 0.25, a.shape).astype(np.float32)
    assert np.all((target > lo) & (target < hi))
    res = a.program(target, max_iters=60, tolerance=tol)
    tol = cfg["dw_min"] / 2 if tol is None else tol
    np.testing.assert_allclose(res, target - a.weights)
    assert np.abs(res).max() < tol + 1e-6


def test_program_with_read_noise_leaves_a_residual_of_that_order():
    a = ConductanceArray(20, 30, parse_device(CONST), seed=1)
    target = np.random.default_rng(0).uniform(-0.4, 0.4, a.shape).astype(np.float32)
    res = a.program(target, max_iters=20, read_noise_std=0.01)
    assert 1e-3 < np.abs(res).mean() < 0.03


def test_zero_shift_makes_the_effective_weight_zero_at_the_symmetric_point():
    dev = parse_device(dict(kind="SoftBounds", up_down=0.05, up_down_dtod=0.05, dw_min=1e-3, dw_min_std=0.0))
    a = ConductanceArray(8, 8, dev, seed=2)
    ref = a.zero_shift(n_cycles=20_000)
    assert np.array_equal(ref, a.reference) and np.all(a.weights == 0)
    # in the shifted coordinates G(0) ~ 0: up and down steps agree to the order of one step's change
    # (within one step of w_sym: |q+ - q-| dw_min <= slope of the difference times one step)
    ep = a.params.ep
    slope = ep[..., DW_UP] / ep[..., W_MAX] - ep[..., DW_DOWN] / ep[..., W_MIN]
    bound = slope * np.maximum(ep[..., DW_UP], ep[..., DW_DOWN])
    assert np.all(np.abs(a.element_steps(True) - a.element_steps(False)) <= 1.01 * bound)
    assert a.pulses == 2 * 20_000 * 64
    # a noisy read of the reference leaves a residual of the read noise
    b = ConductanceArray(8, 8, dev, seed=2)
    b.zero_shift(n_cycles=20_000, read_noise_std=0.01)
    assert np.std(b.weights) == pytest.approx(0.01, rel=0.3)


def _exercise(a: ConductanceArray, rng: np.random.Generator) -> list[np.ndarray]:
    x = rng.normal(0, 0.5, (8, a.shape[1])).astype(np.float32)
    d = rng.normal(0, 0.05, (8, a.shape[0])).astype(np.float32)
    a.update(x, d, 0.1, UpdateConfig(mode="pulsed"))
    a.update(x, d, 0.1, UpdateConfig(mode="expected"))
    a.pulse(rng.integers(-3, 4, a.shape))
    y = a.read(x)  # noisy periphery: consumes the read generator
    return [a.w.copy(), y, a.read_weights(0.01)]


def test_state_dict_round_trip_continues_bit_exactly():
    dev = parse_device(dict(kind="SoftBounds", dw_min_std=0.3))
    a = ConductanceArray(24, 32, dev, seed=5)
    _exercise(a, np.random.default_rng(0))
    state = a.state_dict()
    first = _exercise(a, np.random.default_rng(1))
    b = ConductanceArray(24, 32, dev, seed=5)
    b.load_state_dict(state)
    second = _exercise(b, np.random.default_rng(1))
    for u, v in zip(first, second):
        assert np.array_equal(u, v)
    assert a.pulses == b.pulses and a.counter == b.counter
    with pytest.raises(ValueError, match="shape"):
        ConductanceArray(2, 2, dev).load_state_dict(state)


def test_tile_weight_is_the_gain_weighted_sum_and_round_trips():
    dev = parse_device(dict(kind="SoftBounds", dw_min_std=0.3))
    t = AnalogTile(12, 16, dev, gains=(1.0, 0.25), seed=3)
    rng = np.random.default_rng(0)
    for a in t.arrays:
        a.pulse(rng.integers(-50, 51, a.shape))
    np.testing.assert_allclose(t.weight(), t.arrays[0].weights + 0.25 * t.arrays[1].weights, rtol=1e-6)
    assert not np.array_equal(t.arrays[0].params.ep, t.arrays[1].params.ep)  # arrays draw their own devices
    cols = t.read_columns(1, np.array([0, 5]))
    np.testing.assert_allclose(cols, t.arrays[1].weights[:, [0, 5]].T, atol=0.3)
    state = t.state_dict()
    x = rng.normal(0, 1, (4, 16)).astype(np.float32)
    d = rng.normal(0, 0.05, (4, 12)).astype(np.float32)
    t.update(x, d, 0.1, index=1)
    first = (t.forward(x), t.backward(d), t.weight())
    u = AnalogTile(12, 16, dev, gains=(1.0, 0.25), seed=3)
    u.load_state_dict(state)
    u.update(x, d, 0.1, index=1)
    second = (u.forward(x), u.backward(d), u.weight())
    for p, q in zip(first, second):
        assert np.array_equal(p, q)
    assert t.pulses == u.pulses and t.reads == u.reads


def test_tile_forward_uses_the_periphery():
    dev = parse_device(dict(kind="ideal", tau=1.0, dw_min=0.01))
    t = AnalogTile(5, 7, dev, forward=PeripheryConfig.perfect(), backward=PeripheryConfig.perfect())
    t.arrays[0].pulse(np.random.default_rng(0).integers(-20, 21, (5, 7)))
    x = np.random.default_rng(1).normal(0, 1, (3, 7)).astype(np.float32)
    assert np.array_equal(t.forward(x), x @ t.weight().T)
    assert t.reads == 3


def test_array_rejects_wrong_shapes():
    a = ConductanceArray(4, 5, parse_device(CONST))
    with pytest.raises(ValueError, match="shape"):
        a.pulse(np.ones((5, 4), np.int64))
    with pytest.raises(ValueError, match="samples"):
        a.update(np.ones((3, 5)), np.ones((2, 4)), 0.1)
    with pytest.raises(ValueError, match="shape"):
        a.program(np.zeros((3, 3)))
    assert a.params.ep.shape == (4, 5, N_ELEMENT_PARAMS)


def test_a_device_without_spread_shares_one_parameter_row_and_updates_alike():
    """No device-to-device spread: ep is a read-only zero-stride view of one row, and every kernel gives
    the same weights as with a full per-element copy of it (and a spread keeps a per-element array)."""
    dev = parse_device(dict(kind="power", gamma=1.0, tau=0.6, dw_min=1e-3, dw_min_std=0.1))
    shared = ConductanceArray(16, 24, dev, seed=3)
    ep = shared.params.ep
    assert ep.shape == (16, 24, N_ELEMENT_PARAMS) and ep.strides[:2] == (0, 0) and not ep.flags.writeable
    full = ConductanceArray(16, 24, dev, seed=3)
    full.params.ep = np.empty(ep.shape, np.float32)[..., ::-1]  # per-element, laid out as a spread array's
    full.params.ep[...] = ep
    full.params.ep.flags.writeable = False
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, (8, 24)).astype(np.float32)
    d = rng.normal(0, 0.05, (8, 16)).astype(np.float32)
    counts = rng.integers(-3, 4, (16, 24))
    for a in (shared, full):
        a.update(x, d, 0.1, UpdateConfig(mode="pulsed"))
        a.update(x, d, 0.1, UpdateConfig(mode="expected"))
        a.pulse(counts)
        a.zero_shift(n_cycles=50)
    assert shared.pulses == full.pulses > 0
    np.testing.assert_array_equal(shared.w, full.w)
    np.testing.assert_array_equal(shared.symmetric_points(), full.symmetric_points())
    spread = ConductanceArray(16, 24, parse_device(dict(kind="power", gamma=1.0, tau_dtod=0.1)), seed=3)
    assert min(spread.params.ep.strides[:2]) > 0


def test_every_array_gives_the_kernels_one_parameter_type():
    """Shared or per-element parameters, any shape: one Numba type (float32, 3-d, 'A', read-only), so each
    kernel compiles once per cold cache, not once per layout."""
    types = {
        numba.typeof(
            ConductanceArray(*shape, parse_device(dict(kind="SoftBounds", dw_min_dtod=spread)), seed=1).params.ep
        )
        for shape in [(1, 1), (1, 7), (5, 1), (6, 9)]
        for spread in (0.0, 0.3)
    }
    arrays = [
        ConductanceArray(3, 4, parse_device(dict(kind="SoftBounds", dw_min_dtod=spread)), seed=1)
        for spread in (0.0, 0.3)
    ]
    types |= {numba.typeof(copy.deepcopy(a).params.ep) for a in arrays}  # a deep copy keeps the layout
    assert types == {numba.types.Array(numba.float32, 3, "A", readonly=True)}
    for a in arrays:
        np.testing.assert_array_equal(copy.deepcopy(a).params.ep, a.params.ep)
