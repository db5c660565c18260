"""The chopped transfer of a mini-batch in one Numba call: aihwkit 1.1.0's ChoppedTransferCompound and
DynamicTransferCompound (c-TTv2, AGAD) as its CPU simulator runs them, for one tile.

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
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from aimc.devices.effects import NO_WRITE_NOISE, WRITE, redraw_kernel
from aimc.devices.expected_update import expected_update_kernel
from aimc.devices.loops import row_abs_max
from aimc.devices.periphery import read_one_hot
from aimc.devices.pulse_trains import clip_to_probability, plan_kernel
from aimc.devices.pulsed_set import new_set, set_of_mask
from aimc.devices.pulsed_update import pulsed_update_kernel
from aimc.devices.pulses import pulse_columns_kernel
from aimc.devices.tile import AnalogTile


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
    return (running_estimate(row_abs_max(x).astype(np.float64), m_x, tau),
            running_estimate(row_abs_max(d).astype(np.float64), m_d, tau))


@njit(cache=True)
def _update(w, app, wn, resp, noise, seed, counter, x, d, lr, dw_min, pulsed, desired_bl, um, blm):
    """One piece's update of the fast array (the tile's update; write noise redraws the touched apparent
    weights). Returns (pulses, counter)."""
    counter += 1
    if pulsed:
        wn_counter = counter + 1 if wn.shape[0] > 0 else 0  # the write-noise redraw's counter follows
        n = pulsed_update_kernel(w, x, d, lr, dw_min, desired_bl, um, blm, resp[0], resp[1], resp[2], resp[3],
                                 resp[4], resp[5], noise[0], noise[1], seed, counter, app, wn, wn_counter)
        counter = max(counter, wn_counter)
    else:
        marked = new_set(w.shape[0], w.shape[1], wn.shape[0] > 0)
        _, x_scale, d_scale = plan_kernel(x, d, abs(lr), dw_min, desired_bl, um, blm)
        dw = np.float32(-lr) * (clip_to_probability(d, d_scale).T @ clip_to_probability(x, x_scale))
        n = expected_update_kernel(w, dw.astype(np.float64), dw_min, resp[0], resp[1], resp[2], resp[3], resp[4],
                                   resp[5], noise[0], noise[1], seed, counter, marked)
        if wn.shape[0] > 0:
            counter += 1
            redraw_kernel(app, w, marked, np.broadcast_to(wn, app.shape), app, app, False, seed, counter, WRITE)
    return n, counter


@njit(cache=True)
def _fires(xs, ds, start, end) -> bool:
    """Whether a vector b in [start, end) has x_b and d_b both nonzero (else an update fires no pulse)."""
    for b in range(start, end):
        x_on = False
        for j in range(xs.shape[1]):
            if xs[b, j] != 0:
                x_on = True
                break
        if x_on:
            for i in range(ds.shape[1]):
                if ds[b, i] != 0:
                    return True
    return False


@njit(cache=True)
def _flush(w, app, wn, resp, noise, seed, counter, pending, queued):
    """Fire the queued pulses into the slow array (AnalogTile.pulse, visiting only the queued columns) and
    clear the queue. Returns (pulses, counter)."""
    cols = np.flatnonzero(queued)
    counter += 1
    n = pulse_columns_kernel(w, pending, cols, resp[0], resp[1], resp[2], resp[3], resp[4], resp[5], noise[0],
                             noise[1], seed, counter)
    if wn.shape[0] > 0:
        counter += 1
        redraw_kernel(app, w, set_of_mask(pending), np.broadcast_to(wn, app.shape), app, app, False, seed, counter,
                      WRITE)
    for k in cols:
        pending[:, k] = 0
        queued[k] = False
    return n, counter


@njit(cache=True)
def chopped_transfer_kernel(a_w, a_app, a_ref, a_wn, a_resp, a_noise, a_seed, a_counter, dw_min, pulsed,
                            desired_bl, um, blm, c_w, c_app, c_wn, c_resp, c_noise, c_seed, c_counter,
                            c_dw_min, read, r_seed, r_counter, x, d, eta, lr, first, every, rule, uniforms,
                            h_buf, c_in, c_out, m_run, p_ref, switched, fb, col, sweeps, pending, queued):
    """The module docstring's recursion for x (n, in), d (n, out) float32; eta (n,) float64 the step of each
    vector (folded into d, update lr 1) or empty (update lr `lr`). a_*: the fast array's updated weights
    (hidden ones under write noise), apparent weights, reference, write-noise std ((0, 0): none), response
    and noise tuples, seed, counter; c_* the same for the slow array (c_dw_min its granularity); read: the
    periphery tuple of read_one_hot; fb: the state of AGAD's fast-step feedback (module docstring). State
    arrays change in place. Returns (col, sweeps, a_counter, c_counter, r_counter, update pulses, transfer
    pulses, reads)."""
    n, n_in = x.shape
    n_out = d.shape[1]
    s = np.float32(rule.scale)
    mom = np.float32(rule.momentum)
    keep = np.float32(1.0 - rule.momentum)
    lim = np.float32(rule.buffer_cap * rule.transfer_bl)
    beta = np.float32(rule.beta)
    one_minus_beta = np.float32(1.0) - beta
    v = np.empty(n_out, np.float32)
    colv = np.empty(n_out, np.float32)
    pulses = np.empty(n_out, np.int64)
    x_write = np.zeros((1, n_in), np.float32)  # e_k and -n of a write with step != 1
    d_write = np.empty((1, n_out), np.float32)
    off = pulsed and not pulsed  # False, typed as the um / blm of _update (no second compilation of it)
    xs_all = np.empty((n, n_in), np.float32)  # the chopped vectors; a piece is a contiguous slice
    ds_all = np.empty((n, n_out), np.float32)
    up_pulses = tr_pulses = reads = 0
    ui = 0
    start = 0
    r = first  # the vector after which the next read comes
    while True:
        end = min(r + 1, n)
        if end > start:  # the fast update of vectors start .. end - 1 with the current choppers
            for b in range(start, end):
                step_b = eta[b] if eta.shape[0] > 0 else 0.0
                if rule.fast_lr_feedback:  # see the module docstring
                    t = fb[5] + b
                    if t <= n:
                        fb[2] = 0.0
                    if t - fb[2] >= fb[4]:
                        if fb[1] != 0.0:
                            fb[0] *= fb[3] / fb[1]
                        fb[1] = 0.0
                        fb[2] = t
                    step_b *= fb[0]
                for j in range(n_in):
                    xs_all[b, j] = x[b, j] * c_in[j]
                for i in range(n_out):
                    ds_all[b, i] = d[b, i] * c_out[i]
                    if eta.shape[0] > 0:
                        ds_all[b, i] *= np.float32(step_b)
            if _fires(xs_all, ds_all, start, end):
                p, a_counter = _update(a_w, a_app, a_wn, a_resp, a_noise, a_seed, a_counter, xs_all[start:end],
                                       ds_all[start:end], 1.0 if eta.shape[0] > 0 else lr, dw_min, pulsed,
                                       desired_bl, um, blm)
                up_pulses += p
            else:  # the update would take its counters and change nothing (no vector with x and d nonzero)
                a_counter += 1 if a_wn.shape[0] == 0 else 2
            start = end
        if r >= n:
            break
        r += every
        # the read of column k
        k = col
        for i in range(n_out):
            colv[i] = a_app[i, k] - a_ref[i, k]
        r_counter = read_one_hot(colv, read[0], read[1], read[2], read[3], read[4], read[5], read[6], read[7],
                                 r_seed, r_counter, v)
        reads += 1
        if rule.correct_accumulation:
            s = np.float32(rule.scale / min(sweeps % rule.period + 1, 1.0 / dw_min))
        if rule.dynamic and switched[k]:
            for i in range(n_out):
                if rule.fast_lr_feedback:
                    fb[1] = max(fb[1], abs(p_ref[i, k] - m_run[i, k]))
                p_ref[i, k] = m_run[i, k]
            switched[k] = False
        any_n = False
        for i in range(n_out):
            sign = c_in[k] * c_out[i]
            if rule.dynamic:
                inc = s * (sign * (v[i] - p_ref[i, k]))
                m_run[i, k] = one_minus_beta * m_run[i, k] + beta * v[i]
            else:
                inc = s * (sign * v[i])
            h = (np.float32(0.0) if rule.no_buffer else h_buf[i, k]) + inc
            q = 0
            if abs(h) >= 1:
                q = int(min(max(np.trunc(h), -rule.transfer_bl), rule.transfer_bl))
                if rule.forget_buffer:
                    h = h * mom
                else:
                    h = h - keep * np.float32(q)
                    if rule.buffer_cap > 0:
                        h = min(max(h, -lim), lim)
            h_buf[i, k] = h
            pulses[i] = q
            any_n = any_n or q != 0
        if sweeps > rule.write_after and any_n and rule.step != 1.0:
            x_write[0, k] = 1.0
            for i in range(n_out):
                d_write[0, i] = -pulses[i]
            p, c_counter = _update(c_w, c_app, c_wn, c_resp, c_noise, c_seed, c_counter, x_write[0:1], d_write[0:1],
                                   rule.step * c_dw_min, c_dw_min, pulsed, rule.transfer_bl, off, off)
            x_write[0, k] = 0.0
            tr_pulses += p
        elif sweeps > rule.write_after and any_n:
            if queued[k]:
                p, c_counter = _flush(c_w, c_app, c_wn, c_resp, c_noise, c_seed, c_counter, pending, queued)
                tr_pulses += p
            for i in range(n_out):
                pending[i, k] = pulses[i]
            queued[k] = True
        flip = rule.period > 0 and sweeps % rule.period + 1 == rule.period
        if rule.chop_random:
            if uniforms[ui] < rule.chop_prob:
                flip = True
            ui += 1
        if flip:
            c_in[k] = -c_in[k]
            if rule.dynamic:
                switched[k] = True
        col = (k + 1) % n_in
        if k == n_in - 1:
            if rule.out_chop_prob > 0:
                for i in range(n_out):
                    if uniforms[ui + i] < rule.out_chop_prob:
                        c_out[i] = -c_out[i]
                ui += n_out
            sweeps += 1
    for k in range(n_in):
        if queued[k]:
            p, c_counter = _flush(c_w, c_app, c_wn, c_resp, c_noise, c_seed, c_counter, pending, queued)
            tr_pulses += p
            break
    return col, sweeps, a_counter, c_counter, r_counter, up_pulses, tr_pulses, reads


def _array_args(a) -> tuple:
    """(updated weights, apparent weights, write-noise std or NO_WRITE_NOISE) of a ConductanceArray, of the
    types ConductanceArray passes, so that the kernels are compiled once for both."""
    if a.hidden is None:
        return a.w, a.w, NO_WRITE_NOISE
    return a.hidden, a.w, a.write_std


def chopped_transfer(tile: AnalogTile, fast: int, slow: int, x: np.ndarray, d: np.ndarray, eta: np.ndarray | None,
                     lr: float, first: int, every: int, rule: TransferRule, uniforms: np.ndarray, h_buf: np.ndarray,
                     c_in: np.ndarray, c_out: np.ndarray, m_run: np.ndarray, p_ref: np.ndarray, switched: np.ndarray,
                     col: int, sweeps: int, pending: np.ndarray, queued: np.ndarray,
                     feedback: np.ndarray | None = None) -> TransferResult:
    """Run chopped_transfer_kernel on arrays `fast` (A) and `slow` (C) of `tile` for a batch x (n, in), d (n, out):
    the fast update with the tile's update settings (step eta (n,) per vector, or lr for all where eta is
    None), reads through the tile's forward periphery after vectors first, first + every, ... The buffer H,
    choppers c_in, c_out (float32 +-1), AGAD's running mean M and reference Pref (float32 (out, in)) and
    switched flags (bool (in,)) change in place; pending (int64 (out, in)) and queued (bool (in,)) are the
    scratch queue of C's pulses (zero / False on entry and exit); feedback (float64 (6,), changed in place) is
    the state of AGAD's fast-step feedback where rule.fast_lr_feedback (eta then per vector). Counters of the
    tile and its arrays advance as their own methods advance them."""
    a, c = tile.arrays[fast], tile.arrays[slow]
    ucfg, rcfg = tile.update_cfg, tile.forward_cfg
    read = (rcfg.ideal, rcfg.inp_bound, rcfg.inp_bits or 0, rcfg.out_noise, rcfg.out_bound, rcfg.out_bits or 0,
            rcfg.bound_management, rcfg.max_bm_reads)
    a_w, a_app, a_wn = _array_args(a)
    c_w, c_app, c_wn = _array_args(c)
    out = chopped_transfer_kernel(
        a_w, a_app, a.reference, a_wn, a.params.response, a.params.noise, a.seed, a.counter, a.params.granularity,
        ucfg.mode == "pulsed", ucfg.desired_bl, ucfg.update_management, ucfg.update_bl_management,
        c_w, c_app, c_wn, c.params.response, c.params.noise, c.seed, c.counter, float(c.params.granularity), read,
        tile.stream.seed,
        tile.stream.counter, np.ascontiguousarray(x, np.float32), np.ascontiguousarray(d, np.float32),
        np.zeros(0) if eta is None else np.ascontiguousarray(eta, np.float64), float(lr), int(first), int(every),
        rule, np.ascontiguousarray(uniforms, np.float64), h_buf, c_in, c_out, m_run, p_ref, switched,
        np.zeros(6) if feedback is None else feedback, int(col),
        int(sweeps), pending, queued)
    col, sweeps, a.counter, c.counter, tile.stream.counter, up, tr, reads = out
    a.pulses += int(up)
    c.pulses += int(tr)
    tile.reads += int(reads)
    tile.invalidate()
    return TransferResult(int(col), int(sweeps), int(up), int(tr), int(reads))
