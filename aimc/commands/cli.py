"""The `aimc` command line: one sub-command per job."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys

import aimc
from aimc.commands import fit, inference, report, retention, sweep, train
from aimc.runs.interrupts import stop_signals_interrupt


def _fmt(v: float) -> str:
    """3 significant digits, round-off below 1e-12 shown as 0."""
    return f"{0.0 if abs(v) < 1e-12 else v:.3g}"


def _cmd_devices(args: argparse.Namespace) -> int:
    from aimc.devices.presets import PRESETS, UNIT_CELL_PRESETS

    rows = [("name", "family", "states", "dw_min", "w_min", "w_max", "w_sym", "description")]
    for name, p in PRESETS.items():
        d = p.device
        lo, hi = d.bounds
        rows.append(
            (
                name,
                d.kind,
                f"{d.n_states:.0f}",
                f"{d.dw_min:.3g}",
                f"{lo:.3g}",
                f"{hi:.3g}",
                _fmt(d.symmetric_point()),
                p.description,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    print("\nunit cells of several devices (VectorUnitCell):")
    width = max(map(len, UNIT_CELL_PRESETS))
    for name, p in UNIT_CELL_PRESETS.items():
        print(f"{name.ljust(width)}  {p.description}")
    if args.sources:
        print()
        for name, p in {**PRESETS, **UNIT_CELL_PRESETS}.items():
            print(f"{name}:\n{p.sources()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aimc", description=__doc__)
    parser.add_argument("--version", action="version", version=f"aimc {aimc.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "devices",
        help="list the device presets with their key figures",
        description="List the device presets (tile.device = NAME) with their family, number of states, step "
        "dw_min, bounds and symmetric point (docs/devices.md).",
    )
    p.add_argument("--sources", action="store_true", help="also print where each preset's numbers come from")
    p.set_defaults(func=_cmd_devices)
    train.register(sub)
    sweep.register(sub)
    fit.register(sub)
    report.register(sub)
    retention.register(sub)
    inference.register(sub)
    return parser


EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 130
"""Exit statuses besides 0 (done): a run failed or diverged, or a file could not be written (disk full,
read-only, no permission); bad input (config, file, argument, an output folder in use, a missing file);
interrupted (Ctrl-C, SIGINT's 128 + 2; the `aimc` process itself ends by SIGINT, see `run`)."""


def _os_error(err: OSError) -> str:
    """One line for an error of the file system, naming the file."""
    what = err.strerror or str(err)
    if err.errno == errno.ENOSPC:
        what = "no space left on the device (the disk is full)"
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{what}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with stop_signals_interrupt():  # SIGTERM and SIGHUP stop a command as Ctrl-C does
            return args.func(args)
    except KeyboardInterrupt as err:
        hint = getattr(args, "resume_hint", None)
        by = f" by {err.args[0]}" if err.args and err.args[0] in ("SIGTERM", "SIGHUP") else ""
        print(f"aimc {args.command}: interrupted{by}" + (f"; resume with: {hint}" if hint else ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    except ValueError as err:
        print(f"aimc {args.command}: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:
        print(f"aimc {args.command}: error: {_os_error(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT if isinstance(err, FileNotFoundError) else EXIT_FAILED


def run() -> None:
    """The `aimc` program: `main` on the process's arguments. An interrupted command, its message printed and
    its state saved, ends the process by SIGINT, as a Unix program stopped by Ctrl-C does (shells report 130),
    so that a calling script or loop stops as well, and a caller sees this one ending whatever the interpreter
    makes of the handled KeyboardInterrupt."""
    code = main()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    raise SystemExit(code)
