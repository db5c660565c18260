"""The train plan and the stochastic pulse trains of a pulsed update, with their slot lists.

The update W -= lr d^T x of a mini-batch reaches the devices as coincidences of pulse trains (aihwkit 1.1.0's
StochasticCompressed pulse type, per sample): sample b gets a train length BL and probability scales so that
x_j fires in each of BL slots with probability p_x = min(x_scale |x_j|, 1), d_i with p_d = min(d_scale |d_i|,
1), and element (i, j) steps once per slot where both fire. The slot lists turn x's trains into, per sample
and slot, the columns that fire, the form the coincidence stage (devices.coincidences) walks. A train is a
uint32 bit mask of up to 32 slots; longer trains are split into consecutive chunks (split_long_trains).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, uint32, uint64

from aimc.devices.bits import bits_float, lowest_bit
from aimc.devices.loops import abs_max_bits, total
from aimc.devices.rng import bits31_at, stream_seed, uniform_step

NOT_FINITE = "update: x or d holds a NaN or an infinity"
"""The error of an update whose x or d is not finite."""


@njit(cache=True)
def _power_int(q: float, n: int) -> float:
    """q ** n for a small non-negative integer n, by squaring."""
    out = 1.0
    while n > 0:
        if n & 1:
            out *= q
        q *= q
        n >>= 1
    return out


@njit(cache=True, inline="always")
def sample_plan(xm, dm, lr, granularity, desired_bl, managed, bl_management):
    """The train plan of one sample (devices.update.train_plan documents it) from the largest |x| and |d| of
    the sample, xm and dm (finite); managed: update or BL management on. Returns (BL, x_scale, d_scale),
    (0, 0, 0) where xm, dm or lr is 0. The train length min(max(ceil(k), 1), desired_bl) with k =
    lr xm dm / granularity takes ceil only below desired_bl, where it is a small integer."""
    if xm <= 0.0 or dm <= 0.0 or lr <= 0.0:
        return 0, 0.0, 0.0
    k = lr * xm * dm / granularity
    n = desired_bl
    if bl_management and k < desired_bl:
        n = max(math.ceil(k), 1)
    base = math.sqrt(lr / (granularity * n))
    ratio = 1.0
    if managed:  # balance with d's maximum, shrunk where the sample saturates (x keeps its full scale)
        ratio = math.sqrt(xm / (dm * min(1.0, desired_bl / k)))
    return n, base / ratio, base * ratio


@njit(cache=True)
def plan_kernel(x, d, lr, granularity, desired_bl, update_management, bl_management):
    """Pulse-train lengths and probability scales per sample (sample_plan); x, d C-contiguous float32;
    lr >= 0. Returns (bl int32 (B,), x_scale (B,), d_scale (B,)).
    Raises ValueError where x or d is not finite (a NaN would give a train length of NaN)."""
    batch = x.shape[0]
    bl = np.zeros(batch, np.int32)
    x_scale = np.zeros(batch)
    d_scale = np.zeros(batch)
    plan_into(x, d, lr, granularity, desired_bl, update_management, bl_management, bl, x_scale, d_scale)
    return bl, x_scale, d_scale


@njit(cache=True, inline="always")
def plan_into(x, d, lr, granularity, desired_bl, update_management, bl_management, bl, x_scale, d_scale) -> None:
    """plan_kernel written into bl, x_scale, d_scale (at least B entries each): no allocation."""
    x_bits = x.view(np.int32)
    d_bits = d.view(np.int32)
    managed = update_management or bl_management  # aihwkit turns update management on with BL management
    for b in range(x.shape[0]):
        xm = float(bits_float(abs_max_bits(x_bits[b])))  # row_abs_max of the row
        dm = float(bits_float(abs_max_bits(d_bits[b])))
        if not (math.isfinite(xm) and math.isfinite(dm)):
            raise ValueError(NOT_FINITE)
        bl[b], x_scale[b], d_scale[b] = sample_plan(xm, dm, lr, granularity, desired_bl, managed, bl_management)


SLOTS = 32
"""Slots of one train mask (the bits of a uint32). A train of BL > SLOTS slots is drawn and fired as
ceil(BL / SLOTS) consecutive chunks (split_long_trains)."""

MAX_BL = 1024
"""The longest pulse train UpdateConfig.desired_bl allows (32 chunks). The slot lists of x take 4 bytes per
slot and input of every sample, BL rounded up to whole chunks: 2 MB a sample for BL 1024 and 512 inputs."""


@njit(cache=True)
def split_long_trains(x, d, bl, x_scale, d_scale):
    """The samples of a train plan (plan_kernel's bl, x_scale, d_scale for x (B, in), d (B, out)) with every
    train longer than SLOTS split into consecutive chunks of SLOTS, SLOTS, ..., the rest slots, each chunk a
    sample of its own with the same x and d rows and scales, in the order of the samples and chunks. The slots
    of a train are independent draws with the same probabilities, so chunk c holds slots c SLOTS .. of the
    long train in distribution, and firing the chunks in order fires each element's pulses in slot order.
    Returns (x, d, bl, x_scale, d_scale) of the chunks (new arrays; a sample with BL <= SLOTS is one chunk
    as it is)."""
    batch = bl.shape[0]
    chunks = 0
    for b in range(batch):
        chunks += max((bl[b] + SLOTS - 1) // SLOTS, 1)
    xs = np.empty((chunks, x.shape[1]), x.dtype)
    ds = np.empty((chunks, d.shape[1]), d.dtype)
    bls = np.empty(chunks, bl.dtype)
    x_sc = np.empty(chunks, x_scale.dtype)
    d_sc = np.empty(chunks, d_scale.dtype)
    c = 0
    for b in range(batch):
        left = bl[b]
        while True:
            xs[c] = x[b]
            ds[c] = d[b]
            bls[c] = min(left, SLOTS)
            x_sc[c] = x_scale[b]
            d_sc[c] = d_scale[b]
            c += 1
            left -= SLOTS
            if left <= 0:
                break
    return xs, ds, bls, x_sc, d_sc


@njit(cache=True)
def clip_to_probability(v, scale):
    """v (B, n) with row b clipped to +-1 / scale[b], where its probabilities scale[b] |v| exceed 1: v itself
    (no copy) where none does, the common case."""
    batch, n = v.shape
    out = v
    for b in range(batch):
        lim = np.float32(1.0) / np.float32(scale[b]) if scale[b] > 0.0 else np.float32(np.inf)
        for k in range(n):
            if abs(v[b, k]) > lim:
                if out is v:
                    out = v.copy()
                out[b, k] = lim if v[b, k] > 0 else -lim
    return out


TRAIN_STREAMS = uint64(1) << uint64(48)
"""Stream index offset of the pulse trains: train k draws from stream TRAIN_STREAMS + k, apart from the
per-row streams (index = row) of the coincidence noise in the same call."""


@njit(cache=True)
def fill_train(values, b, scale, length, seed, counter, stream, masks) -> None:
    """Pulse trains of sample b (masks[b, k], see pulse_trains_kernel) from stream (seed, counter,
    TRAIN_STREAMS + stream); nothing where length is 0. length <= SLOTS (split_long_trains splits longer
    trains)."""
    if length <= 0:
        return
    s = stream_seed(uint64(seed), uint64(counter), TRAIN_STREAMS + uint64(stream))
    n = values.shape[1]
    if length == 1:  # one slot: element k fires when its 31 random bits are below p 2^31 (vectorizes)
        row = values[b]
        out = masks[b]
        sc = np.float32(scale)
        for k in range(n):
            p = sc * abs(row[k])
            limit = np.int32(min(p * np.float32(2147483648.0), np.float32(2147483520.0)))  # int32-safe
            out[k] = uint32((bits31_at(s, k) < limit) | (p >= np.float32(1.0)))
        return
    full = uint32((1 << length) - 1)
    for k in range(n):
        p = scale * abs(values[b, k])
        if p <= 0.0:
            continue
        if p >= 1.0:
            masks[b, k] = full
            continue
        u, s = uniform_step(s)
        q = 1.0 - p
        none = _power_int(q, length)
        if u < none:
            continue
        m = uint32(0)
        if p < 0.25:
            log_q = math.log1p(-p)
            # first pulse: P(T = t | T < BL) = q^t p / (1 - q^BL); (u - none) / (1 - none) is uniform
            t = min(int(math.log1p(-(u - none)) / log_q), length - 1)
            while True:
                m |= uint32(1) << uint32(t)
                if t + 1 >= length:
                    break
                u, s = uniform_step(s)
                t += 1 + int(math.log(u) / log_q)
                if t >= length:
                    break
        else:
            while m == 0:  # condition on a non-empty train by rejection (acceptance >= 1 - q)
                for t in range(length):
                    u, s = uniform_step(s)
                    if u < p:
                        m |= uint32(1) << uint32(t)
        masks[b, k] = m


@njit(cache=True, parallel=True)
def pulse_trains_kernel(values, prob_scale, bl, seed, counter, offset):
    """Stochastic pulse trains: bit t of masks[b, k] is set with probability
    p = min(prob_scale[b] |values[b, k]|, 1), independently for each slot t < bl[b] (<= SLOTS); sample b
    draws from stream TRAIN_STREAMS + offset + b. Returns masks uint32 (B, n).

    A one-slot train (BL = 1) fires where the 31 random bits of element k (devices.rng.bits31_at) are
    below p 2^31, in float32 (no branch: the loop vectorizes). Otherwise one uniform decides whether a
    train is empty (probability (1 - p)^BL); the first pulse of a non-empty train reuses it through the
    inverse CDF of the truncated geometric law, later ones are placed by geometric skipping (p < 0.25) or
    slot by slot. The cost follows the number of pulses, not n * BL.
    """
    batch = values.shape[0]
    masks = np.zeros(values.shape, np.uint32)
    for b in prange(batch):
        fill_train(values, b, prob_scale[b], bl[b], seed, counter, offset + b, masks)
    return masks


NEGATIVE = uint32(1 << 31)
"""Top bit of a slot-list entry: the train's value is negative (so the pulse direction needs no load of
x in the coincidence loop)."""
INDEX = uint32((1 << 31) - 1)
"""The index bits of a slot-list entry."""


@njit(cache=True)
def _slot_entry(k, value) -> uint32:
    """The slot-list entry of index k whose train value is `value`: k, with NEGATIVE set where value < 0."""
    return uint32(k) | (NEGATIVE * uint32(value < 0.0))


@njit(cache=True)
def slot_lists_of(masks, values, b, one_slot, lists, counts) -> None:
    """Slot lists of sample b (see slot_lists_kernel); counts[b] must be zero on entry. one_slot: the
    sample's trains have one slot (masks 0 or 1), listed by a branch-free compaction."""
    mb = masks[b]
    vb = values[b]
    lb = lists[b]
    cb = counts[b]
    if one_slot:
        c = 0
        for k in range(mb.shape[0]):
            lb[0, c] = _slot_entry(k, vb[k])
            c += mb[k]
        cb[0] = c
        return
    for k in range(mb.shape[0]):
        m = mb[k]
        e = _slot_entry(k, vb[k])
        while m != 0:
            t = lowest_bit(m)
            lb[t, cb[t]] = e
            cb[t] += 1
            m &= m - uint32(1)


@njit(cache=True)
def slot_counts_of(masks, b, one_slot, counts) -> None:
    """counts[b, t] = number of trains of sample b with a pulse in slot t (counts[b] zero on entry);
    one_slot as in slot_lists_of."""
    mb = masks[b]
    cb = counts[b]
    if one_slot:
        cb[0] = total(mb)
        return
    for k in range(mb.shape[0]):
        m = mb[k]
        while m != 0:
            cb[lowest_bit(m)] += 1
            m &= m - uint32(1)


@njit(cache=True)
def slot_lists_kernel(masks, values, max_bl):
    """For each sample b and time slot t, the indices k whose train has a pulse in slot t, each with the
    sign of values[b, k] in its top bit (NEGATIVE where negative; INDEX masks the index).

    Returns (lists uint32 (B, max_bl, n), counts int32 (B, max_bl)): lists[b, t, :counts[b, t]].
    """
    batch, n = masks.shape
    lists = np.empty((batch, max(max_bl, 1), n), np.uint32)
    counts = np.zeros((batch, max(max_bl, 1)), np.int32)
    for b in range(batch):
        slot_lists_of(masks, values, b, max_bl <= 1, lists, counts)
    return lists, counts
