"""Float32 standard normals from a loop that vectorizes: the pulsed update's cycle-to-cycle noise.

Box and Muller (Ann. Math. Statist. 29, 1958): for u uniform in (0, 1] and an angle phi uniform on the
circle, r = sqrt(-2 ln u) gives two independent standard normals r cos(phi) and r sin(phi). Each pair
comes from one 64-bit output of a SplitMix64 stream (devices.rng.mix64 of key + k GOLDEN, pair k):
- its top 31 bits give u = (v + 1/2) 2^-31, so |normal| <= sqrt(2 ln 2^32) = 6.66;
- bits 3-31 give an angle theta in [-pi/4, pi/4) (29 bits), bits 0-2 one of the 8 symmetries of the
  square: bit 2 swaps (cos theta, sin theta), bits 0 and 1 flip their signs. The 8 images of a quarter arc
  cover the circle evenly, so phi is uniform.
ln and sin/cos are polynomials here, not libm calls, so LLVM vectorizes the loop (16 float32 lanes with
AVX-512): about 0.7 ns per normal on a Zen 4 core, against 1.5-2 ns for a ziggurat draw made inline in
the pulse loop (docs/performance.md).

Stream layout: normals come in blocks of BLOCK = 32; normal 32 b + l of a stream is the first normal of
pair 16 b + l for l < 16 and the second normal of pair 16 b + l - 16 otherwise. A normal's value depends
only on (key, its index), not on how many blocks one call fills.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, uint32, uint64

from aimc.devices.bits import bits_float, float_bits
from aimc.devices.rng import GOLDEN, mix64

BLOCK = 32
"""Normals per block of the stream (fill_normals fills whole blocks): 16 pairs, one AVX-512 vector of
float32. With blocks of 16 LLVM unrolled the 8-pair loop instead of vectorizing it: 4.3 ns per normal."""
PAIRS = BLOCK // 2

LN2 = np.float32(math.log(2.0))
SQRT2 = np.float32(math.sqrt(2.0))
HALF_PI = np.float32(math.pi / 2)


def _log1p_coefficients(degree: int = 9) -> tuple[np.float32, ...]:
    """Coefficients c_0..c_(degree-2) of log1p(f) = f + f^2 (c_0 + c_1 f + ...) on
    f in [sqrt(1/2) - 1, sqrt(2) - 1], by least squares on 2000 Chebyshev nodes. Degree 9: at most
    2.2e-8 from log1p in float64, below float32's rounding (6e-8)."""
    a, b = math.sqrt(0.5) - 1.0, math.sqrt(2.0) - 1.0
    f = (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (np.arange(2000) + 0.5) / 2000)
    c = np.polynomial.polynomial.polyfit(f, (np.log1p(f) - f) / f**2, degree - 2)
    return tuple(np.float32(v) for v in c)


L0, L1, L2, L3, L4, L5, L6, L7 = _log1p_coefficients()
FASTMATH = {"contract"}
"""Let LLVM fuse a * b + c into one FMA instruction (halves the polynomials' cost), nothing else."""


@njit(cache=True, inline="always", fastmath=FASTMATH)
def log_unit(u):
    """ln u for a float32 u in (0, 1] (normal, not subnormal), as float32: u = m 2^e with m in
    [sqrt(1/2), sqrt(2)), ln u = log1p(m - 1) + e ln 2 (absolute error ~1e-7)."""
    bits = float_bits(u)
    e = np.float32(np.int32(bits >> uint32(23))) - np.float32(127.0)
    m = bits_float((bits & uint32(0x007FFFFF)) | uint32(0x3F800000))  # in [1, 2)
    big = m > SQRT2
    m = m * np.float32(0.5) if big else m
    e = e + np.float32(1.0) if big else e
    f = m - np.float32(1.0)
    p = L7
    p = p * f + L6
    p = p * f + L5
    p = p * f + L4
    p = p * f + L3
    p = p * f + L2
    p = p * f + L1
    p = p * f + L0
    return (f + f * f * p) + e * LN2


@njit(cache=True, inline="always", fastmath=FASTMATH)
def sin_cos_octant(y):
    """(sin theta, cos theta) for theta = y pi/2, y in [-1/2, 1/2) (|theta| <= pi/4), float32: Taylor
    series to theta^9 and theta^8 (truncation below 3e-8)."""
    t = y * HALF_PI
    t2 = t * t
    s = np.float32(1.0 / 362880.0)
    s = s * t2 - np.float32(1.0 / 5040.0)
    s = s * t2 + np.float32(1.0 / 120.0)
    s = s * t2 - np.float32(1.0 / 6.0)
    s = (s * t2) * t + t
    c = np.float32(1.0 / 40320.0)
    c = c * t2 - np.float32(1.0 / 720.0)
    c = c * t2 + np.float32(1.0 / 24.0)
    c = c * t2 - np.float32(0.5)
    c = c * t2 + np.float32(1.0)
    return s, c


@njit(cache=True, fastmath=FASTMATH)
def fill_normals(out, start, count, key, first) -> None:
    """out[start:start + count] = normals first .. first + count - 1 of the stream keyed by the 64-bit
    `key` (float32); first and count multiples of BLOCK."""
    for blk in range(count // BLOCK):
        base = start + BLOCK * blk
        firsts = out[base : base + PAIRS]  # two slices: LLVM vectorizes two stores into distinct arrays
        seconds = out[base + PAIRS : base + BLOCK]
        pair0 = first // 2 + PAIRS * blk
        for k in range(PAIRS):
            h = mix64(key + uint64(pair0 + k) * GOLDEN)
            v = uint32(h >> uint64(33))
            bits = uint32(h)
            u = (np.float32(np.int32(v)) + np.float32(0.5)) * np.float32(2.0**-31)
            r = math.sqrt(np.float32(-2.0) * log_unit(u))
            s, c = sin_cos_octant(np.float32(np.int32(bits & uint32(0xFFFFFFF8))) * np.float32(2.0**-32))
            swap = (bits & uint32(4)) != 0
            a = s if swap else c
            b = c if swap else s
            firsts[k] = bits_float(float_bits(r * a) ^ (bits << uint32(31)))
            seconds[k] = bits_float(float_bits(r * b) ^ ((bits & uint32(2)) << uint32(30)))
