"""The pulsed update W -= lr d^T x of a mini-batch on a GPU: the twin of
devices.pulsed_update.pulsed_update_kernel, with its arguments and result and the same weights.

Three kernels, each a stage of the CPU kernel with its independent units as threads:
- the train plan, one thread per sample: the row maxima of |x| and |d| and devices.pulse_trains.sample_plan;
- the pulse trains, one thread per train set k < 2B (x's trains of sample k, then d's of sample k - B):
  devices.pulse_trains.fill_train from stream TRAIN_STREAMS + k, with x's slot lists and d's slot counts;
- the coincidences, one thread per row i: the samples, slots and slot lists of the row in the order of
  devices.coincidences.coincide_rows, each pulse fired by devices.pulses.noisy_pulse with normal k of the
  row's stream (seed, counter, i) for its k-th pulse (devices.normals.normal_at: the value coincide_rows'
  ring holds), then under write noise the redraw of the row's pulsed elements (app = w + std xi, the k-th
  pulsed column in column order with normal k of effects.row_key(seed, wn_counter, WRITE, i), as
  pulsed_redraw.redraw_pulsed_row).

Each kernel's thread body is an @njit function, compiled for the GPU where the kernel calls it; the kernels
take their arrays in tuples (bundles), which the CUDA simulator passes to the bodies as the arrays they are.
The host reads three values: whether x and d are finite (before any launch), the longest train (the size of
the slot lists; a train longer than SLOTS is split into chunks, as devices.pulsed_update.draw_trains splits
it) and the pulses fired.
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from numba import cuda, njit, uint32, uint64

from aimc.devices import CACHED_MODULES, device_base
from aimc.devices.bits import lowest_bit
from aimc.devices.effects import WRITE, row_key
from aimc.devices.gpu.runtime import launch
from aimc.devices.jit_cache import flush_stale
from aimc.devices.normals import normal_at
from aimc.devices.pulse_trains import INDEX, NOT_FINITE, SLOTS, sample_plan
from aimc.devices.pulsed_update import fill_trains_of
from aimc.devices.pulses import noisy_pulse
from aimc.devices.rng import stream_seed

WORD = 32
"""Columns per word of a row's set of pulsed columns (uint32 bit sets, write noise only)."""


@njit(cache=True)
def _row_abs_max(a, b) -> float:
    """max |a[b, :]| (0 for an empty row) of a float32 2-D array with finite values, as a float."""
    m = np.float32(0.0)
    for k in range(a.shape[1]):
        m = max(m, abs(a[b, k]))
    return float(m)


@njit(cache=True)
def plan_sample(b, inputs, settings, plan) -> None:
    """Train plan of sample b (devices.pulse_trains.plan_kernel's row b): inputs = (x, d), settings the
    update's UpdateSettings, plan = (bl int32, x_scale, d_scale), each (B,)."""
    x, d = inputs
    bl, x_scale, d_scale = plan
    lr, granularity, desired_bl, update_management, bl_management = settings
    managed = update_management or bl_management
    bl[b], x_scale[b], d_scale[b] = sample_plan(
        _row_abs_max(x, b), _row_abs_max(d, b), abs(lr), granularity, desired_bl, managed, bl_management
    )


@njit(cache=True)
def fill_train_set(k, inputs, plan, seed, counter, trains) -> None:
    """Train set k of the update: x's trains of sample k and their slot lists for k < B, else d's trains of
    sample k - B and their slot counts (as devices.pulsed_update.draw_trains draws them); trains =
    (x_masks, d_masks, x_lists, x_counts, d_counts), masks and counts zero on entry."""
    x, d = inputs
    bl, x_scale, d_scale = plan
    x_masks, d_masks, x_lists, x_counts, d_counts = trains
    fill_trains_of(k, x, d, x_scale, d_scale, bl, seed, counter, x_masks, d_masks, x_lists, x_counts, d_counts)


@njit(cache=True)
def coincide_row(i, state, inputs, trains, lr_sign, params, keys) -> None:
    """The coincidences of row i, then its write noise: state = (w, app, wn, fired, pulsed) with fired[i]
    set to the row's pulses and pulsed (rows, ceil(in / WORD)) uint32 the row's set of pulsed columns (zero
    on entry; no rows without write noise, wn without rows); keys = (seed, counter, wn_counter)."""
    w, app, wn, fired, pulsed = state
    d = inputs[1]
    _, d_masks, x_lists, x_counts, _ = trains
    ep, code, consts, grid, tab_up, tab_dn, sigma, additive = params
    seed, counter, wn_counter = keys
    key = stream_seed(uint64(seed), uint64(counter), uint64(i))
    noisy = sigma > 0.0
    marks = pulsed.shape[0] > 0
    wr = w[i]
    er = ep[i]
    n_fired = 0
    for b in range(d_masks.shape[0]):
        md = d_masks[b, i]
        d_up = uint32(lr_sign * d[b, i] < 0.0)
        while md != 0:
            t = lowest_bit(md)
            md &= md - uint32(1)
            js = x_lists[b, t]
            for a in range(x_counts[b, t]):
                e = js[a]
                j = e & INDEX
                up = (d_up ^ (e >> uint32(31))) != 0  # up where x and lr d have opposite signs
                xi = normal_at(key, n_fired) if noisy else np.float32(0.0)
                wr[j] = noisy_pulse(
                    wr[j], up, er, j, code, consts, grid, tab_up, tab_dn, sigma, additive, xi, np.float32, noisy
                )
                if marks:
                    pulsed[i, j // WORD] |= uint32(1) << uint32(j % WORD)
                n_fired += 1
    fired[i] = n_fired
    if marks and n_fired > 0:
        _redraw_row(i, w, app, wn[0, 0], pulsed[i], row_key(seed, wn_counter, WRITE, i))


@njit(cache=True, inline="always")
def _redraw_row(i, w, app, std, words, key) -> None:
    """app[i, j] = w[i, j] + std xi_k for the k-th column j of the set `words` (in column order), xi_k normal
    k of the stream `key`."""
    k = 0
    for q in range(words.shape[0]):
        m = words[q]
        while m != 0:
            j = WORD * q + lowest_bit(m)
            m &= m - uint32(1)
            app[i, j] = np.float32(w[i, j] + std * normal_at(key, k))
            k += 1


@cuda.jit
def plan_kernel(inputs, settings, plan):
    """plan_sample for every sample."""
    b = cuda.grid(1)
    if b < inputs[0].shape[0]:
        plan_sample(b, inputs, settings, plan)


@cuda.jit
def trains_kernel(inputs, plan, seed, counter, trains):
    """fill_train_set for every train set."""
    k = cuda.grid(1)
    if k < 2 * inputs[0].shape[0]:
        fill_train_set(k, inputs, plan, seed, counter, trains)


@cuda.jit
def coincidences_kernel(state, inputs, trains, lr_sign, params, keys):
    """coincide_row for every row."""
    i = cuda.grid(1)
    if i < state[0].shape[0]:
        coincide_row(i, state, inputs, trains, lr_sign, params, keys)


def _zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zero tensor; uint32 ones made as int32 and viewed (torch fills few kernels of its unsigned types)."""
    if dtype == torch.uint32:
        return torch.zeros(shape, dtype=torch.int32, device=device).view(torch.uint32)
    return torch.zeros(shape, dtype=dtype, device=device)


def plan(x: torch.Tensor, d: torch.Tensor, settings: tuple) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The train plan of an update (devices.pulse_trains.plan_kernel) on the GPU: (bl int32, x_scale float64,
    d_scale float64), each (B,), for x (B, in), d (B, out) float32 tensors with finite values and the
    UpdateSettings tuple `settings`."""
    out = tuple(_zeros((x.shape[0],), dtype, x.device) for dtype in (torch.int32, torch.float64, torch.float64))
    launch(plan_kernel, x.shape[0], (x, d), settings, out)
    return out


def split_long_trains(x: torch.Tensor, d: torch.Tensor, trains_plan: tuple) -> tuple:
    """devices.pulse_trains.split_long_trains on the GPU: every train longer than SLOTS split into consecutive
    chunks of SLOTS, ..., the rest slots, each a sample of its own with the sample's rows and scales. Returns
    (x, d, (bl, x_scale, d_scale)) of the chunks."""
    bl, x_scale, d_scale = trains_plan
    chunks = torch.clamp((bl + SLOTS - 1) // SLOTS, min=1)
    rows = torch.repeat_interleave(torch.arange(bl.shape[0], device=bl.device), chunks)
    first = torch.cumsum(chunks, 0) - chunks  # the first chunk of each sample
    chunk = torch.arange(rows.shape[0], device=bl.device) - first[rows]
    chunk_bl = torch.clamp(bl[rows] - SLOTS * chunk, 0, SLOTS).to(torch.int32)
    return x[rows].contiguous(), d[rows].contiguous(), (chunk_bl, x_scale[rows], d_scale[rows])


def pulsed_update(w, x, d, settings, params, seed, counter, app, wn, wn_counter) -> int:
    """W -= lr d^T x on the GPU, as devices.pulsed_update.pulsed_update_kernel: w (out, in), x (B, in),
    d (B, out) float32 tensors, app and wn float32 tensors (wn the write-noise std as (1, 1), or without
    rows: no write noise), the arrays of params (ElementKernelParams) tensors, all on one device; settings
    the UpdateSettings tuple. Changes w (and app under write noise) in place; returns the pulses fired.
    Raises ValueError where x or d is not finite."""
    if not bool((torch.isfinite(x).all() & torch.isfinite(d).all()).item()):
        raise ValueError(NOT_FINITE)
    batch, rows, cols = x.shape[0], w.shape[0], w.shape[1]
    dev = w.device
    trains_plan = plan(x, d, settings)
    max_bl = max(int(trains_plan[0].max().item()), 1) if batch > 0 else 1
    if max_bl > SLOTS:
        x, d, trains_plan = split_long_trains(x, d, trains_plan)
        batch, max_bl = x.shape[0], SLOTS
    inputs = (x, d)
    trains = (
        _zeros((batch, cols), torch.uint32, dev),
        _zeros((batch, rows), torch.uint32, dev),
        torch.empty((batch, max_bl, cols), dtype=torch.uint32, device=dev),  # read up to each slot's count
        _zeros((batch, max_bl), torch.int32, dev),
        _zeros((batch, max_bl), torch.int32, dev),
    )
    launch(trains_kernel, 2 * batch, inputs, trains_plan, int(seed), int(counter), trains)
    lr = settings[0]
    lr_sign = 1.0 if lr > 0 else (-1.0 if lr < 0 else 0.0)
    fired = _zeros((rows,), torch.int64, dev)
    words = (cols + WORD - 1) // WORD if wn.shape[0] > 0 else 0
    pulsed = _zeros((rows if words else 0, words), torch.uint32, dev)
    state = (w, app, wn, fired, pulsed)
    keys = (int(seed), int(counter), int(wn_counter))
    launch(coincidences_kernel, rows, state, inputs, trains, lr_sign, tuple(params), keys)
    return int(fired.sum().item())


# the thread bodies above inline the kernels of aimc.devices: their cache goes with those modules' sources
flush_stale([sys.modules[__name__]], [*CACHED_MODULES, device_base])
