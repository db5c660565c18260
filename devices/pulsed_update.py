"""The whole pulsed update W -= lr d^T x of a mini-batch in one Numba call: train plan, x and d pulse trains
with their slot lists (devices.pulse_trains), coincidences (devices.coincidences).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from aimc.devices.coincidences import coincide_rows_parallel, coincide_rows_serial, one_piece, ring_size
from aimc.devices.loops import total, zeros
from aimc.devices.pulse_trains import (
    SLOTS,
    fill_train,
    plan_into,
    plan_kernel,
    slot_counts_of,
    slot_lists_of,
    split_long_trains,
)

MASK_PAD = 16
"""Extra (zero) columns of d's train masks in pulsed_update_kernel. The coincidence stage reads them by
column, one sample after the other; with 512 rows (a 2 KB stride) the 64 samples' lines fall into two of
the 64 sets of a 32 KB L1 cache and every read missed it. 16 more columns (64 bytes) spread them over all
sets."""

SERIAL_TRAIN_ELEMENTS = 16384
"""pulsed_update_kernel draws the pulse trains on the calling thread up to this many elements (batch x
(in + out)), where a parallel launch costs more than it saves (R1's FCN: batch 10, up to 7 680)."""

SERIAL_PULSES = 1000
"""pulsed_update_kernel fires the coincidences on the calling thread up to this many pulses (a column
transfer fires 2 to 120), in parallel over rows above."""


@njit(cache=True)
def _coincidences(x_counts, d_counts) -> int:
    """Pulses the coincidence stage will fire: the sum over samples b and slots t of (x trains firing in
    slot t) x (d trains firing in slot t); counts (B, max_bl) as slot_lists_kernel returns them."""
    n = 0
    for b in range(x_counts.shape[0]):
        for t in range(x_counts.shape[1]):
            n += x_counts[b, t] * d_counts[b, t]
    return n


@njit(cache=True, inline="always")
def fill_train_set(is_x, b, stream, x, d, x_scale, d_scale, bl, seed, counter, masks) -> None:
    """x's train of sample b with its slot lists (is_x), else d's train of sample b with its slot counts, from
    train stream `stream` of (seed, counter); masks = (x_masks, d_masks, x_lists, x_counts, d_counts), counts
    zero on entry."""
    x_masks, d_masks, x_lists, x_counts, d_counts = masks
    if is_x:
        fill_train(x, b, x_scale[b], bl[b], seed, counter, stream, x_masks)
        slot_lists_of(x_masks, x, b, bl[b] == 1, x_lists, x_counts)
    else:
        fill_train(d, b, d_scale[b], bl[b], seed, counter, stream, d_masks)
        slot_counts_of(d_masks, b, bl[b] == 1, d_counts)


@njit(cache=True, inline="always")
def fill_trains_of(k, x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts, d_counts) -> None:
    """Train set k of an update: x's trains of sample k and their slot lists for k < B, else d's trains
    of sample k - B and their slot counts (counts zero on entry); train stream k. Inlined, as draw_trains
    is: a call of its own took and released a reference to each of its seven arrays, a fixed cost that
    dominated single-sample updates (4608 on a 16 x 25 array without pulses: 4.1 ms through update_array,
    3.4 ms with both inlined, 2026-12-06, Zen 4, one thread)."""
    batch = x.shape[0]
    masks = (x_masks, d_masks, x_lists, x_counts, d_counts)
    fill_train_set(k < batch, k % batch, k, x, d, x_scale, d_scale, bl, seed, counter, masks)


@njit(cache=True, parallel=True)
def _fill_trains_parallel(
    x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts, d_counts
) -> None:
    """All train sets of an update, in parallel (nothing else in this function: in a parallel build every
    array allocation or reduction is a parallel launch of its own)."""
    for k in prange(2 * x.shape[0]):
        fill_trains_of(k, x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts, d_counts)


@njit(cache=True, inline="always")
def draw_trains(x, d, settings, seed, counter, mask_pad) -> tuple:
    """The pulse trains of the update W -= lr d^T x (settings: devices.kernel_bundles.UpdateSettings): train
    plan (plan_kernel), the x and d trains (streams 0 .. B-1 and B .. 2B-1) with x's slot lists and d's slot
    counts (fill_all_trains). Where a train is longer than SLOTS, the samples are the chunks of
    split_long_trains (B then counts the chunks, each with its own streams). d_masks gets mask_pad zero
    columns past d's (MASK_PAD). Returns (x_lists, x_counts, d_masks, d_counts, d), d the rows of the
    samples (chunks) the trains have."""
    lr, granularity, desired_bl, update_management, bl_management = settings
    bl, x_scale, d_scale = plan_kernel(x, d, abs(lr), granularity, desired_bl, update_management, bl_management)
    max_bl = 1
    for b in range(bl.shape[0]):
        max_bl = max(max_bl, bl[b])
    if max_bl > SLOTS:
        x, d, bl, x_scale, d_scale = split_long_trains(x, d, bl, x_scale, d_scale)
        max_bl = SLOTS
    batch = x.shape[0]
    x_masks = zeros(x.shape, np.uint32)
    d_masks = zeros((batch, d.shape[1] + mask_pad), np.uint32)  # columns past d stay 0
    x_lists = np.empty((batch, max_bl, x.shape[1]), np.uint32)
    x_counts = zeros((batch, max_bl), np.int32)
    d_counts = zeros((batch, max_bl), np.int32)
    fill_all_trains(x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts, d_counts)
    return x_lists, x_counts, d_masks, d_counts, d


@njit(cache=True, inline="always")
def fill_all_trains(x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts, d_counts) -> None:
    """Every train set of an update (fill_trains_of; masks and counts zero on entry, x_lists with at least
    max(bl) slots). Small updates draw on the calling thread (SERIAL_TRAIN_ELEMENTS), large ones in
    parallel; the trains do not depend on it."""
    if x.shape[0] * (x.shape[1] + d.shape[1]) <= SERIAL_TRAIN_ELEMENTS:
        for k in range(2 * x.shape[0]):
            fill_trains_of(k, x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts, d_counts)
    else:
        _fill_trains_parallel(x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts, d_counts)


@njit(cache=True, parallel=True)
def pulsed_update_kernel(w, x, d, settings, params, seed, counter, app, wn, wn_counter) -> int:
    """The whole pulsed update W -= lr d^T x in one call: train plan, the x and d pulse trains with their slot
    lists (draw_trains), coincidences (coincidence_update_kernel). Bit-identical to running those stages one
    by one; one call instead of five saves their fixed costs, which dominate small updates. Small stages run
    on the calling thread (SERIAL_TRAIN_ELEMENTS, SERIAL_PULSES), large ones in parallel; the result does not
    depend on it. x (B, in), d (B, out) float32; settings the update's UpdateSettings, params the elements'
    ElementKernelParams (devices.kernel_bundles).

    Built with parallel=True although the function has no parallel loop of its own (the warning Numba
    gives at compilation is filtered in aimc.devices): the parallel pipeline's copy propagation removes the
    reference counting that inlined array arguments otherwise put on every pulse of a serial loop (six
    atomic operations: 30 against 11 ms for 1e6 pulses on one thread); devices.coincidences.coincide_rows and
    coincide_rows_serial are built so too.

    Write noise (wn: the std as a (1, 1) array): the apparent weight of every element that received a
    pulse is redrawn, app = w + std xi, row by row after the pulses (pulsed_redraw.redraw_pulsed_row;
    bit-identical to devices.effects.redraw_kernel with the pulsed set and counter wn_counter). wn without
    rows (effects.NO_WRITE_NOISE): no write noise, app is not touched."""
    x_lists, x_counts, d_masks, d_counts, d = draw_trains(x, d, settings, seed, counter, MASK_PAD)
    fired = np.empty(w.shape[0], np.int64)
    ring = np.empty(ring_size(w.shape[1]), np.float32)
    trains = (x_lists, x_counts, d_masks, d_counts)
    pieces = one_piece(counter, d_masks.shape[0])
    return fire_trains(w, trains, d, settings[0], params, seed, pieces, app, wn, wn_counter, fired, ring)


@njit(cache=True, inline="always")
def fire_trains(w, trains, d, lr, params, seed, pieces, app, wn, wn_counter, fired, ring) -> int:
    """The coincidence stage of pulsed_update_kernel for the trains (x_lists, x_counts, d_masks, d_counts)
    of the rows of d in the pieces `pieces` (devices.coincidences.coincide_rows), with work arrays fired
    (int64 (out,)) and ring (float32 (ring_size(in),)). Returns pulses fired.

    The row loops are calls of their own (coincide_rows_serial, coincide_rows_parallel), not inlined: this
    function is inlined into pulsed_update_kernel and pieces_update_kernel, and Numba copies an inlined
    function's whole tree at every site (the pulse loops with every family's step): with the serial rows
    inlined at two sites, the first Analog SGD and c-TTv2 steps compiled in 179 and 110 s, with the call in
    139 and 26 s (cold cache, Zen 4, 2 cores), at no measurable cost per update."""
    x_lists, x_counts, d_masks, d_counts = trains
    rows = (x_lists, x_counts, d_masks)  # what the row loops walk
    lr_sign = 1.0 if lr > 0 else (-1.0 if lr < 0 else 0.0)
    if _coincidences(x_counts, d_counts) <= SERIAL_PULSES:
        coincide_rows_serial(fired, w, rows, d, lr_sign, params, seed, pieces, app, wn, wn_counter, ring)
    else:
        coincide_rows_parallel(fired, w, rows, d, lr_sign, params, seed, pieces, app, wn, wn_counter)
    return total(fired)


@njit(cache=True, inline="always")
def _fill_piece_trains_of(k, x, d, x_scale, d_scale, bl, seed, pieces, piece, masks):
    """Train set k of pieces_update_kernel: that of fill_trains_of for sample b = k % B in its piece p =
    piece[b] as an update of its own (key counters[p], train streams numbered from the piece's first
    sample); masks = (x_masks, d_masks, x_lists, x_counts, d_counts)."""
    bounds, counters, _, _ = pieces
    batch = x.shape[0]
    b = k % batch
    p = piece[b]
    first = bounds[p]
    stream = b - first if k < batch else bounds[p + 1] - first + b - first
    fill_train_set(k < batch, b, stream, x, d, x_scale, d_scale, bl, seed, counters[p], masks)


@njit(cache=True, parallel=True)
def _fill_piece_trains_parallel(x, d, x_scale, d_scale, bl, seed, pieces, piece, masks):
    """Every train set of pieces_update_kernel, in parallel (alone in its function: _fill_trains_parallel)."""
    for k in prange(2 * x.shape[0]):
        _fill_piece_trains_of(k, x, d, x_scale, d_scale, bl, seed, pieces, piece, masks)


@njit(cache=True, parallel=True)
def pieces_update_kernel(w, x, d, settings, params, seed, pieces, app, wn) -> int:
    """Consecutive pieces of a batch, each a pulsed update of its own, in one call: pieces = (bounds, counters,
    cols, snap) as devices.coincidences.coincide_rows takes them; piece p (vectors bounds[p] .. bounds[p + 1]
    - 1 of x (B, in), d (B, out) float32) gets the trains and pulses that pulsed_update_kernel gives it with
    counter counters[p], and snap[:, p] column cols[p] of app after it (where cols[p] >= 0). The trains
    of all pieces are drawn at once (in parallel over vectors where large, as in pulsed_update_kernel), and
    the rows walk their pieces in order (in parallel over rows where large): a piece is not a call of its
    own, and the pieces run on every thread, where pulsed_update_kernel piece after piece ran the small
    updates between the reads of a chopped transfer on one. Bit-identical to that; for trains of up to SLOTS
    slots (settings' desired_bl) and without write noise (wn without rows: its redraw follows all pieces)."""
    lr, granularity, desired_bl, update_management, bl_management = settings
    bounds = pieces[0]
    batch, n_in = x.shape
    bl = np.empty(batch, np.int32)
    x_scale = np.empty(batch)
    d_scale = np.empty(batch)
    plan_into(x, d, abs(lr), granularity, desired_bl, update_management, bl_management, bl, x_scale, d_scale)
    piece = np.empty(batch, np.int64)
    for p in range(bounds.shape[0] - 1):
        for b in range(bounds[p], bounds[p + 1]):
            piece[b] = p
    slots = max(min(desired_bl, SLOTS), 1)
    x_masks = zeros(x.shape, np.uint32)
    d_masks = zeros((batch, d.shape[1] + MASK_PAD), np.uint32)
    x_lists = np.empty((batch, slots, n_in), np.uint32)
    x_counts = zeros((batch, slots), np.int32)
    d_counts = zeros((batch, slots), np.int32)
    masks = (x_masks, d_masks, x_lists, x_counts, d_counts)
    if batch * (n_in + d.shape[1]) <= SERIAL_TRAIN_ELEMENTS:
        for k in range(2 * batch):
            _fill_piece_trains_of(k, x, d, x_scale, d_scale, bl, seed, pieces, piece, masks)
    else:
        _fill_piece_trains_parallel(x, d, x_scale, d_scale, bl, seed, pieces, piece, masks)
    fired = np.empty(w.shape[0], np.int64)
    ring = np.empty(ring_size(n_in), np.float32)
    trains = (x_lists, x_counts, d_masks, d_counts)
    no_counter = np.int64(0)  # typed as pulsed_update_kernel's wn_counter: the row loops compile once for both
    return fire_trains(w, trains, d, lr, params, seed, pieces, app, wn, no_counter, fired, ring)
