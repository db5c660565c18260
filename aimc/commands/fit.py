"""`aimc fit TRACES.csv --out DIR`: fit every response family to pulse traces, export the device, report.

The output folder appears complete or not at all: everything is written into a temporary folder beside it,
which is renamed to DIR at the end (a previous DIR is replaced only then), so a failed fit leaves no part.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from aimc.common.workers import start_workers


def _replace_folder(tmp: Path, out: Path) -> None:
    """Move the finished folder `tmp` to `out`, replacing a previous `out` only once `tmp` is complete."""
    if not out.exists():
        os.replace(tmp, out)
        return
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
    os.replace(out, old / out.name)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)


def _population(result, kind: str) -> str:
    """What a per-device fit made a family's population from (docs/calibration.md); '' for a pooled fit."""
    if result.method != "per-device":
        return ""
    if kind == "tabulated":
        return "  pooled table"
    return "  one parameter set for all devices" if result.fits[kind].shared else "  median of the per-device fits"


def _run(args: argparse.Namespace) -> int:
    import numba

    workers = numba.config.NUMBA_NUM_THREADS if args.workers is None else args.workers
    # the workers that fit the families start while this process imports and reads the traces
    starting = (
        start_workers(workers, "aimc.calibration.family_pool")
        if args.families is None or "," in args.families
        else None
    )
    from aimc.calibration import fit, read_traces, write_report
    from aimc.calibration.report import check_elements

    check_elements(args.elements)  # before the fit, not after it
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} exists and is not a folder")
    traces = read_traces(args.traces, args.format)
    kinds = [k.strip() for k in args.families.split(",")] if args.families else None
    if starting is not None:
        starting.join()
    result = fit(
        traces,
        kinds=kinds,
        criterion=args.criterion,
        g_mid=args.g_mid,
        g_scale=args.g_scale,
        n_bins=args.bins,
        n_nodes=args.nodes,
        spread=not args.no_spread,
        source=", ".join(args.traces),
        method=args.method,
        progress=not args.quiet and sys.stderr.isatty(),
        intervals=args.intervals,
        n_boot=args.bootstrap,
        seed=args.seed,
        cycle_noise=args.cycle_noise,
        anchor=args.anchor,
        likelihood=args.likelihood,
        gls=args.gls,
        workers=workers,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        result.save(tmp)
        write_report(
            [result],
            tmp,
            n_elements=args.elements,
            seed=args.seed,
            title=f"aimc fit of {', '.join(Path(t).name for t in args.traces)}",
        )
        _replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for row in result.ranking_table():
        print(
            f"{row['kind']:<14} k={row['k']:<3} d{args.criterion.upper()}={row['delta_' + args.criterion]:10.1f}"
            f"{_population(result, row['kind'])}"
        )
    print(f"best: {result.best.kind}; device file {out}/device.json; report {out / 'report.html'}")
    for line in result.warnings:
        print(f"warning: {line}", file=sys.stderr)
    return 0


def register(sub) -> None:
    """Add the `fit` sub-command to the sub-parsers `sub`."""
    what = "fit response families to pulse traces (CSV), export the device and a report"
    p = sub.add_parser(
        "fit",
        help=what,
        description=f"{what[0].upper()}{what[1:]}: every family of the device layer is fitted to the increments "
        "of the traces, ranked by BIC (or AIC), and the best one exported as DIR/device.json with its noise and "
        "device-to-device spread; DIR/fit.json holds every number, DIR/report.html the report (figures as PNG and "
        "PDF beside it). docs/calibration.md describes the formats and the method.",
    )
    p.add_argument("traces", nargs="+", help="trace file (docs/calibration.md); --format runs: one file per run")
    p.add_argument(
        "--format",
        choices=("traces", "runs", "matrix"),
        default="traces",
        help="traces: device,pulse,polarity,conductance rows; runs: pulse,conductance files of one "
        "potentiation or depression run each; matrix: pulse,polarity,LABEL... (one column per "
        "device or cycle)",
    )
    p.add_argument(
        "--out", required=True, help="output folder: device.json, fit.json, report.html, report.json, PNGs, PDFs"
    )
    p.add_argument(
        "--families",
        default=None,
        help="comma-separated families to fit (default: all, the up/down "
        "families power_ud and exponential_ud included)",
    )
    p.add_argument("--criterion", choices=("bic", "aic"), default="bic", help="model selection criterion")
    p.add_argument(
        "--method",
        choices=("per-device", "pooled"),
        default="per-device",
        help="each device alone, then the population: one parameter set for all devices unless their "
        "own sets reject it, else the median of theirs (default; the pooled fit where fewer than 3 "
        "devices have enough increments), or one fit of all devices pooled",
    )
    p.add_argument(
        "--intervals",
        choices=("analytic", "bootstrap"),
        default="analytic",
        help="95%% intervals: analytic (pooled: Jacobian sandwich; per-device: order statistics of the "
        "median) or bootstrap over devices and cycles (percentile; pooled: the best family refitted "
        "per resample)",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=None,
        metavar="N",
        help="resamples of --intervals bootstrap (default: 200 refits pooled, 2000 per-device)",
    )
    p.add_argument(
        "--cycle-noise",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="fit the mean of the noisy step clipped at the bounds, the cycle noise measured first on each "
        "device's table (--no-cycle-noise: the clipped mean step, the noise measured after the fit; "
        "default: on where the cycle noise dominates the reads, anchor below 0.05)",
    )
    p.add_argument(
        "--likelihood",
        action="store_true",
        help="refine the best family's per-device fits (the default method) by the exact likelihood of "
        "the increments under cycle and read noise (slower; for cycle noise of several steps)",
    )
    p.add_argument(
        "--gls",
        action="store_true",
        help="fit and rank every family by generalised least squares over the read noise that consecutive "
        "increments share (for read noise that dominates the cycle noise, e.g. a digitised LTP/LTD pair)",
    )
    p.add_argument(
        "--anchor",
        type=float,
        default=None,
        metavar="A",
        help="regress each increment on the point at fraction A (0 to 0.5) between its two reads: 0.5 the "
        "midpoint, 0 the start (default: from the read and cycle noise of the data)",
    )
    p.add_argument("--g-mid", type=float, default=None, help="conductance at w = 0 (default: file or data)")
    p.add_argument("--g-scale", type=float, default=None, help="conductance per unit weight (default: file or data)")
    p.add_argument("--bins", type=int, default=20, help="bins of the tabulated (non-parametric) fit")
    p.add_argument("--nodes", type=int, default=6, help="nodes of the PiecewiseStep fit")
    p.add_argument("--no-spread", action="store_true", help="skip the device-to-device spread estimate")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="processes that fit the families side by side (default: NUMBA_NUM_THREADS, the CPU count unless "
        "set; 1: in this process); the result does not depend on it",
    )
    p.add_argument("--elements", type=int, default=64, help="elements simulated for the report's bands (1 to 4096)")
    p.add_argument("--seed", type=int, default=0, help="seed of the report's simulated elements and of the bootstrap")
    p.add_argument("--quiet", action="store_true", help="no progress bar (bars are drawn only on a terminal)")
    p.set_defaults(func=_run)
