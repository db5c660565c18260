"""devices.normals (the pulsed update's cycle noise) against numpy: bit casts, ln, sin/cos, the Box-Muller
stream recomputed in float64, and the normal law."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit
from scipy import stats

from aimc.devices.bits import bits_float, float_bits
from aimc.devices.normals import BLOCK, PAIRS, fill_normals, log_unit, sin_cos_octant


@njit
def _cast(a):
    bits = np.empty(a.shape[0], np.uint32)
    back = np.empty(a.shape[0], np.float32)
    for k in range(a.shape[0]):
        bits[k] = float_bits(a[k])
        back[k] = bits_float(bits[k])
    return bits, back


def test_bit_casts_are_numpys_views():
    a = np.array([0.0, -0.0, 1.0, -2.5, 3.4e38, 1e-45, np.inf, -np.inf], np.float32)
    bits, back = _cast(a)
    np.testing.assert_array_equal(bits, a.view(np.uint32))
    np.testing.assert_array_equal(back.view(np.uint32), a.view(np.uint32))


@njit
def _logs(u):
    out = np.empty_like(u)
    for k in range(u.shape[0]):
        out[k] = log_unit(u[k])
    return out


def test_log_unit_matches_numpy_to_float32_rounding():
    """Over (2^-32, 1], every binade: |error| below 2 float32 ulps of ln u (or 1.2e-7 near u = 1)."""
    rng = np.random.default_rng(0)
    u = np.exp2(-rng.uniform(0, 32, 200_000)).astype(np.float32)
    u = np.concatenate([u, np.float32([1.0, 0.5, 2.0**-32, np.sqrt(0.5), np.nextafter(np.float32(np.sqrt(2) / 2), 1)])])
    want = np.log(u.astype(np.float64))
    err = np.abs(_logs(u) - want)
    assert (err <= np.maximum(1.2e-7, 2 * np.spacing(np.abs(want).astype(np.float32)))).all()


@njit
def _sin_cos(y):
    s = np.empty_like(y)
    c = np.empty_like(y)
    for k in range(y.shape[0]):
        s[k], c[k] = sin_cos_octant(y[k])
    return s, c


def test_sin_cos_octant_matches_numpy():
    y = np.linspace(-0.5, 0.5, 100_001, dtype=np.float32)
    s, c = _sin_cos(y)
    t = y.astype(np.float64) * np.pi / 2
    assert np.abs(s - np.sin(t)).max() < 1.5e-7
    assert np.abs(c - np.cos(t)).max() < 1.5e-7


MASK64 = (1 << 64) - 1


def _mix64(z: int) -> int:
    """SplitMix64's output function (Steele, Lea, Flood 2014) in Python integers."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def _box_muller(key: int, n: int) -> np.ndarray:
    """The stream's first n normals (n a multiple of BLOCK) in float64, from the layout in devices.normals:
    pair k from mix64(key + k GOLDEN); u from its top 31 bits, the angle from bits 3-31 of its low half,
    bits 0-2 the square's symmetry; normal 32 b + l is the first of pair 16 b + l (l < 16), else the
    second of pair 16 b + l - 16."""
    out = np.empty(n)
    for k in range(n // 2):
        h = _mix64((key + k * 0x9E3779B97F4A7C15) & MASK64)
        low = h & 0xFFFFFFFF
        u = ((h >> 33) + 0.5) * 2.0**-31
        r = math.sqrt(-2 * math.log(u))
        signed = (low & 0xFFFFFFF8) - (1 << 32 if low >= 1 << 31 else 0)
        theta = signed * 2.0**-32 * math.pi / 2
        a, b = math.cos(theta), math.sin(theta)
        if low & 4:
            a, b = b, a
        a = -a if low & 1 else a
        b = -b if low & 2 else b
        blk, lane = divmod(k, PAIRS)
        out[BLOCK * blk + lane] = r * a
        out[BLOCK * blk + PAIRS + lane] = r * b
    return out


def test_fill_normals_is_box_muller_of_the_stream_in_float64():
    key = 0x0123456789ABCDEF
    got = np.empty(4 * BLOCK, np.float32)
    fill_normals(got, 0, got.size, np.uint64(key), 0)
    np.testing.assert_allclose(got, _box_muller(key, 4 * BLOCK), rtol=1e-6, atol=1e-6)


def test_a_normal_depends_on_its_index_not_on_the_fills():
    """Normals 64..159 in one call, or as 32 + 64 from other ring positions: the same values."""
    key = np.uint64(77)
    whole = np.empty(96, np.float32)
    fill_normals(whole, 0, 96, key, 64)
    parts = np.zeros(200, np.float32)
    fill_normals(parts, 100, 32, key, 64)
    fill_normals(parts, 10, 64, key, 96)
    np.testing.assert_array_equal(np.concatenate([parts[100:132], parts[10:74]]), whole)
    other = np.empty(96, np.float32)
    fill_normals(other, 0, 96, np.uint64(78), 64)
    assert not np.isin(other, whole).any()


def test_fill_normals_are_standard_normal():
    """2^21 draws: the normal law by KS, moments (1, 3, 15), the 3.5-sigma tail; both normals of a pair
    normal and uncorrelated; none beyond sqrt(2 ln 2^32) (u >= 2^-32)."""
    z32 = np.empty(1 << 21, np.float32)
    fill_normals(z32, 0, z32.size, np.uint64(2024), 0)
    z = z32.astype(np.float64)
    n = z.size
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / np.sqrt(n)
    assert (z**2).mean() == pytest.approx(1.0, abs=5 * np.sqrt(2 / n))
    assert (z**4).mean() == pytest.approx(3.0, abs=5 * np.sqrt(96 / n))
    assert (z**6).mean() == pytest.approx(15.0, abs=5 * np.sqrt((10395 - 225) / n))
    assert (np.abs(z) > 3.5).mean() == pytest.approx(2 * stats.norm.sf(3.5), rel=0.2)
    blocks = z.reshape(-1, BLOCK)
    firsts, seconds = blocks[:, :PAIRS].ravel(), blocks[:, PAIRS:].ravel()
    for half in (firsts, seconds):
        assert stats.kstest(half, "norm").pvalue > 1e-3
    assert abs(np.corrcoef(firsts, seconds)[0, 1]) < 5 / np.sqrt(n / 2)
    assert abs(np.corrcoef(firsts**2, seconds**2)[0, 1]) < 5 / np.sqrt(n / 2)  # independent, not only uncorrelated
    assert np.abs(z).max() <= math.sqrt(2 * 32 * math.log(2))
