"""The `aimc` command line: one sub-command per job."""

from __future__ import annotations

import argparse
import sys

import aimc
from aimc import cmd_fit, cmd_report, cmd_sweep, cmd_train


def _fmt(v: float) -> str:
    """3 significant digits, round-off below 1e-12 shown as 0."""
    return f"{0.0 if abs(v) < 1e-12 else v:.3g}"


def _cmd_devices(args: argparse.Namespace) -> int:
    from aimc.devices.presets import PRESETS

    rows = [("name", "family", "states", "dw_min", "w_min", "w_max", "w_sym", "description")]
    for name, p in PRESETS.items():
        d = p.device
        lo, hi = d.bounds
        rows.append((name, d.kind, f"{d.n_states:.0f}", f"{d.dw_min:.3g}", f"{lo:.3g}", f"{hi:.3g}",
                     _fmt(d.symmetric_point()), p.description))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    if args.sources:
        print()
        for name, p in PRESETS.items():
            print(f"{name}:\n{p.sources()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aimc", description=__doc__)
    parser.add_argument("--version", action="version", version=f"aimc {aimc.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("devices", help="list the device presets with their key figures")
    p.add_argument("--sources", action="store_true", help="also print where each preset's numbers come from")
    p.set_defaults(func=_cmd_devices)
    cmd_train.register(sub)
    cmd_sweep.register(sub)
    cmd_fit.register(sub)
    cmd_report.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"aimc {args.command}: error: {err}", file=sys.stderr)
        return 2
