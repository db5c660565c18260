#!/usr/bin/env python
"""How close a per-pulse simulation can come to the digital update: the large update of bench_update.py
(512x512 SoftBounds, batch 64, BL 31, ~1e6 coincidences), its coincidence stage taken apart, in one run.

On the same pulse trains and slot lists (built once by the staged kernels, bit-identical to the fused
update's) it times:
- torch: the digital update `W -= lr * d.T @ x` (float32);
- scatter: each coincidence adds a signed constant step to its element (`w[i, j] += s`): one load, one
  add and one store per pulse, walked as the real stage walks them (row by row, firing samples, slots);
- scatter + noise: the same with multiplicative cycle noise, `w[i, j] += s (1 + sigma xi)`, xi the
  vectorized normals the real stage uses (devices.normals), a row's normals filled in one call before
  its pulses (the real stage fills them in blocks as it goes: a little slower);
- coincidences, noiseless: the real stage without cycle noise (SoftBounds response with the element's
  own drawn parameters, clip at its bounds);
- coincidences: the real stage (devices.coincidences.coincidence_update_kernel): SoftBounds response with the
  element's own drawn parameters, noise, clip at the element's bounds;
- pulsed update: the whole update (train plan, trains, slot lists, coincidences) as a tile runs it.
The first two are not device models (no response, no bounds): they are floors, the least work any
simulator that applies every pulse must do. The floors walk the coincidences with a copy of the stage's
row walk (devices.coincidences.coincide_rows), because the stage inlines its response, prefetch and noise
refill into that walk, and a walk with a pluggable per-pulse action would change the code it measures.
Medians over rounds that alternate the contestants; ratios to torch from the same run. Prints a table,
then one JSON line.

    python benchmarks/bench_pulse_floor.py --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import numba
import numpy as np
from bench_update import times_ms  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from numba import get_thread_id, njit, prange, uint32

from aimc.devices.bits import lowest_bit  # noqa: E402
from aimc.devices.coincidences import coincidence_update_kernel  # noqa: E402
from aimc.devices.normals import BLOCK, fill_normals  # noqa: E402
from aimc.devices.pulse_trains import INDEX, plan_kernel, pulse_trains_kernel, slot_lists_kernel  # noqa: E402
from aimc.devices.rng import stream_seed  # noqa: E402


@njit(cache=True, inline="always")
def _scatter_row(i, w, x_lists, x_counts, d, lr_sign, d_masks, step, sigma, noisy, normals) -> int:
    """Row i of the floors: w[i, j] += step[up] (1 + sigma xi) for every coincidence of the row (sigma and
    normals unused unless noisy), up as in coincidence_update_kernel, xi = normals[k] for the row's pulse
    k; the walk over firing samples and slots follows the real stage's (devices.coincidences.coincide_rows).
    Returns the row's pulses."""
    wr = w[i]
    fired = 0
    for b in range(d_masks.shape[0]):
        md = d_masks[b, i]
        if md == 0:
            continue
        d_up = uint32(lr_sign * d[b, i] < 0.0)
        while md != 0:
            t = lowest_bit(md)
            md &= md - uint32(1)
            js = x_lists[b, t]
            n = x_counts[b, t]
            for a in range(n):
                e = js[a]
                up = (d_up ^ (e >> uint32(31))) & uint32(1)
                if noisy:
                    wr[e & INDEX] += step[up] * (np.float32(1.0) + sigma * normals[fired + a])
                else:
                    wr[e & INDEX] += step[up]
            fired += n
    return fired


@njit(cache=True, parallel=True)
def scatter_kernel(w, x_lists, x_counts, d, lr_sign, d_masks, step):
    """Floor 1: w[i, j] += step[up] for every coincidence. Returns the pulses."""
    fired = np.empty(w.shape[0], np.int64)
    none = np.empty(0, np.float32)
    for i in prange(w.shape[0]):
        fired[i] = _scatter_row(i, w, x_lists, x_counts, d, lr_sign, d_masks, step, np.float32(0.0), False, none)
    return fired.sum()


@njit(cache=True, parallel=True)
def scatter_noise_kernel(w, x_lists, x_counts, d, lr_sign, d_masks, step, sigma, seed, counter, normals):
    """Floor 2: w[i, j] += step[up] (1 + sigma xi), row i's normals filled in one call (devices.normals,
    stream (seed, counter, i)) before its pulses, into normals[thread] ((threads, room) float32, room >=
    the most pulses of a row rounded up to BLOCK). Returns the pulses."""
    fired = np.empty(w.shape[0], np.int64)
    for i in prange(w.shape[0]):
        row_normals = normals[get_thread_id()]
        n = 0
        for b in range(d_masks.shape[0]):
            md = d_masks[b, i]
            while md != 0:
                n += x_counts[b, lowest_bit(md)]
                md &= md - uint32(1)
        fill_normals(
            row_normals,
            0,
            (n + BLOCK - 1) // BLOCK * BLOCK,
            stream_seed(np.uint64(seed), np.uint64(counter), np.uint64(i)),
            0,
        )
        fired[i] = _scatter_row(i, w, x_lists, x_counts, d, lr_sign, d_masks, step, sigma, True, row_normals)
    return fired.sum()


def _most_row_pulses(x_counts: np.ndarray, d_masks: np.ndarray, max_bl: int) -> int:
    """The most coincidences of any row: sum over samples b and slots t of x_counts[b, t] where d's train
    of the row fires in slot t."""
    fires = np.stack([(d_masks >> np.uint32(t)) & 1 for t in range(max_bl)], -1)  # (B, out, max_bl)
    return int((fires * x_counts[:, None, :]).sum((0, 2)).max())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2, help="Numba and torch threads")
    p.add_argument("--repeats", type=int, default=50, help="timed calls per round and contestant")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    import torch

    from aimc.devices import ConductanceArray, SoftBounds, UpdateConfig, set_kernel_threads

    torch.set_num_threads(a.threads)
    set_kernel_threads(a.threads)
    size, batch, lr = 512, 64, 0.1  # bench_update.py's large regime
    rng = np.random.default_rng(a.seed)
    dev = SoftBounds()
    arr = ConductanceArray(size, size, dev, seed=a.seed)
    w0 = rng.uniform(-0.1, 0.1, arr.shape).astype(np.float32)
    x = (0.25 * rng.standard_normal((batch, size))).astype(np.float32)
    d = (3.75e-3 * rng.standard_normal((batch, size))).astype(np.float32)
    prm = arr.params
    bl, x_scale, d_scale = plan_kernel(x, d, lr, prm.granularity, 31, True, True)
    max_bl = max(1, int(bl.max()))
    x_masks = pulse_trains_kernel(x, x_scale, bl, arr.seed, 0, 0)
    d_masks = pulse_trains_kernel(d, d_scale, bl, arr.seed, 0, batch)
    x_lists, x_counts = slot_lists_kernel(x_masks, x, max_bl)
    step = np.array([-dev.dw_min, dev.dw_min], np.float32)  # index 1: up
    sigma = np.float32(dev.dw_min_std)
    cfg = UpdateConfig(mode="pulsed")
    most = _most_row_pulses(x_counts, d_masks, max_bl)
    normals = np.empty((numba.get_num_threads(), (most + BLOCK - 1) // BLOCK * BLOCK), np.float32)
    W = torch.from_numpy(w0.copy())
    xt, dt = torch.from_numpy(x), torch.from_numpy(d)

    def reset():
        arr.w[...] = w0

    def torch_reset():
        W.copy_(torch.from_numpy(w0))

    def torch_update():
        W.sub_(lr * dt.T @ xt)

    contestants = {
        "torch": (torch_update, torch_reset),
        "scatter": (lambda: scatter_kernel(arr.w, x_lists, x_counts, d, 1.0, d_masks, step), reset),
        "scatter_noise": (
            lambda: scatter_noise_kernel(arr.w, x_lists, x_counts, d, 1.0, d_masks, step, sigma, arr.seed, 0, normals),
            reset,
        ),
        "coincidences_noiseless": (
            lambda: coincidence_update_kernel(
                arr.w, (x_lists, x_counts, d_masks), d, 1.0, (*prm.kernel[:6], 0.0, False), arr.seed, 0
            ),
            reset,
        ),
        "coincidences": (
            lambda: coincidence_update_kernel(arr.w, (x_lists, x_counts, d_masks), d, 1.0, prm.kernel, arr.seed, 0),
            reset,
        ),
        "pulsed_update": (lambda: arr.update(x, d, lr, cfg), reset),
    }
    pulses = {k: int(f()) for k, (f, _) in contestants.items() if k != "torch"}
    times: dict[str, list[float]] = {k: [] for k in contestants}
    for _ in range(a.rounds):
        for name, (fn, rs) in contestants.items():
            times[name] += times_ms(fn, rs, a.repeats, a.warmup)
    med = {k: float(np.median(v)) for k, v in times.items()}
    fastest = {k: float(np.min(v)) for k, v in times.items()}
    out = {
        "threads": a.threads,
        "rounds": a.rounds,
        "repeats": a.repeats,
        "pulses": pulses,
        "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "median_ms": med,
        "fastest_ms": fastest,
        "over_torch": {k: med[k] / med["torch"] for k in med},
        "ns_per_pulse_per_thread": {k: med[k] * 1e6 * a.threads / pulses[k] for k in pulses},
    }
    print(
        f"512x512 SoftBounds, batch 64, BL 31, large regime, {a.threads} threads, median of "
        f"{a.rounds} x {a.repeats} calls"
    )
    print(f"{'':22s} {'pulses':>9s} {'median ms':>10s} {'fastest ms':>11s} {'/ torch':>8s} {'ns/pulse/thread':>16s}")
    for k in contestants:
        per = out["ns_per_pulse_per_thread"].get(k)
        print(
            f"{k:22s} {pulses.get(k, 0):9d} {med[k]:10.3f} {fastest[k]:11.3f} {out['over_torch'][k]:8.2f} "
            f"{'' if per is None else f'{per:16.2f}'}"
        )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
