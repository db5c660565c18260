"""The counter-based random streams of the kernels (devices/rng.py): uniform and normal draws, the ziggurat's
tables, per-element bits, and draws on a state held in a local against those on a state array."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit
from scipy import stats

from aimc.devices.rng import (
    ZIG_K,
    ZIG_LAYERS,
    ZIG_R,
    ZIG_V,
    Stream,
    bits31_at,
    new_state,
    next_normal,
    next_uniform,
    normal_step,
)


@njit
def _normals(state, n):
    out = np.empty(n)
    for k in range(n):
        out[k] = next_normal(state)
    return out


@njit
def _uniforms(state, n):
    out = np.empty(n)
    for k in range(n):
        out[k] = next_uniform(state)
    return out


def test_generator_is_uniform_and_normal():
    u = _uniforms(new_state(1, 2, 3), 200_000)
    assert 0 < u.min() and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    z = _normals(new_state(1, 2, 3), 400_000)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / np.sqrt(z.size)
    assert z.var() == pytest.approx(1.0, abs=0.01)
    assert stats.kurtosis(z, fisher=False) == pytest.approx(3.0, abs=0.05)
    assert (np.abs(z) > 3.5).mean() == pytest.approx(2 * stats.norm.sf(3.5), rel=0.2)  # the ziggurat's tail
    z2 = _normals(new_state(1, 2, 4), 1000)
    assert abs(np.corrcoef(z[:1000], z2)[0, 1]) < 0.15  # streams of different indices are unrelated


def _strip_closure(r: float, v: float, layers: int) -> tuple[float, float]:
    """(v from its definition r f(r) + integral of f beyond r, area of the top strip) when strips of area v
    are stacked from the base edge r, f(x) = exp(-x^2/2); r closes the ziggurat when both equal v."""
    f = lambda x: math.exp(-0.5 * x * x)  # noqa: E731
    x = r
    for _ in range(layers - 2):
        x = math.sqrt(-2.0 * math.log(v / x + f(x)))
    return r * f(r) + math.sqrt(math.pi / 2) * math.erfc(r / math.sqrt(2)), x * (1.0 - f(x))


def test_ziggurat_tables_close():
    """The strip edge and area close the ziggurat: checked first on Marsaglia & Tsang's published 128-strip
    constants (J. Stat. Softw. 5(8), 2000), then on ours; the tables' fast-path share matches the rate
    ZIG_LAYERS' docstring gives."""
    for r, v, layers in ((3.442619855899, 9.91256303526217e-3, 128), (ZIG_R, ZIG_V, ZIG_LAYERS)):
        defined, top = _strip_closure(r, v, layers)
        assert defined == pytest.approx(v, rel=1e-12) and top == pytest.approx(v, rel=1e-8)
    slow = 1.0 - (np.minimum(ZIG_K, 2**31) / 2**31).mean()
    assert slow == pytest.approx(0.008, abs=0.0005)


@njit
def _bits31(key, n):
    out = np.empty(n, np.int64)
    for k in range(n):
        out[k] = bits31_at(key, k)
    return out


def test_bits31_are_uniform_and_unrelated_across_elements_and_keys():
    """bits31_at (the one-slot pulse trains' draws): uniform on [0, 2^31) by a KS test, no lag-1 or
    low-bit structure, and two keys give unrelated sequences."""
    key = new_state(1, 2, 3)[0]
    b = _bits31(key, 200_000)
    assert b.min() >= 0 and b.max() < 2**31
    u = (b + 0.5) / 2**31
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 5 / np.sqrt(u.size)
    assert abs((b & 1).mean() - 0.5) < 5 * 0.5 / np.sqrt(b.size)
    other = (_bits31(new_state(1, 2, 4)[0], 200_000) + 0.5) / 2**31
    assert abs(np.corrcoef(u, other)[0, 1]) < 5 / np.sqrt(u.size)


@njit
def _normals_local(s, n):
    out = np.empty(n)
    for k in range(n):
        out[k], s = normal_step(s)
    return out


def test_local_state_draws_and_stream_normals_are_the_ziggurat_draws():
    """normal_step on a state held in a local (the kernels) gives exactly next_normal's draws on a state
    array, tail draws included; Stream.normal is reproducible from its counter and standard normal."""
    want = _normals(new_state(1, 2, 3), 100_000)
    assert np.array_equal(_normals_local(new_state(1, 2, 3)[0], 100_000), want)
    assert (np.abs(want) > ZIG_R).any()  # the ziggurat's base-strip tail was taken
    s = Stream(9)
    z = s.normal((400, 300))
    assert abs(z.mean()) < 5 / np.sqrt(z.size) and z.std() == pytest.approx(1.0, abs=0.01)
    s.counter = 0
    assert np.array_equal(s.normal((400, 300)), z) and s.counter == 1
