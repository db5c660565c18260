"""The coincidence stage of a pulsed update: every coincidence of an x and a d pulse train fires one pulse
into its element, sample after sample and slot after slot, as the hardware does (aihwkit 1.1.0 applies the
steps of a sample in slot order too).

Row i walks its own coincidences (the samples whose d train i fires, their slots, the slot lists of x) and
draws its cycle-to-cycle noise from stream (seed, counter, i), so rows run in parallel and the result does
not depend on the thread count. The pulses are computed in float32, as aihwkit's tiles compute.
"""

from __future__ import annotations

import numpy as np
from numba import get_thread_id, njit, prange, uint32, uint64

from aimc.devices.bits import lowest_bit
from aimc.devices.effects import NO_WRITE_NOISE
from aimc.devices.normals import BLOCK, fill_normals
from aimc.devices.prefetch import PREFETCH_PULSES, prefetch
from aimc.devices.pulse_trains import INDEX
from aimc.devices.pulsed_redraw import redraw_pulsed_row, redraw_work
from aimc.devices.pulses import noisy_pulse
from aimc.devices.response_step import LINEAR
from aimc.devices.rng import stream_seed
from aimc.devices.threads import kernel_thread_count

ROW_BLOCK = 16
"""Most rows coincide_rows_parallel gives one call of coincide_rows (fewer where that would leave a thread
with less than four blocks): a call per row cost ~50 ns of reference counting each."""


@njit(cache=True, inline="always")
def _fire_list(
    wr,
    er,
    js,
    n,
    d_up,
    fired,
    ring,
    code,
    consts,
    grid,
    tab_up,
    tab_dn,
    sigma,
    noisy,
    additive,
    wm,
    em,
    consts_m,
    routed,
):
    """Fire the pulses of one slot list js[:n] into row wr, er its parameters; the pulses are numbers
    fired .. fired + n - 1 of the row, and pulse k takes normal k of the row's noise stream from
    ring[k % ring.size] (_refill_normals put it there). routed (a one-sided cell, a constant): every pulse
    is an up pulse, into wr where it would raise W and into row wm (parameters em, constants consts_m)
    where it would lower W.

    One call of noisy_pulse for both devices, its inputs and its target chosen around it: Numba copies an
    inlined function's IR at each call site, and a second site (the routed cell's, dead code elsewhere but
    compiled all the same) made the row walk's first compilation 31 s instead of 18 s (Intel Xeon,
    2026-12-07), with the same update times. Choosing the arrays as tuples instead made the general copy's
    update 2-2.5x slower, and choosing the written row so lost its writes in the parallel build."""
    last = uint64(ring.shape[0] - 1)
    for a in range(n):
        e = js[a]
        j = e & INDEX
        up = (d_up ^ (e >> uint32(31))) != 0  # up where x and lr d have opposite signs
        xi = np.float32(0.0)
        if noisy:
            xi = ring[uint64(fired + a) & last]
        minus = routed and not up  # the pulse goes into the second device
        er_t = er
        consts_t = consts
        if minus:
            er_t = em
            consts_t = consts_m
        wj = wm[j] if minus else wr[j]
        wj = noisy_pulse(
            wj, up or routed, er_t, j, code, consts_t, grid, tab_up, tab_dn, sigma, additive, xi, np.float32, noisy
        )
        if minus:
            wm[j] = wj
        else:
            wr[j] = wj


@njit(cache=True)
def _refill_normals(ring, key, filled, need) -> int:
    """Make normals filled .. need - 1 of the stream `key` available in ring (a power-of-two length, at
    least one slot list + BLOCK): normal k at ring[k % ring.size]; fills whole blocks (devices.normals),
    returns the new count of normals filled. A call of its own: its vector loop stays out of the pulse
    loop's registers."""
    target = (need + BLOCK - 1) // BLOCK * BLOCK
    size = ring.shape[0]
    while filled < target:
        start = filled & (size - 1)
        count = min(target - filled, size - start)
        fill_normals(ring, start, count, key, filled)
        filled += count
    return filled


@njit(cache=True, parallel=True)
def coincide_rows(first, last, fired, w, trains, d, lr_sign, params, seed, pieces, app, ring) -> None:
    """The coincidences of rows first .. last - 1 (see coincidence_update_kernel) of the trains (x_lists,
    x_counts, d_masks) with the elements' ElementKernelParams `params`, piece after piece, each piece an update
    of its own: pieces = (bounds, counters, cols, snap), piece p the samples bounds[p] .. bounds[p + 1] - 1
    with noise from stream (seed, counters[p], i) through `ring` (a float32 work array of ring_size(in)
    slots); after piece p, where cols[p] >= 0, snap[i, p] = app[i, cols[p]] (the column as it stands between
    two pieces; one_piece: a whole update). fired[i] gets the pulses fired into row i.

    Three copies of the pulse loop, each with its family and noise switches fixed where they can be:
    LINEAR with multiplicative noise (SoftBounds, LinearStep: aihwkit's defaults), LINEAR without noise
    (R1's and R3's linear devices), and one for every other case. A fixed switch is no instruction in the
    loop; a LINEAR copy has no family switch (10% of a pulse), the noise copy no noise tests (a large
    512x512 update: 0.87-0.92 of the time of a loop with both switches, same-process A/B against commit
    0120d83 on a Zen 4, 2026-12-03). Each copy adds ~6 s to the first compilation (Intel Xeon). The copies
    are written out: one more inlined function taking the switches added 6-8 s to it (2026-12-06).

    A function of its own, compiled once for both row loops (coincide_rows_serial calls it once for all
    rows, coincide_rows_parallel once per block of rows, ROW_BLOCK): inlined into each, the pulse tree
    compiled twice (see docs/performance.md, "What is inlined"). Built with parallel=True without a parallel
    loop, for the reason given at devices.pulsed_update.pulsed_update_kernel."""
    ep, code, consts, _, _, _, sigma, additive = params
    plain = (w, ep, consts)  # no second device: every pulse into w
    if code == LINEAR and sigma > 0.0 and not additive:
        for i in range(first, last):
            fired[i] = _fire_row(
                i, w, trains, d, lr_sign, params, LINEAR, True, False, seed, pieces, app, ring, plain, False
            )
    elif code == LINEAR and not sigma > 0.0:
        for i in range(first, last):
            fired[i] = _fire_row(
                i, w, trains, d, lr_sign, params, LINEAR, False, False, seed, pieces, app, ring, plain, False
            )
    else:
        noisy = sigma > 0.0
        for i in range(first, last):
            fired[i] = _fire_row(
                i, w, trains, d, lr_sign, params, code, noisy, additive, seed, pieces, app, ring, plain, False
            )


@njit(cache=True, inline="always")
def coincide_row_routed(i, w_plus, w_minus, trains, d, lr_sign, params_plus, params_minus, seed, pieces, ring) -> int:
    """The coincidences of row i of a one-sided cell (devices.one_sided_update): the walk, order and noise
    of coincide_rows (trains = (x_lists, x_counts, d_masks)), each pulse an up pulse into w_plus where it
    would raise W and into w_minus where it would lower W; params_plus, params_minus the two devices'
    ElementKernelParams (the family, table and noise are G+'s). Returns the pulses fired into the row."""
    _, code, _, _, _, _, sigma, additive = params_plus
    ep_minus, _, consts_minus, _, _, _, _, _ = params_minus
    minus = (w_minus, ep_minus, consts_minus)
    return _fire_row(
        i, w_plus, trains, d, lr_sign, params_plus, code, sigma > 0.0, additive, seed, pieces, w_plus, ring, minus, True
    )


@njit(cache=True, inline="always")
def _fire_row(i, w, trains, d, lr_sign, params, code, noisy, additive, seed, pieces, app, ring, minus, routed) -> int:
    """coincide_rows for row i with the elements' ElementKernelParams `params`, its family `code` and noise
    (noisy: draw cycle noise; additive: its form) passed apart, each a constant where coincide_rows can fix
    it; routed (a constant): the pulses that would lower W go up into the second device minus = (w_minus,
    its element parameters, its constants) instead (_fire_list).

    The samples that fire on row i are first gathered into a 64-bit mask per 64 samples and then visited
    by their set bits: a loop that tested every sample's train inside this (large, inlined) function kept
    its counters on the stack and took 16% of a small 512x512 batch-64 update (perf on a Zen 3, 2026-12-03)."""
    x_lists, x_counts, d_masks = trains
    ep, _, consts, grid, tab_up, tab_dn, sigma, _ = params
    w_minus, ep_minus, consts_m = minus
    bounds, counters, cols, snap = pieces
    wr = w[i]
    er = ep[i]
    wm = w_minus[i] if routed else wr
    em = ep_minus[i] if routed else er
    total = 0
    for p in range(counters.shape[0]):
        key = uint64(0)  # the piece's noise stream, keyed at its first normal (most rows of a small piece fire none)
        filled = 0  # normals of the stream in ring so far
        fired = 0
        end = bounds[p + 1]
        for b0 in range(bounds[p], end, 64):
            active = uint64(0)
            for b in range(b0, min(b0 + 64, end)):
                active |= uint64(d_masks[b, i] != 0) << uint64(b - b0)
            while active != 0:
                b = b0 + lowest_bit(active)
                active &= active - uint64(1)
                md = d_masks[b, i]
                d_up = uint32(lr_sign * d[b, i] < 0.0)
                while md != 0:
                    t = lowest_bit(md)
                    md &= md - uint32(1)
                    js = x_lists[b, t]
                    n = x_counts[b, t]
                    if n <= PREFETCH_PULSES:
                        for a in range(n):
                            prefetch(w, i, js[a] & INDEX)
                            prefetch(ep, i, js[a] & INDEX)
                    if noisy and fired + n > filled:
                        if filled == 0:
                            key = stream_seed(uint64(seed), uint64(counters[p]), uint64(i))
                        filled = _refill_normals(ring, key, filled, fired + n)
                    _fire_list(
                        wr,
                        er,
                        js,
                        n,
                        d_up,
                        fired,
                        ring,
                        code,
                        consts,
                        grid,
                        tab_up,
                        tab_dn,
                        sigma,
                        noisy,
                        additive,
                        wm,
                        em,
                        consts_m,
                        routed,
                    )
                    fired += n
        total += fired
        if cols[p] >= 0:
            snap[i, p] = app[i, cols[p]]
    return total


def coincidence_update_kernel(w, trains, d, lr_sign, params, seed, counter) -> int:
    """Apply the coincidences of x and d pulse trains to w (float32, in place), sample after sample and
    slot after slot, as the hardware does; params the elements' ElementKernelParams (devices.kernel_bundles).

    In slot t of sample b, element (i, j) gets one pulse where d's train i and x's train j both fire
    (trains = (x_lists, x_counts, d_masks): bit t of d_masks[b, i]; j in x_lists[b, t, :x_counts[b, t]] & INDEX,
    slot_lists_kernel), down when lr_sign * d[b, i] * x[b, j] > 0 (the SGD sign: W -= lr d x^T; the sign of
    x[b, j] is the entry's NEGATIVE bit). Row i draws its noise from stream i. The cost follows the number of
    pulses. Returns pulses fired.

    A Python function: it calls coincide_rows_parallel with the argument types the pulsed update kernel
    gives it (a writable NO_WRITE_NOISE, an int64 counter), so both share one compilation (about 30 s cold).
    """
    fired = np.zeros(w.shape[0], np.int64)
    ep, code, consts, grid, tab_up, tab_dn, sigma, additive = params
    params = (ep, int(code), consts, grid, tab_up, tab_dn, float(sigma), bool(additive))
    pieces = one_piece(int(counter), trains[2].shape[0])
    coincide_rows_parallel(fired, w, trains, d, float(lr_sign), params, int(seed), pieces, w, NO_WRITE_NOISE, 0)
    return int(fired.sum())


@njit(cache=True)
def ring_size(cols: int) -> int:
    """Slots of the noise ring of a row of `cols` columns: the power of two >= cols + BLOCK (one slot list
    of up to cols pulses plus a block filled ahead, _refill_normals)."""
    size = BLOCK
    while size < cols + BLOCK:
        size *= 2
    return size


@njit(cache=True)
def one_piece(counter: int, batch: int) -> tuple:
    """The pieces (coincide_rows) of an update of `batch` samples that is one piece, with key `counter`
    and no column recorded."""
    bounds = np.empty(2, np.int64)
    bounds[0], bounds[1] = 0, batch
    counters = np.empty(1, np.int64)
    counters[0] = counter
    cols = np.empty(1, np.int64)
    cols[0] = -1
    return bounds, counters, cols, np.empty((0, 1), np.float32)


@njit(cache=True, parallel=True)
def coincide_rows_serial(fired, w, trains, d, lr_sign, params, seed, pieces, app, wn, wn_counter, ring) -> None:
    """coincide_rows_parallel on the calling thread, with the noise ring `ring` (ring_size(in) float32), for
    updates too small for a parallel launch. Built with parallel=True without a parallel loop, for the reason
    given at devices.pulsed_update.pulsed_update_kernel."""
    x_lists, x_counts, d_masks = trains
    coincide_rows(np.int64(0), w.shape[0], fired, w, trains, d, lr_sign, params, seed, pieces, app, ring)
    if wn.shape[0] == 0:
        return
    rows, normals, columns, samples = redraw_work(1, d_masks, w.shape[0], w.shape[1])
    for i in range(w.shape[0]):
        if fired[i] > 0:
            redraw_pulsed_row(
                i, rows, 0, normals[0], columns[0], samples, x_lists, x_counts, d_masks, app, w, wn, seed, wn_counter
            )


@njit(cache=True, parallel=True)
def coincide_rows_parallel(fired, w, trains, d, lr_sign, params, seed, pieces, app, wn, wn_counter) -> None:
    """coincide_rows for every row, in parallel over blocks of up to ROW_BLOCK rows; fired[i] gets row i's
    pulses; trains = (x_lists, x_counts, d_masks), params the elements' ElementKernelParams. Each thread takes
    the noise ring of its id: a ring allocated per row (with its reference counting) cost as much as the noise
    it saved in a small update. With write noise (wn with rows; one piece) each row's pulsed elements are then
    redrawn (redraw_pulsed_row), from work arrays of the thread's id too."""
    x_lists, x_counts, d_masks = trains
    threads = kernel_thread_count()
    rings = np.empty((threads, ring_size(w.shape[1])), np.float32)
    n_rows = w.shape[0]
    block = min(max(n_rows // (4 * threads), 1), ROW_BLOCK)
    for k in prange((n_rows + block - 1) // block):
        first = np.int64(k) * block  # int64 (prange's index is unsigned): one compilation with the serial call
        last = min(first + block, n_rows)
        coincide_rows(first, last, fired, w, trains, d, lr_sign, params, seed, pieces, app, rings[get_thread_id()])
    if wn.shape[0] == 0:
        return
    rows, normals, columns, samples = redraw_work(threads, d_masks, w.shape[0], w.shape[1])
    for i in prange(w.shape[0]):  # a loop of its own: in the loop above it slowed the pulses by 5-10%
        if fired[i] > 0:
            t = get_thread_id()
            redraw_pulsed_row(
                i, rows, t, normals[t], columns[t], samples, x_lists, x_counts, d_masks, app, w, wn, seed, wn_counter
            )
