"""Every random stream of aimc and how its seed derives from the run's seed: one place to read them.

A run is reproducible from its config seed because every draw comes from a stream whose key is fixed here.
Two kinds of stream:

- counter-based streams (`aimc.devices.rng.Stream` and the kernels' per-row draws), keyed by a 64-bit seed
  and a call counter: `stream_seed(owner_seed, KEY)`;
- numpy generators (`numpy.random.default_rng`) for draws made once or per step outside the kernels, seeded by
  a list of integers that names the stream.

The keys are arbitrary distinct constants; changing one changes every result that draws from its stream.
"""

from __future__ import annotations

import numpy as np

# counter-based streams: stream_seed(owner seed, key)
TILE_READS = 0x71E  # a tile's periphery: forward, backward and column reads
ARRAY_READS = 0xEAD  # an array's own reads and read noise
REFRESH_READS = 0x5F1  # a one-sided cell's refresh reads

# numpy generators: the key in the generator's seed list
ARRAY_SETUP = 0xD7D  # an array's device-to-device draw
DRIFT_START = 0xD71F7  # the drift exponents drawn when an array first idles
ZERO_SHIFT = 0x25F  # the random zero shift's pulse draws
RESET_DRAWS = 0x5E7  # Tiki-Taka / TTv2's with_reset_prob draws, per read column
CHOPPERS = 0xC40B  # c-TTv2 / AGAD's chopper switches
E_RIDER_CHOPPER = 0xE41D  # E-RIDER's chopper sign per tile
BOOTSTRAP = 0xB007  # calibration's bootstrap resamples
PROTOCOL = 0x5EC  # calibration's simulated measurement protocols
AUGMENT = 0xA06  # a training batch's random crops and flips

LAYER_STRIDE = 1000  # layer k of a converted model: seed * 1000 + k; tile k of a layer: its seed * 1000 + k
ARRAY_STRIDE = 1009  # array n of a tile: seed * 1009 + n
RECURRENT_SUB_LAYERS = 500  # cell j of a recurrent layer seeded s: W_ih layer_seed(s, 500 + 2j), W_hh that + 1


def layer_seed(seed: int, k: int) -> int:
    """The seed of layer k (module order) of a model converted with `seed`."""
    return int(seed) * LAYER_STRIDE + int(k)


def tile_seed(layer_seed: int, k: int) -> int:
    """The seed of tile k (row-major over the layer's tile grid) of a layer seeded `layer_seed`."""
    return int(layer_seed) * LAYER_STRIDE + int(k)


def array_seed(tile_seed: int, n: int) -> int:
    """The seed of array n of a tile (its device draw and pulses)."""
    return int(tile_seed) * ARRAY_STRIDE + int(n)


def one_sided_seeds(seed: int) -> tuple[int, int]:
    """The seeds of a one-sided cell's G- and G+ arrays (G- drawn first, as aihwkit)."""
    return 2 * int(seed), 2 * int(seed) + 1


def stream_seed(owner_seed: int, key: int) -> int:
    """The seed of the counter-based stream `key` of an object seeded `owner_seed`."""
    return (int(owner_seed) << 12) ^ key


def generator(*keys: int) -> np.random.Generator:
    """A numpy generator seeded by the list `keys` (a stream key and the numbers that select the draw)."""
    return np.random.default_rng(list(keys))
