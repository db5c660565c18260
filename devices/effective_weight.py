"""The forward weight of a tile: a weighted sum of its arrays' effective weights."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def effective_weight_kernel(out, ws, refs, gains) -> None:
    """out = sum_n gains[n] (ws[n] - refs[n]) in float32, arrays of gain 0 skipped (a tile's forward
    weight); ws, refs: tuples of (out, in) float32 arrays, gains float32."""
    rows, cols = out.shape
    for i in prange(rows):
        for j in range(cols):
            acc = np.float32(0.0)
            for n in range(len(ws)):
                if gains[n] != 0:
                    acc += gains[n] * (ws[n][i, j] - refs[n][i, j])
            out[i, j] = acc
