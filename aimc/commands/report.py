"""`aimc report DEVICE [DEVICE ...] --out DIR`: response-function report of presets, device files or fits."""

from __future__ import annotations

import argparse
import sys


def _run(args: argparse.Namespace) -> int:
    from aimc.calibration import write_report

    page = write_report(
        args.devices,
        args.out,
        n_elements=args.elements,
        seed=args.seed,
        progress=not args.quiet and sys.stderr.isatty(),
    )
    print(f"report {page}")
    return 0


def register(sub) -> None:
    """Add the `report` sub-command to the sub-parsers `sub`."""
    what = "response-function report (HTML, JSON, PNG and PDF figures) of one or more devices"
    p = sub.add_parser(
        "report",
        help=what,
        description=f"{what[0].upper()}{what[1:]}: the numbers of each device (range, states, pulses to cross, "
        "non-linearity, symmetric point, drift and implicit penalty) with their spread over simulated elements, "
        "its figures, and for a fit output folder the fit's sections; several devices also side by side.",
    )
    p.add_argument(
        "devices",
        nargs="+",
        metavar="DEVICE",
        help="preset name, device file (.json/.toml) or fit output folder; several: side by side",
    )
    p.add_argument("--out", required=True, help="output folder: report.html, report.json, the figures as PNG and PDF")
    p.add_argument(
        "--elements", type=int, default=64, help="elements simulated for the device-to-device bands (1 to 4096)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated elements")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)
