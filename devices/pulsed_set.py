"""The set of elements a call pulsed, which write noise redraws: a byte mask read eight elements at a time.

A set is a uint8 mask (out, in rounded up to a multiple of 8), 1 where an element is in the set. Viewed
as 64-bit words, a row of 512 elements is 64 words: `row_columns` lists its elements in column order with
one bit scan per element, so a sparse row (a small update pulses about 2% of the elements) costs its
words and its elements, not a pass over 512 bytes. A
set without rows (`NO_SET`) stands for "every element" where a kernel takes one, and makes the update
kernels skip the marking.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from aimc.devices.bits import lowest_bit


@njit(cache=True)
def new_set(rows: int, cols: int, on: bool) -> np.ndarray:
    """An empty set for an (rows, cols) array; without rows where not `on`."""
    if not on:
        return np.zeros((0, 0), np.uint8)
    return np.zeros((rows, (cols + 7) // 8 * 8), np.uint8)


NO_SET = new_set(0, 0, False)
"""The set without rows: every element (redraw_kernel), no marking (the update kernels)."""


@njit(cache=True)
def set_of_mask(mask: np.ndarray) -> np.ndarray:
    """The set of the nonzero elements of `mask` (out, in), any integer or boolean dtype."""
    rows, cols = mask.shape
    pulsed = new_set(rows, cols, True)
    for i in range(rows):
        for j in range(cols):
            if mask[i, j] != 0:
                pulsed[i, j] = 1
    return pulsed


@njit(cache=True, inline="always")
def row_columns(words, i, out) -> int:
    """Write the columns of row i's elements to out in increasing order and return how many there are;
    `words` is the set viewed as 64-bit words (pulsed.view(np.uint64))."""
    n = 0
    for k in range(words.shape[1]):
        word = words[i, k]
        while word != 0:
            out[n] = 8 * k + (lowest_bit(word) >> 3)  # each element is one byte holding 0 or 1
            word &= word - uint64(1)
            n += 1
    return n
