"""`aimc sweep SWEEP.toml`: run a parameter sweep locally or on a Dask cluster (docs/sweeps.md)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `sweep` sub-command to the `aimc` parser."""
    p = sub.add_parser(
        "sweep",
        help="run a parameter sweep (resumable; local pool or Dask)",
        description="Expand SWEEP.toml into runs, validate them all, run the unfinished ones "
        "and write manifest.json, summary.csv, summary.md and figures/.",
    )
    p.add_argument("sweep", metavar="SWEEP.toml", help="the sweep file")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="the sweep folder (default: runs/sweeps/<sweep name>); rerunning into the same folder resumes",
    )
    p.add_argument(
        "--executor",
        choices=("local", "dask"),
        help="local: a process pool on this machine (the default); dask: Dask distributed",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="worker processes (default: the CPU cores); 0 runs in this process (local only)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (implies --executor "
        "dask; without it, dask starts a LocalCluster on 127.0.0.1)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit status 0 when every run finished, 1 when some failed (130 when interrupted: aimc.commands.cli)."""
    from aimc.sweeps.executors import DaskExecutor, InlineExecutor, LocalExecutor
    from aimc.sweeps.runner import run_sweep
    from aimc.sweeps.sweep_file import load_sweep

    if args.workers is not None and args.workers < 0:
        raise ValueError(f"--workers {args.workers}: give 0 or more")
    if args.scheduler and args.executor == "local":
        raise ValueError("--scheduler needs --executor dask")
    sweep = load_sweep(args.sweep)  # validates every run before any worker starts
    out = Path(args.out) if args.out else Path("runs") / "sweeps" / sweep.config.name
    if args.scheduler or args.executor == "dask":
        if args.workers == 0:
            raise ValueError("--workers 0 runs in this process; it needs --executor local")
        executor = DaskExecutor(workers=args.workers, scheduler=args.scheduler)
    else:
        executor = InlineExecutor() if args.workers == 0 else LocalExecutor(args.workers)
    args.resume_hint = f"the same command (the sweep resumes into {out})"  # for the message on Ctrl-C
    counts = run_sweep(sweep, out, executor)
    return 1 if counts["failed"] else 0
