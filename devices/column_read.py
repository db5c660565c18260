"""The read of one array column through a tile's forward periphery, for kernels that interleave reads with
updates (trainers.algorithms.chopped_kernel), and the tile's read stream whose counters those kernels advance.

A ColumnReader (AnalogTile.handles) carries the periphery's settings, the stream's seed and the tile's read
counters: an int64 array that `ReadStream` owns and `read_column` advances in place, so a read inside a
kernel and a read through AnalogTile.read_columns draw the same noise and count alike.
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from aimc.devices.periphery import PeripheryConfig, read_one_hot
from aimc.devices.rng import Stream

STREAM_COUNTER, READS = 0, 1
"""Entries of ReadStream.counts: the stream's call counter, the vector reads of the tile so far."""


class ReadStream(Stream):
    """A tile's read-noise stream (devices.rng.Stream) with the tile's read count beside its counter, both in
    `counts` (int64 (2,)), which kernels advance in place."""

    def __init__(self, seed: int):
        self.counts = np.zeros(2, np.int64)
        super().__init__(seed)

    @property
    def counter(self) -> int:
        return int(self.counts[STREAM_COUNTER])

    @counter.setter
    def counter(self, value: int) -> None:
        self.counts[STREAM_COUNTER] = value

    @property
    def reads(self) -> int:
        """Vector reads counted so far (forward, backward, column reads)."""
        return int(self.counts[READS])

    def count_reads(self, n: int) -> None:
        self.counts[READS] += int(n)


class ColumnReader(NamedTuple):
    """A tile's forward periphery as read_column takes it (from Python a plain tuple of these fields)."""

    periphery: tuple  # read_one_hot's settings: ideal, inp_bound, inp_bits, out_noise, out_bound, out_bits,
    #                   bound_management, reads (PeripheryConfig.bm_reads), nm_scale
    #                   (PeripheryConfig.one_hot_scale; bits 0: none)
    seed: int
    counts: np.ndarray  # ReadStream.counts, advanced in place


def one_hot_settings(cfg: PeripheryConfig) -> tuple:
    """The settings tuple of read_one_hot for the periphery `cfg`."""
    return (
        bool(cfg.ideal),
        float(cfg.inp_bound),
        int(cfg.inp_bits or 0),
        float(cfg.out_noise),
        float(cfg.out_bound),
        int(cfg.out_bits or 0),
        bool(cfg.bound_management),
        int(cfg.bm_reads),
        float(cfg.one_hot_scale),
    )


@njit(cache=True)
def read_column(reader: ColumnReader, col, out) -> None:
    """out = the read of column values col (out,) float32 (an array's w - reference) with a one-hot input
    (read_one_hot: the same as AnalogTile.read_columns of that column); counts one read."""
    periphery, seed, counts = reader
    counts[STREAM_COUNTER] = read_one_hot(col, periphery, seed, counts[STREAM_COUNTER], out)
    counts[READS] += 1
