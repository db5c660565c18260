"""Counter-based random numbers for the Numba kernels.

Every kernel call draws from streams keyed by (seed, call counter, row or index), so a result depends on
the seed and on the order of calls, never on how many threads run the kernel. The generator is
SplitMix64 (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number generators"): a 64-bit state
advanced by a Weyl constant and a mixing function; normals come from the Box-Muller transform with the
second value cached.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

GOLDEN = uint64(0x9E3779B97F4A7C15)
MIX1 = uint64(0xBF58476D1CE4E5B9)
MIX2 = uint64(0x94D049BB133111EB)
TWO_PI = 2.0 * np.pi
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
def next_uniform(state: np.ndarray) -> float:
    """Uniform float in (0, 1); `state` is a uint64 array of length 1, advanced in place."""
    state[0] += GOLDEN
    z = mix64(state[0])
    return ((z >> uint64(11)) + 0.5) * INV_2_53


@njit(cache=True, inline="always")
def next_normal(state: np.ndarray, cache: np.ndarray) -> float:
    """Standard normal draw; `cache` is a float64 array [value, has_value] holding Box-Muller's spare."""
    if cache[1] != 0.0:
        cache[1] = 0.0
        return cache[0]
    u1 = next_uniform(state)
    u2 = next_uniform(state)
    r = np.sqrt(-2.0 * np.log(u1))
    cache[0] = r * np.sin(TWO_PI * u2)
    cache[1] = 1.0
    return r * np.cos(TWO_PI * u2)


def new_state(seed: int, counter: int, index: int) -> tuple[np.ndarray, np.ndarray]:
    """A (state, normal cache) pair for use from Python (tests, small loops)."""
    s = np.empty(1, np.uint64)
    s[0] = _stream_seed_py(np.uint64(seed), np.uint64(counter), np.uint64(index))
    return s, np.zeros(2)


@njit(cache=True)
def _stream_seed_py(seed, counter, index):
    return stream_seed(uint64(seed), uint64(counter), uint64(index))
