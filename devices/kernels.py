"""Numba kernels: every per-element loop of the device layer.

An array's elements share one response family (`code`) and carry their own drawn parameters in `ep`, a
float32 array of shape (out, in, 6) with the columns below. Mean step sizes are magnitudes in weight units;
the sign of a pulse is given separately. Each kernel that draws random numbers takes (seed, counter) and
keys one stream per row (or per pulse train), so results do not depend on the thread count.
"""

from __future__ import annotations

import warnings

import numpy as np
from numba import get_thread_id, njit, prange, uint32, uint64
from numba.core.errors import NumbaPerformanceWarning

from aimc.devices.bits import lowest_bit
from aimc.devices.normals import BLOCK, fill_normals
from aimc.devices.prefetch import prefetch
from aimc.devices.rng import bits31_at, normal_step, stream_seed, uniform_step
from aimc.devices.threads import kernel_thread_count

# response family codes
CONST, LINEAR, POWER, EXP_R1, EXP_STEP, TABLE = 0, 1, 2, 3, 4, 5
# columns of the element parameter array `ep`
DW_UP, DW_DOWN, W_MAX, W_MIN, GAMMA_UP, GAMMA_DOWN = 0, 1, 2, 3, 4, 5
N_ELEMENT_PARAMS = 6
# the same columns as unsigned offsets: unsigned indices carry no negative-index wraparound code (mean_step)
U_DW_UP, U_W_MAX, U_W_MIN, U_GAMMA_UP = (np.uint64(c) for c in (DW_UP, W_MAX, W_MIN, GAMMA_UP))

# pulsed_update_kernel is built with parallel=True for the parallel pipeline's clean-up of its serial code,
# not for a parallel loop (its docstring); Numba's warning that it found none is expected there
warnings.filterwarnings("ignore", r"(?s).*no transformation for parallel execution.*def pulsed_update_kernel",
                        NumbaPerformanceWarning)


@njit(cache=True, inline="always")
def _interp(t: float, grid: np.ndarray, table: np.ndarray) -> float:
    """Linear interpolation of `table` over increasing `grid`, constant beyond its ends."""
    n = grid.shape[0]
    if t <= grid[0]:
        return table[0]
    if t >= grid[n - 1]:
        return table[n - 1]
    k = np.searchsorted(grid, t) - 1
    f = (t - grid[k]) / (grid[k + 1] - grid[k])
    return table[k] + f * (table[k + 1] - table[k])


@njit(cache=True, inline="always")
def mean_step(code, up, w, er, j, consts, grid, tab_up, tab_dn, F=np.float64):
    """Mean magnitude of one pulse's change of element j of a row at weight w (>= 0); er = ep[i], the
    row's element parameters. F: the float type of the arithmetic, float64 for analysis (mean steps,
    symmetric points), float32 for pulses (as aihwkit, whose tiles compute in float32; see _noisy_pulse).

    The direction selects columns by offset (k = 0 up, 1 down: DW_UP + k, GAMMA_UP + k, W_MAX + k) and
    signs by arithmetic, not by branches: in a pulsed update the direction follows the sign of x and d,
    a coin flip per pulse, and a mispredicted branch per pulse doubled its cost (22 ns against 12 ns per
    pulse on one thread, docs/performance.md)."""
    k = uint64(1 - int(up))
    j = uint64(j)  # unsigned indices: no negative-index wraparound code (a 20% slower pulse without)
    w = F(w)
    one = F(1.0)
    zero = F(0.0)
    dw = F(er[j, U_DW_UP + k])
    if code == CONST:
        return dw
    if code == LINEAR:
        return max(dw * (one - F(er[j, U_GAMMA_UP + k]) * w), zero)
    bmax = F(er[j, U_W_MAX])
    bmin = F(er[j, U_W_MIN])
    span = bmax - bmin
    if span <= zero:
        return zero
    sg = one - F(2.0) * F(k)
    if code == EXP_STEP:  # exponentials in float64 whatever F: float32's overflow at e^88 would give 0 * inf
        z = 2.0 * consts[2] * float(w) / float(span) + consts[3]
        return dw * F(max(1.0 - consts[k] * np.exp(float(sg) * float(er[j, U_GAMMA_UP + k]) * z), 0.0))
    if code == TABLE:
        t = (w - bmin) / span
        return dw * max(F(_interp(t, grid, tab_up if up else tab_dn)), zero)
    # POWER and EXP_R1: distance to the bound the pulse moves toward (W_MAX up, W_MIN down), in units of
    # span / consts[0]
    v = max(sg * (F(er[j, U_W_MAX + k]) - w), zero) * F(consts[0]) / span
    g = F(er[j, U_GAMMA_UP + k])
    if code == POWER:
        if g == one:
            return dw * v
        if g == F(2.0):
            return dw * v * v
        if g == F(0.5):
            return dw * np.sqrt(v)
        return dw * v**g  # pow is the slow path: the exponents of R1's devices above skip it
    if g < F(1e-9):
        return dw * v
    # float64 whatever F, as EXP_STEP (float() keeps a float32 float32 in Numba); the denominator is
    # consts[1 + k] where all elements share g (devices.response), NaN where they do not
    g64 = np.float64(g)
    denom = consts[uint64(1) + k]
    if denom != denom:
        denom = np.expm1(g64)
    return dw * F(np.expm1(g64 * np.float64(v)) / denom)


@njit(cache=True)
def expm1(x: float) -> float:
    """exp(x) - 1 as the kernels compute it (the C library's, where numpy may use a SIMD one that differs
    in the last bit): for constants that stand in for a kernel's own evaluation."""
    return np.expm1(x)


SIGNS = np.array([1.0, -1.0], np.float32)
"""Sign of a pulse's change by direction (k = 0 up, 1 down): one load, where computing 1 - 2k in floating
point took three instructions more."""


@njit(cache=True, inline="always")
def _noisy_pulse(w, up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, xi, F=np.float64,
                 noisy=True):
    """w after one pulse whose cycle-to-cycle noise is sigma times the standard normal xi, clipped to the
    element's bounds; arithmetic in F (float64 in the reference kernels, where a call keeps an element's
    weight in float64 over its pulses; float32 in the pulsed update: aihwkit's tiles compute in float32,
    and it takes 10%-15% off a pulse, docs/performance.md). noisy: apply the noise at all (callers pass
    sigma > 0, a constant where they can fix it)."""
    s = mean_step(code, up, w, er, j, consts, grid, tab_up, tab_dn, F)
    k = uint64(1 - int(up))  # branch-free direction and unsigned indices, see mean_step
    j = uint64(j)
    if noisy:
        if additive:
            s += F(sigma) * F(er[j, U_DW_UP + k]) * F(xi)
        else:
            s *= F(1.0) + F(sigma) * F(xi)
    w = F(w) + F(SIGNS[k]) * s
    return min(max(w, F(er[j, U_W_MIN])), F(er[j, U_W_MAX]))


@njit(cache=True, inline="always")
def _one_pulse(w, up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, rs):
    """Apply one pulse with cycle-to-cycle noise (drawn from RNG state rs), then clip to the element's
    bounds. Returns (new w, next state)."""
    xi = 0.0
    noisy = sigma > 0.0
    if noisy:
        xi, rs = normal_step(rs)
    return _noisy_pulse(w, up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, xi, np.float64, noisy), rs


@njit(cache=True, inline="always")
def _pulses(w, n, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, s):
    """Apply |n| pulses one at a time, up for n > 0, down for n < 0. Returns (new w, next state)."""
    up = n > 0
    for _ in range(abs(n)):
        w, s = _one_pulse(w, up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, s)
    return w, s


@njit(cache=True)
def total(a) -> int:
    """Sum of a 1-D integer array as a plain loop: in a parallel build `a.sum()` and `np.zeros` are
    parallel launches of their own, which cost more than these loops over rows."""
    t = 0
    for k in range(a.shape[0]):
        t += a[k]
    return t


@njit(cache=True, parallel=True)
def pulse_kernel(w, counts, ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter) -> int:
    """Apply counts[i, j] signed pulses to every element of w (float32, in place); returns pulses fired."""
    rows, cols = w.shape
    fired = np.empty(rows, np.int64)
    for i in prange(rows):
        fired[i] = 0
        s = stream_seed(uint64(seed), uint64(counter), uint64(i))
        er = ep[i]
        for j in range(cols):
            n = counts[i, j]
            if n != 0:
                v, s = _pulses(float(w[i, j]), n, er, j, code, consts, grid, tab_up, tab_dn,
                               sigma, additive, s)
                w[i, j] = v
                fired[i] += abs(n)
    return total(fired)


@njit(cache=True, parallel=True)
def alternate_kernel(w, cycles, ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter):
    """Fire cycles[i, j] (up, down) pulse pairs into element (i, j) of w (float32, in place)."""
    rows, cols = w.shape
    for i in prange(rows):
        s = stream_seed(uint64(seed), uint64(counter), uint64(i))
        er = ep[i]
        for j in range(cols):
            v = float(w[i, j])
            for _ in range(cycles[i, j]):
                v, s = _one_pulse(v, True, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, s)
                v, s = _one_pulse(v, False, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, s)
            w[i, j] = v


@njit(cache=True, inline="always")
def _power_int(q: float, n: int) -> float:
    """q ** n for a small non-negative integer n, by squaring."""
    out = 1.0
    while n > 0:
        if n & 1:
            out *= q
        q *= q
        n >>= 1
    return out


SIGN_CLEARED = np.int32(0x7FFFFFFF)
"""All bits of a float32 but its sign."""


@njit(cache=True, inline="always")
def row_abs_max(a):
    """max |a[b, :]| of each row of a C-contiguous float32 2-D array, as float32 (B,) (0 for an empty row).

    Compares the bit patterns with the sign bit cleared, as int32: for float32 magnitudes they order as the
    values (a NaN above +inf, so a row with a NaN gives NaN), and an integer maximum vectorizes where a
    float one does not (LLVM keeps a float maximum scalar for the order of NaNs): 9 against 23 us for the
    plan of a 512x512 update of batch 64, one thread.
    """
    bits = a.view(np.int32)
    out = np.empty(a.shape[0], np.int32)
    for b in range(a.shape[0]):
        row = bits[b]
        m = np.int32(0)
        for k in range(row.shape[0]):
            v = np.int32(row[k] & SIGN_CLEARED)
            m = v if v > m else m
        out[b] = m
    return out.view(np.float32)


@njit(cache=True)
def plan_kernel(x, d, lr, dw_min, desired_bl, update_management, bl_management):
    """Pulse-train lengths and probability scales per sample (devices.update.train_plan documents them);
    x, d C-contiguous float32; lr >= 0. Returns (bl int32 (B,), x_scale (B,), d_scale (B,), d_clip (B,)).
    Raises ValueError where x or d is not finite (a NaN would give a train length of NaN)."""
    batch = x.shape[0]
    bl = np.zeros(batch, np.int32)
    x_scale = np.zeros(batch)
    d_scale = np.zeros(batch)
    d_clip = np.ones(batch)
    x_max = row_abs_max(x)
    d_max = row_abs_max(d)
    for b in range(batch):
        xm = float(x_max[b])
        dm = float(d_max[b])
        if not (np.isfinite(xm) and np.isfinite(dm)):
            raise ValueError("update: x or d holds a NaN or an infinity")
        if xm <= 0.0 or dm <= 0.0 or lr <= 0.0:
            continue
        k = lr * xm * dm / dw_min
        if k > desired_bl:
            d_clip[b] = desired_bl / k
            k = float(desired_bl)
        n = min(max(np.ceil(k), 1.0), desired_bl) if bl_management else desired_bl
        base = np.sqrt(lr / (dw_min * n))
        ratio = np.sqrt(xm / (dm * d_clip[b])) if update_management else 1.0
        bl[b] = n
        x_scale[b] = base / ratio
        d_scale[b] = base * ratio * d_clip[b]
    return bl, x_scale, d_scale, d_clip


TRAIN_STREAMS = uint64(1) << uint64(48)
"""Stream index offset of the pulse trains: train k draws from stream TRAIN_STREAMS + k, apart from the
per-row streams (index = row) of the coincidence noise in the same call."""


@njit(cache=True, inline="always")
def _fill_train(values, b, scale, length, seed, counter, stream, masks) -> None:
    """Pulse trains of sample b (masks[b, k], see pulse_trains_kernel) from stream (seed, counter,
    TRAIN_STREAMS + stream); nothing where length is 0."""
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
            log_q = np.log1p(-p)
            # first pulse: P(T = t | T < BL) = q^t p / (1 - q^BL); (u - none) / (1 - none) is uniform
            t = min(int(np.log1p(-(u - none)) / log_q), length - 1)
            while True:
                m |= uint32(1) << uint32(t)
                if t + 1 >= length:
                    break
                u, s = uniform_step(s)
                t += 1 + int(np.log(u) / log_q)
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
    p = min(prob_scale[b] |values[b, k]|, 1), independently for each slot t < bl[b]; sample b draws from
    stream TRAIN_STREAMS + offset + b. Returns masks uint32 (B, n).

    A one-slot train (BL = 1) fires where the 31 random bits of element k (devices.rng.bits31_at) are
    below p 2^31, in float32 (no branch: the loop vectorizes). Otherwise one uniform decides whether a
    train is empty (probability (1 - p)^BL); the first pulse of a non-empty train reuses it through the
    inverse CDF of the truncated geometric law, later ones are placed by geometric skipping (p < 0.25) or
    slot by slot. The cost follows the number of pulses, not n * BL.
    """
    batch = values.shape[0]
    masks = np.zeros(values.shape, np.uint32)
    for b in prange(batch):
        _fill_train(values, b, prob_scale[b], bl[b], seed, counter, offset + b, masks)
    return masks


NEGATIVE = uint32(1 << 31)
"""Top bit of a slot-list entry: the train's value is negative (so the pulse direction needs no load of
x in the coincidence loop)."""
INDEX = uint32((1 << 31) - 1)
"""The index bits of a slot-list entry."""


@njit(cache=True, inline="always")
def _slot_entry(k, value) -> uint32:
    """The slot-list entry of index k whose train value is `value`: k, with NEGATIVE set where value < 0."""
    return uint32(k) | (NEGATIVE * uint32(value < 0.0))


@njit(cache=True, inline="always")
def _slot_lists_of(masks, values, b, one_slot, lists, counts) -> None:
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


@njit(cache=True, inline="always")
def _slot_counts_of(masks, b, one_slot, counts) -> None:
    """counts[b, t] = number of trains of sample b with a pulse in slot t (counts[b] zero on entry);
    one_slot as in _slot_lists_of."""
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
        _slot_lists_of(masks, values, b, max_bl <= 1, lists, counts)
    return lists, counts


PREFETCH_PULSES = 32
"""_coincide_row prefetches the weights and parameters of a slot's list of at most PREFETCH_PULSES
elements before it fires them: a small update fires a few pulses per row at scattered elements of arrays
larger than the caches (512 x 512 SoftBounds: 1 MB of weights, 6.3 MB of float32 parameters), and the hint puts
their cache misses in flight together. Longer lists (large updates) touch most of the row, which stays
in cache: there the hint only costs instructions."""


@njit(cache=True, inline="always")
def _fire_list(wr, er, js, n, d_up, fired, ring, code, consts, grid, tab_up, tab_dn, sigma, noisy, additive):
    """Fire the pulses of one slot list js[:n] into row wr, er its parameters; the pulses are numbers
    fired .. fired + n - 1 of the row, and pulse k takes normal k of the row's noise stream from
    ring[k % ring.size] (_refill_normals put it there)."""
    last = uint64(ring.shape[0] - 1)
    for a in range(n):
        e = js[a]
        j = e & INDEX
        up = (d_up ^ (e >> uint32(31))) != 0  # up where x and lr d have opposite signs
        xi = np.float32(0.0)
        if noisy:
            xi = ring[uint64(fired + a) & last]
        wr[j] = _noisy_pulse(wr[j], up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, xi, np.float32,
                             noisy)


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


@njit(cache=True, inline="always")
def _coincide_row(i, w, x_lists, x_counts, d, lr_sign, d_masks,
                  ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter, ring) -> int:
    """The coincidences of row i (see coincidence_update_kernel), noise from stream (seed, counter, i)
    through `ring` (a float32 work array of ring_size(in) slots); returns the pulses fired into the row.

    Three copies of the pulse loop, each with its family and noise switches fixed where they can be:
    LINEAR with multiplicative noise (SoftBounds, LinearStep: aihwkit's defaults), LINEAR without noise
    (R1's and R3's linear devices), and one for every other case. A fixed switch is no instruction in the
    loop; a LINEAR copy has no family switch (10% of a pulse), the noise copy no noise tests (a large
    512x512 update: 0.87-0.92 of the time of a loop with both switches, session 10). Each copy adds ~15 s
    to the kernel's first compilation."""
    if code == LINEAR and sigma > 0.0 and not additive:
        return _fire_row(i, w, x_lists, x_counts, d, lr_sign, d_masks,
                         ep, LINEAR, consts, grid, tab_up, tab_dn, sigma, True, False, seed, counter, ring)
    if code == LINEAR and not sigma > 0.0:
        return _fire_row(i, w, x_lists, x_counts, d, lr_sign, d_masks,
                         ep, LINEAR, consts, grid, tab_up, tab_dn, sigma, False, False, seed, counter, ring)
    return _fire_row(i, w, x_lists, x_counts, d, lr_sign, d_masks,
                     ep, code, consts, grid, tab_up, tab_dn, sigma, sigma > 0.0, additive, seed, counter, ring)


@njit(cache=True, inline="always")
def _fire_row(i, w, x_lists, x_counts, d, lr_sign, d_masks,
              ep, code, consts, grid, tab_up, tab_dn, sigma, noisy, additive, seed, counter, ring) -> int:
    """_coincide_row for one family code and noise (noisy: draw cycle noise; additive: its form), each a
    constant where _coincide_row can fix it.

    The samples that fire on row i are first gathered into a 64-bit mask per 64 samples and then visited
    by their set bits: a loop that tested every sample's train inside this (large, inlined) function kept
    its counters on the stack and took 16% of a 512x512 batch-64 update (perf, session 9)."""
    key = stream_seed(uint64(seed), uint64(counter), uint64(i))
    filled = 0  # normals of the row's stream in ring so far
    fired = 0
    wr = w[i]
    er = ep[i]
    nb = d_masks.shape[0]
    for b0 in range(0, nb, 64):
        active = uint64(0)
        for b in range(b0, min(b0 + 64, nb)):
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
                    filled = _refill_normals(ring, key, filled, fired + n)
                _fire_list(wr, er, js, n, d_up, fired, ring, code, consts, grid, tab_up, tab_dn, sigma, noisy,
                           additive)
                fired += n
    return fired


@njit(cache=True)
def coincidence_update_kernel(w, x_lists, x_counts, d, lr_sign, d_masks,
                              ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter) -> int:
    """Apply the coincidences of x and d pulse trains to w (float32, in place), sample after sample and
    slot after slot, as the hardware does.

    In slot t of sample b, element (i, j) gets one pulse where d's train i and x's train j both fire
    (bit t of d_masks[b, i]; j in x_lists[b, t, :x_counts[b, t]] & INDEX, slot_lists_kernel), down when
    lr_sign * d[b, i] * x[b, j] > 0 (the SGD sign: W -= lr d x^T; the sign of x[b, j] is the entry's
    NEGATIVE bit). Row i draws its noise from stream i. The cost follows the number of
    pulses. Returns pulses fired.
    """
    fired = np.zeros(w.shape[0], np.int64)
    _coincide_rows_parallel(fired, w, x_lists, x_counts, d, lr_sign, d_masks,
                            ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter)
    return fired.sum()


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
def _fill_trains_of(k, x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts,
                    d_counts) -> None:
    """Train set k of an update: x's trains of sample k and their slot lists for k < B, else d's trains
    of sample k - B and their slot counts (counts zero on entry)."""
    batch = x.shape[0]
    b = k % batch
    if k < batch:
        _fill_train(x, b, x_scale[b], bl[b], seed, counter, k, x_masks)
        _slot_lists_of(x_masks, x, b, bl[b] == 1, x_lists, x_counts)
    else:
        _fill_train(d, b, d_scale[b], bl[b], seed, counter, k, d_masks)
        _slot_counts_of(d_masks, b, bl[b] == 1, d_counts)


@njit(cache=True, parallel=True)
def _fill_trains_parallel(x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts,
                          d_counts) -> None:
    """All train sets of an update, in parallel (nothing else in this function: in a parallel build every
    array allocation or reduction is a parallel launch of its own)."""
    for k in prange(2 * x.shape[0]):
        _fill_trains_of(k, x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts,
                        d_counts)


@njit(cache=True)
def ring_size(cols: int) -> int:
    """Slots of the noise ring of a row of `cols` columns: the power of two >= cols + BLOCK (one slot list
    of up to cols pulses plus a block filled ahead, _refill_normals)."""
    size = BLOCK
    while size < cols + BLOCK:
        size *= 2
    return size


@njit(cache=True, parallel=True)
def _coincide_rows_parallel(fired, w, x_lists, x_counts, d, lr_sign, d_masks,
                            ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter) -> None:
    """_coincide_row for every row, in parallel; fired[i] gets row i's pulses. Each thread takes the noise
    ring of its id: a ring allocated per row (with its reference counting) cost as much as the noise
    it saved in a small update."""
    rings = np.empty((kernel_thread_count(), ring_size(w.shape[1])), np.float32)
    for i in prange(w.shape[0]):
        fired[i] = _coincide_row(i, w, x_lists, x_counts, d, lr_sign, d_masks,
                                 ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter,
                                 rings[get_thread_id()])


@njit(cache=True, inline="always")
def _zeros(shape, dtype):
    """np.zeros as a plain loop (in a parallel build np.zeros is a parallel launch)."""
    a = np.empty(shape, dtype)
    flat = a.reshape(-1)
    for k in range(flat.shape[0]):
        flat[k] = 0
    return a


@njit(cache=True, parallel=True)
def pulsed_update_kernel(w, x, d, lr, dw_min, desired_bl, update_management, bl_management,
                         ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter) -> int:
    """The whole pulsed update W -= lr d^T x in one call: train plan (devices.update.plan_kernel), the x
    and d pulse trains (pulse_trains_kernel with offsets 0 and B) with their slot lists, coincidences
    (coincidence_update_kernel). Bit-identical to running those stages one by one; one call instead of
    five saves their fixed costs, which dominate small updates. Small stages run on the calling thread
    (SERIAL_TRAIN_ELEMENTS, SERIAL_PULSES), large ones in parallel; the result does not depend on it.
    x (B, in), d (B, out) float32.

    Built with parallel=True although the function has no parallel loop of its own (the warning Numba
    gives at compilation is filtered above): the parallel pipeline's copy propagation removes the
    reference counting that inlined array arguments otherwise put on every pulse of the serial branch
    (six atomic operations: 30 against 11 ms for 1e6 pulses on one thread)."""
    batch = x.shape[0]
    bl, x_scale, d_scale, _ = plan_kernel(x, d, abs(lr), dw_min, desired_bl, update_management, bl_management)
    max_bl = 1
    for b in range(batch):
        max_bl = max(max_bl, bl[b])
    x_masks = _zeros(x.shape, np.uint32)
    d_masks = _zeros((batch, d.shape[1] + MASK_PAD), np.uint32)  # columns past d stay 0
    x_lists = np.empty((batch, max_bl, x.shape[1]), np.uint32)
    x_counts = _zeros((batch, max_bl), np.int32)
    d_counts = _zeros((batch, max_bl), np.int32)
    if batch * (x.shape[1] + d.shape[1]) <= SERIAL_TRAIN_ELEMENTS:
        for k in range(2 * batch):
            _fill_trains_of(k, x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts,
                            d_counts)
    else:
        _fill_trains_parallel(x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts,
                              d_counts)
    lr_sign = 1.0 if lr > 0 else (-1.0 if lr < 0 else 0.0)
    fired = np.empty(w.shape[0], np.int64)
    if _coincidences(x_counts, d_counts) <= SERIAL_PULSES:
        ring = np.empty(ring_size(w.shape[1]), np.float32)
        for i in range(w.shape[0]):
            fired[i] = _coincide_row(i, w, x_lists, x_counts, d, lr_sign, d_masks,
                                     ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter, ring)
    else:
        _coincide_rows_parallel(fired, w, x_lists, x_counts, d, lr_sign, d_masks,
                                ep, code, consts, grid, tab_up, tab_dn, sigma, additive, seed, counter)
    return total(fired)


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


@njit(cache=True, parallel=True)
def expected_update_kernel(w, dw, dw_min, ep, code, consts, grid, tab_up, tab_dn, sigma, additive,
                           seed, counter) -> int:
    """Analog Update with granularity: |dw|/dw_min stochastically rounded to n whole pulses, applied as
    n mean steps at the current w plus noise of n pulses' variance, then clipped. Returns pulses fired."""
    rows, cols = w.shape
    fired = np.empty(rows, np.int64)
    for i in prange(rows):
        fired[i] = 0
        rs = stream_seed(uint64(seed), uint64(counter), uint64(i))
        er = ep[i]
        for j in range(cols):
            desired = dw[i, j]
            if desired == 0.0:
                continue
            real = abs(desired) / dw_min
            n = int(real)
            u, rs = uniform_step(rs)
            if u < real - n:
                n += 1
            if n == 0:
                continue
            up = desired > 0.0
            k = 1 - int(up)  # branch-free direction, see mean_step
            v = float(w[i, j])
            s = mean_step(code, up, v, er, j, consts, grid, tab_up, tab_dn)
            step = n * s
            if sigma > 0.0:
                scale = er[j, DW_UP + k] if additive else s
                xi, rs = normal_step(rs)
                step += sigma * scale * np.sqrt(n) * xi
            v = v + (1.0 - 2.0 * k) * step
            v = min(max(v, er[j, W_MIN]), er[j, W_MAX])
            w[i, j] = v
            fired[i] += n
    return total(fired)


@njit(cache=True, parallel=True)
def mean_step_kernel(w, up, ep, code, consts, grid, tab_up, tab_dn):
    """Mean pulse step magnitude of every element at the weights w (any float array of ep's shape)."""
    rows, cols = w.shape
    out = np.empty((rows, cols))
    for i in prange(rows):
        er = ep[i]
        for j in range(cols):
            out[i, j] = mean_step(code, up, float(w[i, j]), er, j, consts, grid, tab_up, tab_dn)
    return out


@njit(cache=True, parallel=True)
def symmetric_point_kernel(ep, code, consts, grid, tab_up, tab_dn):
    """Per-element weight where the mean up and down steps are equal (bisection, 60 halvings).

    Where up steps win everywhere the element drifts to its upper bound (returned), likewise the lower;
    where both are equal everywhere (constant step, no asymmetry) there is no symmetric point: NaN.
    """
    rows, cols = ep.shape[0], ep.shape[1]
    out = np.empty((rows, cols))
    for i in prange(rows):
        er = ep[i]
        for j in range(cols):
            lo = er[j, W_MIN]
            hi = er[j, W_MAX]
            h_lo = (mean_step(code, True, lo, er, j, consts, grid, tab_up, tab_dn)
                    - mean_step(code, False, lo, er, j, consts, grid, tab_up, tab_dn))
            h_hi = (mean_step(code, True, hi, er, j, consts, grid, tab_up, tab_dn)
                    - mean_step(code, False, hi, er, j, consts, grid, tab_up, tab_dn))
            if h_lo == 0.0 and h_hi == 0.0:
                out[i, j] = np.nan
                continue
            if h_lo <= 0.0 and h_hi <= 0.0:
                out[i, j] = lo
                continue
            if h_lo >= 0.0 and h_hi >= 0.0:
                out[i, j] = hi
                continue
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                h = (mean_step(code, True, mid, er, j, consts, grid, tab_up, tab_dn)
                     - mean_step(code, False, mid, er, j, consts, grid, tab_up, tab_dn))
                if (h > 0.0) == (h_lo > 0.0):
                    lo = mid
                    h_lo = h
                else:
                    hi = mid
            out[i, j] = 0.5 * (lo + hi)
    return out
