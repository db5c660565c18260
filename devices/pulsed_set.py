"""The set of elements a call pulsed, which write noise redraws: one bit per element.

A set is a uint64 array (out, ceil(in / 64)): bit j % 64 of word j // 64 of row i is element (i, j). A row
of 512 elements is 8 words, so `row_columns` lists a row's elements in column order with 8 word reads and
one bit scan per element: a sparse row (a small update pulses about 2% of the elements) costs little more
than its elements. `mark_list` adds an increasing list of columns a word at a time, the bits gathered in
a register: a large update marks 10^6 elements, and a read-modify-write of the set per element would chain
through memory. A set without rows (`NO_SET`) stands for "every element" where a kernel takes one, and
makes the expected-update kernel skip the marking.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from aimc.devices.bits import lowest_bit


@njit(cache=True)
def new_set(rows: int, cols: int, on: bool) -> np.ndarray:
    """An empty set for an (rows, cols) array; without rows where not `on`."""
    if not on:
        return np.zeros((0, 0), np.uint64)
    return np.zeros((rows, (cols + 63) // 64), np.uint64)


NO_SET = new_set(0, 0, False)
"""The set without rows: every element (redraw_kernel), no marking (the update kernels)."""


@njit(cache=True, inline="always")
def mark(pulsed, i, j) -> None:
    """Add element (i, j) to the set."""
    pulsed[i, j >> 6] |= uint64(1) << uint64(j & 63)


@njit(cache=True, inline="always")
def mark_list(pulsed, i, cols, n, index_mask) -> None:
    """Add the elements (i, cols[a] & index_mask) for a < n, the columns in increasing order."""
    word = np.int64(-1)
    bits = uint64(0)
    for a in range(n):
        j = np.int64(cols[a] & index_mask)
        if (j >> 6) != word:
            if word >= 0:
                pulsed[i, word] |= bits
            word = j >> 6
            bits = uint64(0)
        bits |= uint64(1) << uint64(j & 63)
    if word >= 0:
        pulsed[i, word] |= bits


@njit(cache=True)
def set_of_mask(mask: np.ndarray) -> np.ndarray:
    """The set of the nonzero elements of `mask` (out, in), any integer or boolean dtype."""
    rows, cols = mask.shape
    pulsed = new_set(rows, cols, True)
    for i in range(rows):
        for j in range(cols):
            if mask[i, j] != 0:
                mark(pulsed, i, j)
    return pulsed


@njit(cache=True, inline="always")
def row_columns(pulsed, i, out) -> int:
    """Write the columns of row i's elements to out in increasing order and return how many there are."""
    n = 0
    for k in range(pulsed.shape[1]):
        word = pulsed[i, k]
        while word != 0:
            out[n] = 64 * k + lowest_bit(word)
            word &= word - uint64(1)
            n += 1
    return n
