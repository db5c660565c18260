#!/usr/bin/env python
"""Time `aimc.calibration.fit` on a population of simulated devices: 16 devices (default) of a preset with
its device-to-device spread, measured over 3 potentiation/depression cycles of 1.5 x the preset's states per
direction with read noise a quarter of a step, every family fitted. Prints one line per preset and, last,
one JSON line with every number (wall time of the fit alone, the trace file and report not included).
--ab alternates, per preset, a fit that compares the starting points on all increments (search sample off,
as before `family_fit.SEARCH_SAMPLE`) with one that compares them on a subsample (on), in the same run.
--noise-ab alternates, per preset, the increment model of the clipped mean step (fit(cycle_noise=False)) with
that of the clipped noisy step (cycle_noise=True), in the same run; it prints the best family and the BIC gap
between the preset's own family and the best.
--methods pooled,per-device (default both) times each fit method on the same traces; wall and CPU seconds.
--per-family times each family's pooled least-squares fit alone (`fit_family`, as `fit` runs it: every start,
the search subsample, the refinement on all increments; tabulated: `fit_tabulated`) on the same increments,
after a fit of every family to 2000 increments that compiles the kernels; it prints seconds, evaluations and BIC.
--report also times the report of each fit (`write_report` into a temporary folder, 64 elements, as `aimc fit`
writes it): the whole command's work is the fit's and the report's seconds together.
--gls fits by generalised least squares (`fit(gls=True)`) and records the read-noise share it used.
--workers N fits the families in N processes (`fit(workers=N)`); the workers are started again for every
timed fit, as for one `aimc fit` command. --command times the command itself instead (`python -m aimc fit
TRACES.csv --out DIR --quiet --workers N` on the traces written as CSV, in a subprocess: Python's start, the
imports, reading the file, the fit and the report), one line per preset and worker count of --workers
(a comma-separated list there).

    python benchmarks/bench_fit.py --presets ecram,reram_sb,pcm_like --devices 16 --cycles 3 \
        [--methods pooled,per-device] [--ab | --noise-ab | --per-family] [--report] [--workers 2]
    python benchmarks/bench_fit.py --presets reram_sb --command --workers 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
from joblib.externals.loky import get_reusable_executor

from aimc.calibration import (  # noqa: E402
    families,
    family_fit,
    fit,
    fit_family,
    fit_tabulated,
    measure_cycles,
    write_csv,
    write_report,
)
from aimc.calibration.families import FAMILY_KINDS  # noqa: E402
from aimc.calibration.pulse_data import pulse_data, weight_map_for  # noqa: E402
from aimc.devices import get_preset  # noqa: E402


def per_family(name: str, traces) -> list[dict]:
    """Wall time of each family's pooled fit alone on the increments of `traces` (module docstring)."""
    data = pulse_data(traces, weight_map_for(traces))
    specs = families(6, data.dw0)
    warm = data.subset(np.arange(min(data.n, 2000)))
    for k in FAMILY_KINDS:
        fit_tabulated(warm) if k == "tabulated" else fit_family(specs[k], warm)
    rows = []
    for k in FAMILY_KINDS:
        t0 = time.perf_counter()
        f = fit_tabulated(data) if k == "tabulated" else fit_family(specs[k], data)
        wall = time.perf_counter() - t0
        rows.append(
            {
                "preset": name,
                "family": k,
                "increments": data.n,
                "wall_s": round(wall, 2),
                "bic": f.bic,
                "message": f.message,
            }
        )
        print(f"{name:<10} {k:<15} {wall:6.2f} s  BIC {f.bic:.1f}  {f.message}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="ecram,reram_sb,pcm_like")
    ap.add_argument("--devices", type=int, default=16)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--methods", default="pooled,per-device", help="fit methods, each timed (pooled, per-device)")
    ap.add_argument("--ab", action="store_true", help="alternate search sample off / on (module docstring)")
    ap.add_argument("--noise-ab", action="store_true", help="alternate cycle_noise off / on (module docstring)")
    ap.add_argument("--per-family", action="store_true", help="time each family's fit alone (module docstring)")
    ap.add_argument("--repeats", type=int, default=1, help="A/B pairs per preset (--ab, --noise-ab)")
    ap.add_argument("--report", action="store_true", help="time the report of each fit too (module docstring)")
    ap.add_argument("--gls", action="store_true", help="fit(gls=True): generalised least squares (docs/calibration.md)")
    ap.add_argument("--workers", default="1", help="processes that fit the families; --command: a list (1,2)")
    ap.add_argument("--command", action="store_true", help="time the whole `aimc fit` command (module docstring)")
    args = ap.parse_args()
    sample = family_fit.SEARCH_SAMPLE
    rows = []
    for name in args.presets.split(","):
        dev = get_preset(name)
        tr = measure_cycles(dev, n_cycles=args.cycles, n_devices=args.devices, read_noise=0.25 * dev.dw_min, seed=0)
        if args.per_family:
            rows += per_family(name, tr)
            continue
        if args.command:
            rows += timed_commands(name, tr, [int(w) for w in args.workers.split(",")])
            continue
        for method in args.methods.split(","):
            rows += timed_fits(name, dev, tr, method, args, sample)
    print(
        json.dumps(
            {
                "devices": args.devices,
                "cycles": args.cycles,
                "python": platform.python_version(),
                "load_average": os.getloadavg(),
                "results": rows,
            }
        )
    )


def timed_fits(name: str, dev, tr, method: str, args, sample: int) -> list[dict]:
    """Wall and CPU time of `fit(tr, method=method)` (with --ab / --noise-ab: the alternating runs)."""
    rows = []
    kw = {"method": method, **({"gls": True} if args.gls else {})}
    if args.noise_ab:
        runs = [(sample, {"cycle_noise": cn}) for _ in range(args.repeats) for cn in (False, True)]
    elif args.ab:
        runs = [(search, {}) for _ in range(args.repeats) for search in (None, sample)]
    else:
        runs = [(sample, {})]
    for search, extra in runs:
        family_fit.SEARCH_SAMPLE = search or 2**62
        get_reusable_executor().shutdown(wait=True)  # the workers start inside the timed fit, as in a command
        t0, c0 = time.perf_counter(), time.process_time()
        res = fit(tr, **kw, **extra, workers=int(args.workers))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        report = {}
        if args.report:
            t1, c1 = time.perf_counter(), time.process_time()
            with tempfile.TemporaryDirectory() as tmp:
                write_report([res], tmp)
            report = {
                "report_wall_s": round(time.perf_counter() - t1, 2),
                "report_cpu_s": round(time.process_time() - c1, 2),
            }
        own = res.fits[dev.kind].bic - res.best.bic if dev.kind in res.fits else None
        rows.append(
            {
                "preset": name,
                "kind": dev.kind,
                "reads": len(tr.conductance),
                "increments": res.data.n,
                "best": res.best.kind,
                "own_delta_bic": own,
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "search_sample": search,
                "workers": int(args.workers),
                "gls_share": res.data.read_share if args.gls else None,
                **kw,
                **extra,
                "bic": {k: f.bic for k, f in res.fits.items()},
                **report,
            }
        )
        print(
            f"{name:<10} {dev.kind:<12} {method:<10} reads {len(tr.conductance):>7}  best {res.best.kind:<13} "
            f"{wall:6.1f} s (CPU {cpu:5.1f} s)  search sample {search or 'off'}  {extra or ''} own family dBIC {own}"
            f"  {report or ''}",
            flush=True,
        )
    family_fit.SEARCH_SAMPLE = sample
    return rows


def timed_commands(name: str, tr, workers: list[int]) -> list[dict]:
    """Wall time of the whole `aimc fit` command on the traces `tr`, for each worker count (module docstring)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        csv = write_csv(tr, os.path.join(tmp, f"{name}.csv"))
        for w in workers:
            cmd = [sys.executable, "-m", "aimc", "fit", str(csv), "--out", os.path.join(tmp, f"fit{w}"), "--quiet"]
            t0 = time.perf_counter()
            subprocess.run([*cmd, "--workers", str(w)], check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - t0
            rows.append({"preset": name, "command": "aimc fit", "workers": w, "wall_s": round(wall, 2)})
            print(f"{name:<10} aimc fit --workers {w}: {wall:6.1f} s", flush=True)
    return rows


if __name__ == "__main__":
    main()
