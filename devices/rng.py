"""Counter-based random numbers for the Numba kernels.

Every kernel call draws from streams keyed by (seed, call counter, row or index), so a result depends on
the seed and on the order of calls, never on how many threads run the kernel. The generator is
SplitMix64 (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number generators"): a 64-bit state
advanced by a Weyl constant and a mixing function; normals come from the ziggurat method.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, uint64

GOLDEN = uint64(0x9E3779B97F4A7C15)
MIX1 = uint64(0xBF58476D1CE4E5B9)
MIX2 = uint64(0x94D049BB133111EB)
INV_2_53 = 1.0 / 9007199254740992.0


@njit(cache=True, inline="always")
def mix64(z: uint64) -> uint64:
    """SplitMix64 output function: a bijective 64-bit mixer."""
    z = (z ^ (z >> uint64(30))) * MIX1
    z = (z ^ (z >> uint64(27))) * MIX2
    return z ^ (z >> uint64(31))


@njit(cache=True, inline="always")
def stream_seed(seed: uint64, counter: uint64, index: uint64) -> uint64:
    """Start state of the stream for (seed, call counter, index)."""
    return mix64(mix64(seed ^ mix64(counter * GOLDEN + uint64(1))) + index * GOLDEN)


@njit(cache=True, inline="always")
def uniform_at(s: uint64) -> float:
    """The uniform float in (0, 1) of the state value s (draw k of a stream started at s0 is
    uniform_at(s0 + k GOLDEN), k >= 1: any draw can be computed without the ones before it)."""
    return ((mix64(s) >> uint64(11)) + 0.5) * INV_2_53


LOW32 = uint64(0xFFFFFFFF)


@njit(cache=True, inline="always")
def hash32(v: uint64) -> uint64:
    """Wellons' lowbias32 integer hash (the "hash prospector" search, 2018; bias 0.17) of the low 32 bits
    of v, a 32-bit value held in 64 bits: Numba widens 32-bit arithmetic, and in 64-bit vector lanes each
    32-bit product is one instruction where mix64's 64-bit products take several (AVX2 has no 64-bit
    vector multiply)."""
    v = v & LOW32
    v ^= v >> uint64(16)
    v = (v * uint64(0x7FEB352D)) & LOW32
    v ^= v >> uint64(15)
    v = (v * uint64(0x846CA68B)) & LOW32
    return v ^ (v >> uint64(16))


@njit(cache=True, inline="always")
def bits31_at(key: uint64, k: int) -> int:
    """31 random bits (0 <= value < 2^31) for element k of the stream keyed by the 64-bit state `key`: two
    hash32 rounds keyed by its two halves. Any element without the ones before it, at half the cost of
    uniform_at in a vectorized loop; for Bernoulli trials, where 2^-31 resolution is enough."""
    return np.int64(hash32(hash32(uint64(k) ^ (key & LOW32)) ^ (key >> uint64(32))) >> uint64(1))


@njit(cache=True, inline="always")
def uniform_step(s: uint64) -> tuple[float, uint64]:
    """(uniform float in (0, 1), next state) from state s. Kernels keep their stream's state in a local
    variable and thread it through these *_step functions, so it stays in a register: a state kept in
    memory put a store and a load on the dependency chain of every draw."""
    s = s + GOLDEN
    return uniform_at(s), s


@njit(cache=True, inline="always")
def next_uniform(state: np.ndarray) -> float:
    """Uniform float in (0, 1); `state` is a uint64 array of length 1 (new_state), advanced in place by
    GOLDEN. For Python-side loops and tests; kernels use uniform_step."""
    u, state[0] = uniform_step(state[0])
    return u


ZIG_LAYERS = 512
"""Strips of the ziggurat. Marsaglia & Tsang used 128, NumPy uses 256; each doubling halves the share of
draws that leave the fast path for the exponential in _normal_tail (2.8%, 1.5%, 0.8% for 128, 256, 512
layers), and a slow draw costs ~40 ns against ~1.5 ns: 512 layers take about 12% off a noisy pulse
(docs/performance.md). A draw's low 9 bits pick the strip and are also the lowest bits of its magnitude,
so a strip's points lie on a lattice of 2^-22 of its width (Doornik 2005 notes the shared bits)."""
ZIG_R = 3.852046150368391
"""Right edge of the base strip for ZIG_LAYERS strips, solved (by bisection) from the ziggurat's closing
condition: with every strip of area ZIG_V, the top strip of width x_1 has x_1 (1 - f(x_1)) = ZIG_V, for
f(x) = exp(-x^2 / 2) (test_ziggurat_tables_close checks it)."""
ZIG_V = ZIG_R * math.exp(-0.5 * ZIG_R**2) + math.sqrt(math.pi / 2) * math.erfc(ZIG_R / math.sqrt(2))
"""Common area of the strips: ZIG_R f(ZIG_R) plus the tail integral of f beyond ZIG_R."""


def _ziggurat_tables(
    layers: int = ZIG_LAYERS, r: float = ZIG_R, v: float = ZIG_V
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tables of Marsaglia & Tsang's ziggurat for the normal density (J. Stat. Softw. 5(8), 2000) with
    `layers` strips: k (fast-path bounds of a 31-bit magnitude), w (magnitude to x) and f (density at each
    strip's edge); r and v as ZIG_R and ZIG_V."""
    m = 2147483648.0
    k = np.zeros(layers, np.int64)
    w = np.zeros(layers)
    f = np.zeros(layers)
    q = v / np.exp(-0.5 * r * r)
    k[0], k[1] = int(r / q * m), 0
    w[0], w[-1] = q / m, r / m
    f[0], f[-1] = 1.0, np.exp(-0.5 * r * r)
    x_prev = r
    for i in range(layers - 2, 0, -1):
        x = np.sqrt(-2.0 * np.log(v / x_prev + np.exp(-0.5 * x_prev * x_prev)))
        k[i + 1] = int(x / x_prev * m)
        x_prev = x
        f[i] = np.exp(-0.5 * x * x)
        w[i] = x / m
    return k, w, f


ZIG_K, ZIG_W, ZIG_F = _ziggurat_tables()
ZIG_MASK = ZIG_LAYERS - 1


@njit(cache=True, inline="always")
def _int32_at(s: uint64) -> int:
    """Signed 32-bit integer in [-2^31, 2^31) from the top bits of the 64-bit output at state s."""
    return np.int64(mix64(s) >> uint64(32)) - 2147483648


@njit(cache=True)
def _normal_tail(s: uint64, hz: int, iz: int) -> tuple[float, uint64]:
    """Slow path of the ziggurat: the base strip's tail or a wedge test; returns (draw, next state)."""
    while True:
        x = hz * ZIG_W[iz]
        if iz == 0:
            while True:
                u1, s = uniform_step(s)
                u2, s = uniform_step(s)
                x = -math.log(u1) / ZIG_R
                y = -math.log(u2)
                if y + y >= x * x:
                    break
            return (ZIG_R + x if hz > 0 else -ZIG_R - x), s
        u, s = uniform_step(s)
        if ZIG_F[iz] + u * (ZIG_F[iz - 1] - ZIG_F[iz]) < math.exp(-0.5 * x * x):
            return x, s
        s = s + GOLDEN
        hz = _int32_at(s)
        iz = hz & ZIG_MASK
        if abs(hz) < ZIG_K[iz]:
            return hz * ZIG_W[iz], s


@njit(cache=True, inline="always")
def _ziggurat(hz: int, s: uint64) -> tuple[float, uint64]:
    """The standard normal of the signed 32-bit draw hz (its low 9 bits pick the strip); the state s
    feeds the slow path (0.8% of draws)."""
    iz = hz & ZIG_MASK
    if abs(hz) < ZIG_K[iz]:
        return hz * ZIG_W[iz], s
    return _normal_tail(s, hz, iz)


@njit(cache=True, inline="always")
def normal_step(s: uint64) -> tuple[float, uint64]:
    """(standard normal, next state) from state s by the ziggurat method (one 64-bit draw in 99.2% of
    calls); see uniform_step."""
    s = s + GOLDEN
    return _ziggurat(_int32_at(s), s)


@njit(cache=True, inline="always")
def next_normal(state: np.ndarray) -> float:
    """Standard normal draw; `state` is a uint64 array of length 1 (new_state), advanced in place. For
    Python-side loops and tests; kernels use normal_step."""
    x, state[0] = normal_step(state[0])
    return x


def new_state(seed: int, counter: int, index: int) -> np.ndarray:
    """A generator state for use from Python (tests, small loops)."""
    s = np.empty(1, np.uint64)
    s[0] = _stream_seed_py(np.uint64(seed), np.uint64(counter), np.uint64(index))
    return s


@njit(cache=True)
def _stream_seed_py(seed, counter, index):
    return stream_seed(uint64(seed), uint64(counter), uint64(index))


@njit(cache=True, parallel=True)
def normal_kernel(rows: int, cols: int, seed: int, counter: int) -> np.ndarray:
    """Standard normals (rows, cols); row i from stream (seed, counter, i)."""
    out = np.empty((rows, cols))
    for i in prange(rows):
        s = stream_seed(uint64(seed), uint64(counter), uint64(i))
        for j in range(cols):
            out[i, j], s = normal_step(s)
    return out


class Stream:
    """Counter-based draws for code outside the kernels: each `take()` returns the next call counter, and
    a kernel keys its streams by (seed, counter, index). The counter is the whole state: saving it and
    restoring it continues the same draws."""

    def __init__(self, seed: int):
        self.seed = int(seed) & 0x7FFFFFFFFFFFFFFF
        self.counter = 0

    def take(self) -> int:
        """The counter of the next call."""
        self.counter += 1
        return self.counter

    def normal(self, shape: tuple[int, ...]) -> np.ndarray:
        """Standard normals of `shape` (float64), from one kernel call."""
        shape = tuple(int(s) for s in shape)
        rows = shape[0] if len(shape) > 0 else 1
        cols = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        return normal_kernel(rows, cols, self.seed, self.take()).reshape(shape)
