#!/usr/bin/env python
"""Time one mini-batch update of a 512x512 SoftBounds array: aimc pulsed and expected modes, the digital
torch update `W -= lr * d.T @ x` on the same inputs, and (with --aihwkit-python) aihwkit 1.1.0's SoftBounds
tile run as a subprocess (benchmarks/aihwkit/bench_update_aihwkit.py) with the same x/d parameters.

Two regimes: small (d_std 2e-4, lr 0.01, ~5e3 pulses per batch) and large
(d_std 3.75e-3, lr 0.1, ~1e6 pulses). Each timing is the median over --repeats calls from the same start
weights (reset outside the timed region). Prints a table and, last, one JSON line with every number.
aihwkit / pulsed is given three ways: by the medians over all rounds, by the fastest call of each
("fastest calls"), and paired by round ("paired rounds": the median over rounds of aihwkit's median in the
round over ours in the same round). A VM whose host slows down for a while moves a median but not the
fastest call; the paired ratio compares timings taken seconds apart, so a slow phase that spans a round
hits both sides.

    python benchmarks/bench_update.py --threads 2 --aihwkit-python ~/aihwkit-venv/bin/python

With --effects it times instead what aihwkit's device effects cost (devices/effects.py): one training step's
device work, the pulsed update plus `post_update_step` (diffusion, decay), for SoftBounds without effects and
with write noise, decay or diffusion on, in both regimes; rounds alternate the devices.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

REGIMES = {"small": dict(d_std=2e-4, lr=0.01), "large": dict(d_std=3.75e-3, lr=0.1)}


def times_ms(fn, reset, repeats: int, warmup: int) -> list[float]:
    """Wall times of fn() in ms; reset() runs before every call, untimed."""
    for _ in range(warmup):
        reset()
        fn()
    times = []
    for _ in range(repeats):
        reset()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def run_aihwkit(python: str, a: argparse.Namespace) -> dict:
    script = ROOT / "benchmarks" / "aihwkit" / "bench_update_aihwkit.py"
    cmd = [
        python,
        str(script),
        "--threads",
        str(a.threads),
        "--repeats",
        str(a.repeats),
        "--out-size",
        str(a.size),
        "--in-size",
        str(a.size),
        "--batch",
        str(a.batch),
        "--x-std",
        str(a.x_std),
        "--d-std-small",
        str(REGIMES["small"]["d_std"]),
        "--d-std-large",
        str(REGIMES["large"]["d_std"]),
        "--lr-small",
        str(REGIMES["small"]["lr"]),
        "--lr-large",
        str(REGIMES["large"]["lr"]),
        "--seed",
        str(a.seed),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


EFFECTS = {
    "none": {},
    "write noise": dict(write_noise_std=1.0),
    "decay": dict(lifetime=100.0, lifetime_dtod=0.3),
    "diffusion": dict(diffusion=1e-3, diffusion_dtod=0.3),
}


def floor_work(size: int) -> dict:
    """The least work decay and diffusion add to a step under aihwkit's rule of acting on every element once per
    step, as callables on (size, size) float32 arrays: "decay pass", one pass that reads every weight and its
    own scale and writes the weight (w *= s, 3 bytes x 4 per element); "normals", one standard normal per
    element from the kernels' generator (devices/normals.py), before any weight is touched."""
    from numba import njit

    from aimc.devices.normals import fill_normals

    @njit
    def scale_pass(w, s):
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                w[i, j] *= s[i, j]

    w = np.ones((size, size), np.float32)
    s = np.full((size, size), 0.99, np.float32)
    xi = np.empty((size * size + 31) // 32 * 32, np.float32)
    return {"decay pass": lambda: scale_pass(w, s), "normals": lambda: fill_normals(xi, 0, xi.size, 12345, 0)}


def effect_costs(a: argparse.Namespace) -> int:
    """Median and fastest ms of update + post_update_step per device of EFFECTS and regime, and the ratios to
    "none"; and the floors of floor_work, timed in the same rounds, as (none + floor) / none."""
    from aimc.devices import ConductanceArray, SoftBounds, set_kernel_threads

    set_kernel_threads(a.threads)
    rng = np.random.default_rng(a.seed)
    arrays = {k: ConductanceArray(a.size, a.size, SoftBounds(**f), seed=a.seed) for k, f in EFFECTS.items()}
    w0 = rng.uniform(-0.1, 0.1, (a.size, a.size)).astype(np.float32)
    x = (a.x_std * rng.standard_normal((a.batch, a.size))).astype(np.float32)
    inputs = {
        n: (reg["d_std"] * rng.standard_normal((a.batch, a.size))).astype(np.float32) for n, reg in REGIMES.items()
    }
    floors = floor_work(a.size)
    times = {(n, k): [] for n in REGIMES for k in EFFECTS} | {k: [] for k in floors}
    for _ in range(a.rounds):
        for name, reg in REGIMES.items():
            for k, arr in arrays.items():

                def step():
                    arr.update(x, inputs[name], reg["lr"])
                    arr.post_update_step()

                times[name, k] += times_ms(step, lambda: arr.set_weights(w0), a.repeats, a.warmup)
        for k, fn in floors.items():
            times[k] += times_ms(fn, lambda: None, a.repeats, a.warmup)
    results = {
        "size": a.size,
        "batch": a.batch,
        "threads": a.threads,
        "repeats": a.repeats,
        "rounds": a.rounds,
        "machine": platform.processor() or platform.machine(),
        "load_average": os.getloadavg()[0],
    }
    print(
        f"{a.size}x{a.size} SoftBounds, batch {a.batch}: update + post_update_step, ms (ratio to none), by the "
        "medians and by the fastest calls"
    )
    for name in REGIMES:
        results[name] = {}
        for stat, fn in (("median", np.median), ("fastest", np.min)):
            row = {k: float(fn(times[name, k])) for k in EFFECTS}
            base = row["none"]
            results[name].update({f"{k}_{stat}_ms": v for k, v in row.items()})
            results[name].update({f"{k}_{stat}_over_none": v / base for k, v in row.items()})
            print(f"{name:7s} {stat:8s}" + "  ".join(f"{k} {v:.3f} ({v / base:.2f})" for k, v in row.items()))
        for k in floors:
            floor = float(np.min(times[k]))
            ratio = 1 + floor / results[name]["none_fastest_ms"]
            results[name].update({f"{k}_fastest_ms": floor, f"none_plus_{k}_fastest_over_none": ratio})
            print(f"{name:7s} floor    {k} {floor:.3f} ms: (none + floor) / none {ratio:.2f} by the fastest calls")
    print(json.dumps(results))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2, help="Numba and torch threads")
    p.add_argument("--repeats", type=int, default=50, help="timed calls per round and configuration")
    p.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="rounds alternating torch, aimc and aihwkit, so that a changing machine load hits all alike",
    )
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--x-std", type=float, default=0.25)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--aihwkit-python", default=None, help="interpreter of a venv with aihwkit 1.1.0")
    p.add_argument("--effects", action="store_true", help="time aihwkit's device effects instead (docstring)")
    a = p.parse_args()
    if a.effects:
        return effect_costs(a)

    # aimc first: importing it sets GOMP_SPINCOUNT (unless set) before torch starts its OpenMP pool, as the
    # aimc command does (aimc/__init__.py)
    import torch

    from aimc.devices import ConductanceArray, SoftBounds, UpdateConfig, set_kernel_threads

    torch.set_num_threads(a.threads)
    set_kernel_threads(a.threads)
    rng = np.random.default_rng(a.seed)
    dev = SoftBounds()  # aihwkit's SoftBoundsDevice defaults: dw_min 1e-3, 30% spreads and cycle noise
    arr = ConductanceArray(a.size, a.size, dev, seed=a.seed)
    w0 = rng.uniform(-0.1, 0.1, arr.shape).astype(np.float32)
    x = (a.x_std * rng.standard_normal((a.batch, a.size))).astype(np.float32)

    def reset():
        arr.w[...] = w0

    results: dict = {
        "size": a.size,
        "batch": a.batch,
        "desired_bl": 31,
        "threads": a.threads,
        "repeats": a.repeats,
        "rounds": a.rounds,
        "cpu_count": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
        "load_average_before": os.getloadavg()[0],
    }
    inputs = {}
    for name, reg in REGIMES.items():
        d = (reg["d_std"] * rng.standard_normal((a.batch, a.size))).astype(np.float32)
        inputs[name] = d
        results[name] = {
            "d_std": reg["d_std"],
            "lr": reg["lr"],
            "x_std": a.x_std,
            "formula_pulses": float(
                reg["lr"] * (np.abs(x).astype(float).sum(1) * np.abs(d).astype(float).sum(1)).sum() / dev.dw_min
            ),
        }
    times: dict = {(n, k): [] for n in REGIMES for k in ("torch", "pulsed", "expected", "aihwkit", "aihwkit_min")}
    round_pulsed: dict = {n: [] for n in REGIMES}  # median of each round's pulsed calls
    fired: dict = {(n, m): [] for n in REGIMES for m in ("pulsed", "expected")}
    ak = None
    for _ in range(a.rounds):
        for name, reg in REGIMES.items():
            d, lr = inputs[name], reg["lr"]
            W = torch.from_numpy(w0.copy())  # digital torch update on the same inputs
            xt, dt = torch.from_numpy(x), torch.from_numpy(d)

            def torch_reset():
                W.copy_(torch.from_numpy(w0))

            def torch_update():
                nonlocal W
                W -= lr * dt.T @ xt

            times[name, "torch"] += times_ms(torch_update, torch_reset, a.repeats, a.warmup)
            for mode in ("pulsed", "expected"):
                cfg = UpdateConfig(mode=mode)

                def ours():
                    fired[name, mode].append(arr.update(x, d, lr, cfg))

                t = times_ms(ours, reset, a.repeats, a.warmup)
                times[name, mode] += t
                if mode == "pulsed":
                    round_pulsed[name].append(float(np.median(t)))
        if a.aihwkit_python:
            ak = run_aihwkit(os.path.expanduser(a.aihwkit_python), a)
            for name in REGIMES:
                times[name, "aihwkit"].append(ak[f"{name}_ms_median"])
                times[name, "aihwkit_min"].append(ak[f"{name}_ms_min"])
    for name in REGIMES:
        r = results[name]
        for k in ("torch", "pulsed", "expected"):
            r[f"{k}_ms"], r[f"{k}_ms_min"] = float(np.median(times[name, k])), float(np.min(times[name, k]))
        for mode in ("pulsed", "expected"):
            r[f"{mode}_pulses"] = float(np.mean(fired[name, mode]))
            r[f"{mode}_over_torch"] = r[f"{mode}_ms"] / r["torch_ms"]
        if ak is not None:
            r["aihwkit_ms"] = float(np.median(times[name, "aihwkit"]))  # median of the rounds' medians
            r["aihwkit_ms_min"] = float(np.min(times[name, "aihwkit_min"]))
            r["aihwkit_expected_pulses"] = ak[f"{name}_expected_pulses"]
            r["aihwkit_over_pulsed"] = r["aihwkit_ms"] / r["pulsed_ms"]
            r["aihwkit_over_pulsed_fastest"] = r["aihwkit_ms_min"] / r["pulsed_ms_min"]  # robust to host preemption
            r["aihwkit_over_pulsed_paired"] = float(
                np.median(np.array(times[name, "aihwkit"]) / np.array(round_pulsed[name]))
            )
            r["aihwkit_over_expected"] = r["aihwkit_ms"] / r["expected_ms"]
    if ak is not None:
        results["aihwkit"] = {k: ak[k] for k in ("aihwkit_version", "torch_version", "threads", "repeats")}
    results["load_average_after"] = os.getloadavg()[0]
    print(
        f"{a.size}x{a.size} SoftBounds, batch {a.batch}, BL 31, {a.threads} threads, "
        f"median of {a.rounds} x {a.repeats}, load average {results['load_average_before']:.1f} -> "
        f"{results['load_average_after']:.1f}"
    )
    head = (
        f"{'regime':7s} {'formula':>9s} {'pulses':>9s} {'torch ms':>9s} {'pulsed ms':>10s} {'expect ms':>10s} "
        f"{'pulsed/torch':>12s} {'expect/torch':>12s}"
    )
    if a.aihwkit_python:
        head += f" {'aihwkit ms':>10s} {'aihwkit/pulsed':>14s} {'fastest calls':>13s} {'paired rounds':>13s}"
    print(head)
    for name in REGIMES:
        r = results[name]
        line = (
            f"{name:7s} {r['formula_pulses']:9.3g} {r['pulsed_pulses']:9.3g} {r['torch_ms']:9.3f} "
            f"{r['pulsed_ms']:10.3f} {r['expected_ms']:10.3f} {r['pulsed_over_torch']:12.2f} "
            f"{r['expected_over_torch']:12.2f}"
        )
        if a.aihwkit_python:
            line += (
                f" {r['aihwkit_ms']:10.3f} {r['aihwkit_over_pulsed']:14.2f}"
                f" {r['aihwkit_over_pulsed_fastest']:13.2f} {r['aihwkit_over_pulsed_paired']:13.2f}"
            )
        print(line)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
