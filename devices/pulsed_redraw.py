"""Write noise after a pulsed update: the apparent weight of every element that received a pulse is redrawn,
app = w + std xi, row by row (redraw_pulsed_row), bit-identical to devices.effects.redraw_kernel with the
update's pulsed set. devices.coincidences' row loops call it after the pulses of a row."""

from __future__ import annotations

import numpy as np
from numba import njit, uint32, uint64

from aimc.devices.bits import lowest_bit
from aimc.devices.effects import WRITE, row_key
from aimc.devices.normals import BLOCK, fill_normals
from aimc.devices.prefetch import PREFETCH_PULSES, prefetch
from aimc.devices.pulse_trains import INDEX
from aimc.devices.pulsed_set import mark_list, new_set, row_columns


@njit(cache=True)
def row_samples(d_masks, rows: int) -> np.ndarray:
    """The samples whose d train fires on each row: bit b % 64 of word (b // 64, i) is set where d_masks[b, i]
    is not 0. One pass along d_masks' rows, which vectorizes, where a walk of each row's samples down a column
    of d_masks takes one strided load per sample and row: the small update's redraw (512 x 512, batch 64,
    warm caches, one thread) takes 0.041 ms with this pass and 0.054 ms with that walk (Zen 4, 2026-12-05)."""
    batch = d_masks.shape[0]
    samples = np.zeros(((batch + 63) // 64, rows), np.uint64)
    for b in range(batch):
        bit = uint64(1) << uint64(b & 63)
        word = samples[b >> 6]
        masks = d_masks[b]
        for i in range(rows):
            word[i] |= bit if masks[i] != 0 else uint64(0)
    return samples


@njit(cache=True)
def redraw_work(n: int, d_masks, rows: int, cols: int) -> tuple:
    """Work arrays of n redraw_pulsed_row callers for an (rows, cols) array: one-row pulsed sets
    (devices.pulsed_set, each caller's a row of one set), normals (n, cols + BLOCK) float32, columns (n, cols)
    int64, and the rows' samples (row_samples)."""
    return (
        new_set(n, cols, True),
        np.empty((n, cols + BLOCK), np.float32),
        np.empty((n, cols), np.int64),
        row_samples(d_masks, rows),
    )


@njit(cache=True, inline="always")
def _one_list(i, samples, d_masks) -> tuple:
    """(sample, slot) of row i's only coincidence list, or (-1, -1) where its d train fires in more than
    one slot of the update (row_samples gives the samples)."""
    sample = -1
    for q in range(samples.shape[0]):
        active = samples[q, i]
        if active != 0:
            if sample >= 0 or active & (active - uint64(1)) != 0:
                return -1, -1
            sample = 64 * q + lowest_bit(active)
    if sample < 0:
        return -1, -1
    md = d_masks[sample, i]
    if md & (md - uint32(1)) != 0:
        return -1, -1
    return sample, lowest_bit(md)


@njit(cache=True, inline="always")
def _pulsed_columns(i, rows, r, js, samples, x_lists, x_counts, d_masks) -> int:
    """Write the columns that row i's coincidences pulsed to js, in increasing order, and return how many.
    A row pulsed from one slot list, as most rows of a small update are, takes that list: the redraw of
    row_samples' example took 0.038 ms merging every row's lists and 0.033 ms so. The other rows merge their
    lists in row r of the one-row set `rows` (left empty)."""
    b, t = _one_list(i, samples, d_masks)
    if b >= 0:
        cols = x_lists[b, t]
        count = x_counts[b, t]
        for k in range(count):
            js[k] = cols[k] & INDEX
        return count
    for q in range(samples.shape[0]):
        active = samples[q, i]
        while active != 0:
            b = 64 * q + lowest_bit(active)
            active &= active - uint64(1)
            md = d_masks[b, i]
            while md != 0:
                t = lowest_bit(md)
                md &= md - uint32(1)
                mark_list(rows, r, x_lists[b, t], x_counts[b, t], INDEX)
    count = row_columns(rows, r, js)
    for k in range(rows.shape[1]):
        rows[r, k] = 0
    return count


@njit(cache=True, inline="always")
def redraw_pulsed_row(i, rows, r, xi, js, samples, x_lists, x_counts, d_masks, app, w, wn, seed, wn_counter) -> None:
    """Write noise of row i after its pulses: app[i, j] = w[i, j] + wn[0, 0] xi for every column j that the
    coincidences fired at least once, exactly as devices.effects.redraw_kernel with the pulsed set and
    counter wn_counter. Row r of the set `rows` is the caller's (empty; left empty), xi and js work arrays,
    samples the rows' samples (row_samples). One walk per row: cheaper than marking a set of every row and
    redrawing it in a kernel of its own (devices/pulsed_set.py)."""
    count = _pulsed_columns(i, rows, r, js, samples, x_lists, x_counts, d_masks)
    if count <= PREFETCH_PULSES:  # the apparent weights' lines load while the normals are drawn
        for k in range(count):
            prefetch(app, i, js[k])
    fill_normals(xi, 0, (count + BLOCK - 1) // BLOCK * BLOCK, row_key(seed, wn_counter, WRITE, i), 0)
    std = wn[0, 0]
    for k in range(count):
        app[i, js[k]] = np.float32(w[i, js[k]] + std * xi[k])
