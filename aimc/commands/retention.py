"""`aimc retention RUN_FOLDER`: test accuracy of the trained analog model after idle times (drift, decay,
diffusion), with and without global drift compensation; writes retention.csv and retention.png/.pdf."""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from aimc.common.errors import ConfigError


def drift_option(items: list[str]):
    """The DriftParameter of `--drift key=value` pairs (None without any): every tile drifts by it."""
    from pydantic import ValidationError

    from aimc.common.validation import format_validation_error
    from aimc.devices.drift import DriftParameter

    if not items:
        return None
    fields = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--drift {item!r}: expected name=value, e.g. nu=0.05")
        try:
            fields[key.strip()] = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            raise ConfigError(f"--drift {item!r}: {raw.strip()!r} is not a number") from None
    try:
        return DriftParameter(**fields)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, "--drift").replace("\n", "; ")) from None


def _run(args: argparse.Namespace) -> int:
    from aimc.config import RetentionConfig
    from aimc.runs.retention import finished_config, retention

    drift = drift_option(args.drift)
    base = finished_config(Path(args.run)).retention or RetentionConfig()  # the run's own table: the defaults
    say = None if args.quiet else (lambda line: print(line, file=sys.stderr))
    rows = retention(
        args.run,
        args.times or base.times,
        seed=base.seed if args.seed is None else args.seed,
        drift=drift or base.drift,
        step_s=base.step_time_s if args.step_time is None else args.step_time,
        progress=say,
        repeats=args.repeats,
    )
    width = max(len(r["algorithm"]) for r in rows) if rows else 9
    print(f"{'algorithm':<{width}}  {'time':>6}  {'acc %':>6}  {'comp. %':>7}")
    for r in rows:
        print(
            f"{r['algorithm']:<{width}}  {r['time']:>6}  {100 * r['test_accuracy']:6.2f}  "
            f"{100 * r['test_accuracy_compensated']:7.2f}"
        )
    print(f"retention {args.run}/retention.csv")
    return 0


def register(sub) -> None:
    """Add the `retention` sub-command to the sub-parsers `sub`."""
    p = sub.add_parser(
        "retention",
        help="test accuracy of a finished run after idle times (drift, decay), with and without drift compensation",
        description="Load the trained model of a finished run (each run of a comparison), leave its analog tiles "
        "idle for each time (drift, diffusion, decay; docs/devices.md) and read the test set as the tiles are and "
        "with global drift compensation. Writes RUN_FOLDER/retention.csv and retention.png/.pdf.",
    )
    p.add_argument("run", metavar="RUN_FOLDER", help="folder of a finished `aimc train` run or comparison")
    p.add_argument(
        "--times",
        nargs="+",
        metavar="T",
        default=None,
        help="idle times after training: seconds or with a unit (s, min, h, d, mo = 30 d, "
        "y = 365.25 d); default: the run config's [retention] table, else 1s 1min 1h 1d 1mo 1y 10y",
    )
    p.add_argument(
        "--drift",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="drift of every tile instead of its device's own, by DriftParameter field "
        "(docs/devices.md), e.g. --drift nu=0.05 --drift nu_dtod=0.2 (repeatable)",
    )
    p.add_argument(
        "--step-time",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds of idle time per decay/diffusion step (one optimizer step's worth; default: "
        "the run config's, else 1)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the idle draws (drift exponents, noise; default: the run config's, else 0)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="N",
        help="repeat the idle draws with N seeds (seed, seed + 1, ...); the figure shows their mean and std",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_run)
