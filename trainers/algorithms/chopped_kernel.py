"""The chopped transfer of a mini-batch in one Numba call: aihwkit 1.1.0's ChoppedTransferCompound and
DynamicTransferCompound (c-TTv2, AGAD) as its CPU simulator runs them, for one tile. The buffers, choppers
and AGAD's reference are this module's; the arrays are updated, pulsed and read through the devices' verbs
(devices.array_update, devices.column_read) on the handles the tile gives (AnalogTile.kernel_handles).

Rasch, Carta, Fagbohungbe, Gokmen, Nat. Commun. 15:7133 (2024), arXiv:2303.04721 (Eq. 10-14). Array `fast`
of the tile is the fast array A, array `slow` the slow array C. The vectors of the batch are cut at the
reads; for each piece (x_b, d_b), b in [start, end):

    fast step:  A <- A - (c_out d_b eta_b)(c_in x_b)^T        (the tile's pulsed or expected update)
    a read after vector b = first, first + every, ... of column k (cyclic):
        v = read(A[:, k])        (forward periphery, one-hot input; AGAD: v - Pref[:, k], see below)
        H[:, k] <- H[:, k] + c_in[k] c_out s v                (0 + ... where no_buffer)
        n = clamp(trunc(H), +-transfer_bl) where |H| >= 1;  H <- momentum H (forget) or H - (1 - momentum) n
            (clipped to +-buffer_cap transfer_bl where buffer_cap > 0)
        n pulses into C[:, k] (where sweeps > write_after), fired together at the end of the batch or
            before a column gets pulses twice; with step != 1 instead at once a pulsed update of C by
            lr = step dw_C with input e_k and output -n (pulse trains of transfer_bl slots, no update or
            BL management: aihwkit 1.1.0's write `step * dw_C`, which for step = 1 and transfer_bl = 1
            fires exactly one pulse per nonzero n)
        c_in[k] flips (in the last sweep of every `period` sweeps where period > 0; with probability
            chop_prob where chop_random); after column in - 1: each c_out flips with probability
            out_chop_prob and sweeps += 1

AGAD (dynamic): Pref[:, k] <- M[:, k] at the first read after c_in[k] flipped, and after the read
M[:, k] <- (1 - beta) M[:, k] + beta v; with correct_accumulation s is divided by min(sweeps % period + 1,
1 / dw_A), the reads of the current chopper phase so far (aihwkit 1.1.0's experimental_correct_accumulation).
With fast_lr_feedback (aihwkit 1.1.0's C++-only experimental_fast_lr_feedback), fb = [scale, estimate,
previous t, target, period, t of the first vector]: a latch raises the estimate to the largest |change of
Pref|; before the update of the vector with t updates done (previous taken as 0 while t <= n), once
t - previous >= period, scale *= target / estimate where the estimate is nonzero, the estimate restarts at 0
and previous = t; every vector's step is eta * scale.
The chopper draws are the given uniforms, in order (one per read where chop_random, then out_size after
column in - 1 where out_chop_prob > 0). Bit-identical to running
the pieces through AnalogTile.update, AnalogTile.read_columns and AnalogTile.pulse one by one: the arrays'
and the periphery's call counters advance the same way (an expected update of several vectors sums them
in the BLAS order of Numba's matmul, which may differ from numpy's in the last bit).

The per-row rule of a read (buffer_row), the chopper switches (switch_choppers), the fast step (fast_step)
and the read's increment (increment_scale) are functions of their own: the GPU tile's twin of the kernel
(chopped_gpu.py) runs the same ones.
"""

import sys
from typing import NamedTuple

import numpy as np
from numba import njit

from aimc.devices import CACHED_MODULES, AnalogTile
from aimc.devices.array_update import ArrayHandle, pulse_array, update_array, update_array_pieces
from aimc.devices.column_read import read_column
from aimc.devices.jit_cache import flush_stale
from aimc.devices.loops import row_abs_max


class TransferRule(NamedTuple):
    """The buffer, threshold and chopper settings of a chopped transfer (module docstring)."""

    scale: float  # s: buffer increment per unit read (1 / weight units)
    transfer_bl: int  # most pulses per element and read
    momentum: float
    forget_buffer: bool
    no_buffer: bool
    buffer_cap: float  # 0: none (only without forget_buffer)
    chop_prob: float
    chop_random: bool  # draw one uniform per read, flip where it is below chop_prob
    period: int  # regular flips in the last sweep of every `period` sweeps; 0: none
    out_chop_prob: float
    dynamic: bool  # AGAD's reference
    beta: float  # AGAD's running-mean weight
    write_after: int  # pulses go into C only where sweeps > write_after
    step: float = 1.0  # write lr into C in units of dw_C; 1: exact pulses
    correct_accumulation: bool = False  # AGAD: s / min(reads in the chopper phase, 1 / dw_A)
    fast_lr_feedback: bool = False  # AGAD: the fast steps (eta given) times the feedback scale fb[0]


class ChopperState(NamedTuple):
    """A tile's state of the recursion (module docstring), changed in place by a call."""

    buffer: np.ndarray  # H (out, in) float32
    c_in: np.ndarray  # input choppers (in,) float32 +-1
    c_out: np.ndarray  # output choppers (out,) float32 +-1
    running_mean: np.ndarray  # AGAD's M (out, in) float32; (0, 0) without the dynamic reference
    reference: np.ndarray  # AGAD's Pref (out, in) float32; (0, 0) without
    switched: np.ndarray  # AGAD: column k's chopper switched since its last read, bool (in,); (0,) without
    feedback: np.ndarray  # AGAD's fast-step feedback, float64 (6,) (module docstring)
    pending: np.ndarray  # the queue of C's pulses, int64 (out, in), zero on entry and exit
    queued: np.ndarray  # the queued columns, bool (in,), False on entry and exit


class TransferResult(NamedTuple):
    """What a call did: next column, completed sweeps, pulses into A and C, column reads."""

    col: int
    sweeps: int
    update_pulses: int
    transfer_pulses: int
    reads: int


@njit(cache=True)
def running_estimate(v, m0, tau):
    """aihwkit 1.1.0's auto-scale estimate (ChoppedTransferCompound's m_x, m_d) after each value of v
    (float64): m <- (1 - tau) m + tau v; a value <= 0 leaves m, and an m <= 0 becomes the first positive
    value. Starts at m0."""
    out = np.empty(v.shape[0])
    m = m0
    for i in range(v.shape[0]):
        if v[i] > 0:
            m = v[i] if m <= 0 else (1.0 - tau) * m + tau * v[i]
        out[i] = m
    return out


@njit(cache=True)
def auto_scale_estimates(x, d, m_x, m_d, tau):
    """aihwkit 1.1.0's running estimates of max|x_b| and max|d_b| after each vector b of x (n, in), d (n, out)
    (C-contiguous float32): `running_estimate` of the vectors' largest magnitudes, from m_x and m_d."""
    return (
        running_estimate(row_abs_max(x).astype(np.float64), m_x, tau),
        running_estimate(row_abs_max(d).astype(np.float64), m_d, tau),
    )


@njit(cache=True)
def _pieces(first, every, col, n, n_in):
    """The pieces of a batch of n vectors between the reads (module docstring): bounds (int64, pieces + 1),
    the column read after each piece (int64, -1 where none follows) and the next column after the batch."""
    bounds = np.empty(n + 1, np.int64)
    cols = np.empty(n, np.int64)
    bounds[0] = 0
    count = 0
    r = first  # the vector after which the next read comes
    while True:
        end = min(r + 1, n)
        if end > bounds[count]:
            cols[count] = -1
            count += 1
            bounds[count] = end
        if r >= n:
            break
        cols[count - 1] = col  # a read follows every non-empty piece (every >= 1)
        col = (col + 1) % n_in
        r += every
    return bounds[: count + 1], cols[:count], col


@njit(cache=True, inline="always")  # with switch_choppers: a call per piece and read took 0.3 ms of 5 (CNN conv1)
def _chop(xs, ds, x, d, eta, rule, fb, start, end, c_in, c_out) -> None:
    """xs[b] = x_b c_in and ds[b] = d_b c_out times the fast step of vector b (fast_step; where eta is given)
    for b in [start, end)."""
    n = x.shape[0]
    for b in range(start, end):
        step_b = fast_step(rule, eta, fb, b, n)
        for j in range(x.shape[1]):
            xs[b, j] = x[b, j] * c_in[j]
        for i in range(d.shape[1]):
            ds[b, i] = d[b, i] * c_out[i]
            if eta.shape[0] > 0:
                ds[b, i] *= np.float32(step_b)


@njit(cache=True)
def _flush(c, pending, queued) -> int:
    """Fire the queued pulses into the slow array c (AnalogTile.pulse, visiting only the queued columns) and
    clear the queue. Returns pulses fired."""
    cols = np.flatnonzero(queued)
    n = pulse_array(c, pending, cols)
    for k in cols:
        pending[:, k] = 0
        queued[k] = False
    return n


@njit(cache=True)
def fast_step(rule, eta, fb, b, n):
    """The step of vector b of a batch of n (float64): eta[b], times AGAD's feedback scale fb[0] where
    fast_lr_feedback, after the feedback's update for that vector (module docstring; fb changes in place);
    0 where eta is empty (the update's lr carries the step)."""
    step_b = eta[b] if eta.shape[0] > 0 else 0.0
    if rule.fast_lr_feedback:
        t = fb[5] + b
        if t <= n:
            fb[2] = 0.0
        if t - fb[2] >= fb[4]:
            if fb[1] != 0.0:
                fb[0] *= fb[3] / fb[1]
            fb[1] = 0.0
            fb[2] = t
        step_b *= fb[0]
    return step_b


@njit(cache=True)
def increment_scale(rule, sweeps, dw_a):
    """s of a read in the chopper phase of `sweeps` completed sweeps (float32): rule.scale, divided with
    correct_accumulation by min(sweeps % period + 1, 1 / dw_a) (module docstring)."""
    if rule.correct_accumulation:
        return np.float32(rule.scale / min(sweeps % rule.period + 1, 1.0 / dw_a))
    return np.float32(rule.scale)


@njit(cache=True)
def buffer_rule(rule):
    """The settings buffer_row takes from a TransferRule, as a plain tuple (a CUDA kernel takes it so):
    (transfer_bl, momentum, forget_buffer, no_buffer, buffer_cap, dynamic, beta)."""
    return (
        rule.transfer_bl,
        rule.momentum,
        rule.forget_buffer,
        rule.no_buffer,
        rule.buffer_cap,
        rule.dynamic,
        rule.beta,
    )


@njit(cache=True, inline="always")  # in the kernel's row loop: its constants hoisted out of the loop
def buffer_row(buf, s, sign, v, h, ref, m, latch):
    """One output row i of the read of column k (module docstring), in float32: buf = buffer_rule(rule), s
    the buffer increment per unit read, sign = c_in[k] c_out[i], v the read, h = H[i, k], and AGAD's ref =
    Pref[i, k], m = M[i, k] (any values without the dynamic reference), latch: Pref[i, k] <- M[i, k] first
    (column k's chopper switched since its last read). Returns (H[i, k], pulses n into C[i, k], Pref[i, k],
    M[i, k], |change of Pref[i, k]|). The CPU kernel and the GPU tile's kernel both run it."""
    transfer_bl, momentum, forget_buffer, no_buffer, buffer_cap, dynamic, beta = buf
    s = np.float32(s)
    sign = np.float32(sign)
    change = np.float32(0.0)
    if latch:
        change = abs(ref - m)
        ref = m
    if dynamic:
        inc = s * (sign * (v - ref))
        b32 = np.float32(beta)
        m = (np.float32(1.0) - b32) * m + b32 * v
    else:
        inc = s * (sign * v)
    h = (np.float32(0.0) if no_buffer else h) + inc
    q = 0
    if abs(h) >= 1:
        q = int(min(max(h, -transfer_bl), transfer_bl))  # int() truncates toward zero: trunc(h) clamped
        if forget_buffer:
            h = h * np.float32(momentum)
        else:
            h = h - np.float32(1.0 - momentum) * np.float32(q)
            if buffer_cap > 0:
                lim = np.float32(buffer_cap * transfer_bl)
                h = min(max(h, -lim), lim)
    return h, q, ref, m, change


@njit(cache=True, inline="always")
def switch_choppers(rule, uniforms, ui, k, sweeps, c_in, c_out, switched):
    """The chopper switches after the read of column k (module docstring): c_in[k] flips (regularly, or at
    random from uniforms[ui]), AGAD marks the column switched; after the last column each c_out flips with
    probability out_chop_prob and the sweep is complete. c_in, c_out, switched change in place. Returns (the
    next uniform's index, the completed sweeps)."""
    flip = rule.period > 0 and sweeps % rule.period + 1 == rule.period
    if rule.chop_random:
        if uniforms[ui] < rule.chop_prob:
            flip = True
        ui += 1
    if flip:
        c_in[k] = -c_in[k]
        if rule.dynamic:
            switched[k] = True
    if k == c_in.shape[0] - 1:
        if rule.out_chop_prob > 0:
            for i in range(c_out.shape[0]):
                if uniforms[ui + i] < rule.out_chop_prob:
                    c_out[i] = -c_out[i]
            ui += c_out.shape[0]
        sweeps += 1
    return ui, sweeps


@njit(cache=True)
def chopped_transfer_kernel(handles, settings, pulsed, x, d, eta, rule, uniforms, state, schedule):
    """The module docstring's recursion for x (n, in), d (n, out) float32; eta (n,) float64 the step of each
    vector (folded into d, update lr 1) or empty (update lr settings.lr). handles: the fast array A, the slow
    array C and the read periphery (AnalogTile.kernel_handles; their counters advance in place); settings
    the fast update's UpdateSettings, pulsed its mode; state a ChopperState (changed in place); schedule
    (first, every, col, sweeps): the first vector after which a column is read, the vectors between reads,
    the next column and the completed sweeps. Returns (col, sweeps, update pulses, transfer pulses, reads).

    The fast updates do not depend on the reads (the choppers follow the uniforms and the sweeps alone), so
    all pieces between the reads are updated first, in one call that records the column each read will see
    (devices.array_update.update_array_pieces: its trains and rows run in parallel), and the reads, buffers
    and pulses into C follow. AGAD's fast_lr_feedback makes each step depend on the reads before it: there
    the pieces are updated one at a time between the reads. Either order gives the same weights and counters."""
    a_handle, c_handle, reader = handles  # passed on as they come: update_array compiles once for all its callers
    c = ArrayHandle(*c_handle)
    h_buf, c_in, c_out, m_run, p_ref, switched, fb, pending, queued = state
    first, every, col, sweeps = schedule
    dw_a = ArrayHandle(*a_handle).granularity
    dw_c = c.granularity
    lr, _, desired_bl, update_management, bl_management = settings
    n, n_in = x.shape
    n_out = d.shape[1]
    buf = buffer_rule(rule)
    zero = np.float32(0.0)
    v = np.empty(n_out, np.float32)
    pulses = np.empty(n_out, np.int64)
    x_write = np.zeros((1, n_in), np.float32)  # e_k and -n of a write with step != 1
    d_write = np.empty((1, n_out), np.float32)
    off = pulsed and not pulsed  # False, typed as the settings' um / blm (no second compilation of update_array)
    fast = (1.0 if eta.shape[0] > 0 else lr, dw_a, desired_bl, update_management, bl_management)  # UpdateSettings
    write = (rule.step * dw_c, dw_c, rule.transfer_bl, off, off)
    bounds, cols, col = _pieces(first, every, col, n, n_in)
    n_pieces = cols.shape[0]
    xs = np.empty((n, n_in), np.float32)  # the chopped vectors
    ds = np.empty((n, n_out), np.float32)
    snap = np.empty((n_out, n_pieces), np.float32)  # the column each read sees (rows apart: one per thread)
    colv = np.empty(n_out, np.float32)
    piece = np.zeros(2, np.int64)  # one piece's bounds and column (update_array_pieces' snap)
    colv_2d = np.empty((n_out, 1), np.float32)
    up_pulses = tr_pulses = reads = 0
    ahead = not rule.fast_lr_feedback
    if ahead:  # the choppers each piece sees, switched on copies as the reads below switch them
        ci, co, sw = c_in.copy(), c_out.copy(), switched.copy()
        ui, sw_sweeps = 0, sweeps
        for p in range(n_pieces):
            _chop(xs, ds, x, d, eta, rule, fb, bounds[p], bounds[p + 1], ci, co)
            if cols[p] >= 0:
                ui, sw_sweeps = switch_choppers(rule, uniforms, ui, cols[p], sw_sweeps, ci, co, sw)
        up_pulses = update_array_pieces(a_handle, xs, ds, fast, pulsed, bounds, cols, snap)
    ui = 0
    for p in range(n_pieces):
        if not ahead:
            start, end = bounds[p], bounds[p + 1]
            _chop(xs, ds, x, d, eta, rule, fb, start, end, c_in, c_out)
            piece[1] = end - start
            up_pulses += update_array_pieces(
                a_handle, xs[start:end], ds[start:end], fast, pulsed, piece, cols[p : p + 1], colv_2d
            )
            snap[:, p] = colv_2d[:, 0]
        k = cols[p]
        if k < 0:
            break
        # the read of column k
        for i in range(n_out):
            colv[i] = snap[i, p]
        read_column(reader, colv, v)
        reads += 1
        s = increment_scale(rule, sweeps, dw_a)
        latch = rule.dynamic and switched[k]
        any_n = False
        for i in range(n_out):
            ref = p_ref[i, k] if rule.dynamic else zero
            m = m_run[i, k] if rule.dynamic else zero
            h, q, ref, m, change = buffer_row(buf, s, c_in[k] * c_out[i], v[i], h_buf[i, k], ref, m, latch)
            if rule.dynamic:
                p_ref[i, k] = ref
                m_run[i, k] = m
                if latch and rule.fast_lr_feedback:
                    fb[1] = max(fb[1], change)
            h_buf[i, k] = h
            pulses[i] = q
            any_n = any_n or q != 0
        if latch:
            switched[k] = False
        if sweeps > rule.write_after and any_n and rule.step != 1.0:
            x_write[0, k] = 1.0
            for i in range(n_out):
                d_write[0, i] = -pulses[i]
            tr_pulses += update_array(c_handle, x_write[0:1], d_write[0:1], write, pulsed)
            x_write[0, k] = 0.0
        elif sweeps > rule.write_after and any_n:
            if queued[k]:
                tr_pulses += _flush(c_handle, pending, queued)
            for i in range(n_out):
                pending[i, k] = pulses[i]
            queued[k] = True
        ui, sweeps = switch_choppers(rule, uniforms, ui, k, sweeps, c_in, c_out, switched)
    for k in range(n_in):
        if queued[k]:
            tr_pulses += _flush(c_handle, pending, queued)
            break
    return col, sweeps, up_pulses, tr_pulses, reads


def chopped_transfer(
    tile: AnalogTile,
    arrays: tuple[int, int],
    x: np.ndarray,
    d: np.ndarray,
    steps: np.ndarray | float,
    rule: TransferRule,
    uniforms: np.ndarray,
    state: ChopperState,
    reads: tuple[int, int],
    position: tuple[int, int],
) -> TransferResult:
    """Run chopped_transfer_kernel on arrays (fast, slow) = (A, C) of `tile` for a batch x (n, in), d (n, out):
    the fast update with the tile's update settings, step `steps` per vector ((n,), folded into d) or one lr
    for all (a float), reads through the tile's forward periphery after vectors first, first + every, ...
    (reads = (first, every)) from column and sweep `position` = (col, sweeps). `state` changes in place; the
    counters of the tile and its arrays advance as their own methods advance them. A GPU tile
    (devices.gpu.tile.GpuTile, x and d tensors there) runs chopped_gpu.chopped_transfer_gpu instead."""
    if not isinstance(tile, AnalogTile):  # the GPU path loads only where it is used
        from aimc.trainers.algorithms.chopped_gpu import chopped_transfer_gpu

        return chopped_transfer_gpu(tile, arrays, x, d, steps, rule, uniforms, state, reads, position)
    per_vector = not np.isscalar(steps)
    eta = np.ascontiguousarray(steps, np.float64) if per_vector else np.zeros(0)
    out = chopped_transfer_kernel(
        tile.kernel_handles(*arrays),
        tile.update_settings(arrays[0], 1.0 if per_vector else float(steps)),
        tile.update_cfg.mode == "pulsed",
        np.ascontiguousarray(x, np.float32),
        np.ascontiguousarray(d, np.float32),
        eta,
        rule,
        np.ascontiguousarray(uniforms, np.float64),
        state,
        (int(reads[0]), int(reads[1]), int(position[0]), int(position[1])),
    )
    tile.invalidate()
    return TransferResult(*(int(v) for v in out))


flush_stale([sys.modules[__name__]], list(CACHED_MODULES))  # before any kernel of this module runs
