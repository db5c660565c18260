"""The update protocol of one conductance array: the pulsed or expected update W -= lr d^T x and single pulses
into chosen columns, each with its order of the array's call counter, the write-noise redraw and the pulse
count. ConductanceArray's update and pulse call it, and so do kernels of other layers that interleave an
array's updates with reads and pulses (trainers.algorithms.chopped_kernel), so both give the same weights.

An array enters as an ArrayHandle (ConductanceArray.handle, a plain tuple of its fields from Python:
devices.kernel_bundles): its weight arrays, element parameters, seed and its counters, an int64 array that
these functions advance in place (the array's `counter` and `pulses` read it).
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from aimc.devices.effects import WRITE, redraw_kernel
from aimc.devices.expected_update import expected_update_kernel
from aimc.devices.kernel_bundles import ElementKernelParams
from aimc.devices.pulse_trains import SLOTS, clip_to_probability, plan_kernel
from aimc.devices.pulsed_set import new_set, set_of_mask
from aimc.devices.pulsed_update import pieces_update_kernel, pulsed_update_kernel
from aimc.devices.pulses import pulse_columns_kernel, pulse_kernel

COUNTER, PULSES = 0, 1
"""Entries of ArrayHandle.counts: the call counter that keys the array's random streams, the pulses fired."""


class ArrayHandle(NamedTuple):
    """A conductance array as the update protocol takes it (ConductanceArray.handle)."""

    w: np.ndarray  # (out, in) float32: the weights pulses move (the hidden ones under write noise)
    app: np.ndarray  # the apparent weights reads see (w itself without write noise)
    reference: np.ndarray  # the zero-shift reference: a read sees app - reference
    wn: np.ndarray  # write-noise std as a (1, 1) float32 array; effects.NO_WRITE_NOISE without write noise
    params: ElementKernelParams
    granularity: float  # weight change one pulse counts for (DeviceBase.granularity)
    seed: int
    counts: np.ndarray  # int64 (2,): COUNTER, PULSES; advanced in place


@njit(cache=True)
def next_counter(a: ArrayHandle) -> int:
    """Advance the array's call counter and return it (the key of one call's random streams)."""
    a.counts[COUNTER] += 1
    return a.counts[COUNTER]


@njit(cache=True)
def _redraw_written(a: ArrayHandle, pulsed) -> None:
    """Write noise after a call: app = w + std xi for the elements of the set `pulsed` (devices.pulsed_set)."""
    redraw_kernel(
        a.app, a.w, pulsed, np.broadcast_to(a.wn, a.app.shape), a.app, a.app, False, a.seed, next_counter(a), WRITE
    )


@njit(cache=True)
def update_array(a: ArrayHandle, x, d, settings, pulsed: bool) -> int:
    """W -= lr d^T x on array a for x (B, in), d (B, out) C-contiguous float32 with the UpdateSettings
    `settings` (devices.kernel_bundles): the pulsed update (devices.pulsed_update, its write-noise redraw
    inside, counter after the update's) or the expected one (expected_array_update of the clipped mean change,
    devices.update.mean_update, here summed in the order of Numba's matmul). Returns pulses fired."""
    a = ArrayHandle(*a)
    if not pulsed:
        lr, granularity, desired_bl, update_management, bl_management = settings
        _, x_scale, d_scale = plan_kernel(x, d, abs(lr), granularity, desired_bl, update_management, bl_management)
        dw = np.float32(-lr) * (clip_to_probability(d, d_scale).T @ clip_to_probability(x, x_scale))
        return expected_array_update(a, dw.astype(np.float64), granularity)
    counter = next_counter(a)
    wn_counter = next_counter(a) if a.wn.shape[0] > 0 else 0  # the redraw's counter follows the update's
    n = pulsed_update_kernel(a.w, x, d, settings, a.params, a.seed, counter, a.app, a.wn, wn_counter)
    a.counts[PULSES] += n
    return n


@njit(cache=True)
def _fires(x, d, start, end) -> bool:
    """Whether a vector b in [start, end) has x_b and d_b both nonzero (else an update fires no pulse)."""
    for b in range(start, end):
        x_on = False
        for j in range(x.shape[1]):
            if x[b, j] != 0:
                x_on = True
                break
        if x_on:
            for i in range(d.shape[1]):
                if d[b, i] != 0:
                    return True
    return False


@njit(cache=True)
def update_array_pieces(a: ArrayHandle, x, d, settings, pulsed: bool, bounds, cols, snap) -> int:
    """update_array of each piece of a batch in turn, piece p the vectors bounds[p] .. bounds[p + 1] - 1 of
    x (B, in), d (B, out) C-contiguous float32, and after piece p, where cols[p] >= 0, column cols[p] of
    what a read sees (app - reference) into snap[:, p] (float32 (out, pieces)): the weights, counters and
    pulses of those calls with the column read between them. A piece with no vector whose x and d are both
    nonzero only advances the counter (skip_update). Pulsed without write noise and with trains of up to
    SLOTS slots, all pieces run in one call (devices.pulsed_update.pieces_update_kernel: trains and rows in
    parallel), otherwise piece by piece. Returns pulses fired."""
    h = ArrayHandle(*a)
    n_pieces = bounds.shape[0] - 1
    if bounds[0] != 0 or bounds[n_pieces] != x.shape[0] or cols.shape[0] != n_pieces:
        raise ValueError("update_array_pieces: the pieces' bounds must run from 0 to the batch, one column each")
    if pulsed and h.wn.shape[0] == 0 and settings[2] <= SLOTS:
        counters = np.empty(n_pieces, np.int64)
        for p in range(n_pieces):
            counters[p] = next_counter(h)
        pieces = (bounds, counters, cols, snap)
        n = pieces_update_kernel(h.w, x, d, settings, h.params, h.seed, pieces, h.app, h.wn)
        h.counts[PULSES] += n
    else:
        n = 0
        for p in range(n_pieces):
            start, end = bounds[p], bounds[p + 1]
            if _fires(x, d, start, end):
                n += update_array(a, x[start:end], d[start:end], settings, pulsed)
            else:
                skip_update(a)
            if cols[p] >= 0:
                for i in range(snap.shape[0]):
                    snap[i, p] = h.app[i, cols[p]]
    for p in range(n_pieces):  # what a read sees: app - reference
        if cols[p] >= 0:
            for i in range(snap.shape[0]):
                snap[i, p] -= h.reference[i, cols[p]]
    return n


@njit(cache=True)
def skip_update(a: ArrayHandle) -> None:
    """Advance a's call counter as update_array does for an update that fires no pulse (no sample with x and d
    both nonzero), without running it: the weights would not change."""
    a = ArrayHandle(*a)
    next_counter(a)
    if a.wn.shape[0] > 0:
        next_counter(a)


@njit(cache=True)
def expected_array_update(a: ArrayHandle, dw, granularity: float) -> int:
    """The expected update of array a by the desired change dw (out, in) float64 (devices.expected_update),
    then the write-noise redraw of the elements it moved, with a counter of its own. Returns pulses fired."""
    a = ArrayHandle(*a)
    marked = new_set(a.w.shape[0], a.w.shape[1], a.wn.shape[0] > 0)  # the kernel marks it with write noise
    n = expected_update_kernel(a.w, dw, granularity, a.params, a.seed, next_counter(a), marked)
    if a.wn.shape[0] > 0:
        _redraw_written(a, marked)
    a.counts[PULSES] += n
    return n


@njit(cache=True)
def pulse_array(a: ArrayHandle, counts, cols) -> int:
    """Fire counts[i, j] signed pulses (> 0 up) into array a, one at a time, where only the columns `cols`
    (int64, increasing) of counts (int64 (out, in)) may be nonzero; all columns: the parallel pass of
    pulse_kernel, else pulse_columns_kernel (the same weights). Write noise redraws the pulsed elements.
    Returns pulses fired."""
    a = ArrayHandle(*a)
    counter = next_counter(a)
    if cols.shape[0] == a.w.shape[1]:
        n = pulse_kernel(a.w, counts, a.params, a.seed, counter)
    else:
        n = pulse_columns_kernel(a.w, counts, cols, a.params, a.seed, counter)
    if a.wn.shape[0] > 0:
        _redraw_written(a, set_of_mask(counts))
    a.counts[PULSES] += n
    return n
