"""`aimc inference RUN_OR_CHECKPOINT`: the trained model programmed onto inference tiles (statistical PCM
noise, drift, drift compensation) and its test accuracy at times after programming, over noise draws;
writes inference.csv, inference_draws.csv and inference.png/.pdf. The inference counterpart of
`aimc retention`, which ages the training tiles themselves."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aimc.common.errors import ConfigError


def _tile_config(path: str | None):
    """The InferenceTileConfig of the [inference] table of a TOML file, or None without a file."""
    if path is None:
        return None
    from pydantic import ValidationError

    from aimc.common.validation import format_validation_error
    from aimc.config import read_toml
    from aimc.trainers import InferenceTileConfig

    data = read_toml(path)
    if "inference" not in data:
        raise ConfigError(f"{path}: no [inference] table")
    try:
        return InferenceTileConfig(**data["inference"])
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, f"{path}: inference").replace("\n", "; ")) from None


def _run(args: argparse.Namespace) -> int:
    from aimc.config import DEFAULT_TIMES
    from aimc.runs.inference import inference_evaluation

    say = None if args.quiet else (lambda line: print(line, file=sys.stderr))
    rows, reference = inference_evaluation(
        args.source,
        args.times or list(DEFAULT_TIMES),
        repeats=args.repeats,
        tile_config=_tile_config(args.config),
        seed=args.seed,
        out_dir=args.out,
        progress=say,
    )
    print(f"{'time':>6}  {'mean %':>6}  {'std %':>5}  {'min %':>6}  {'max %':>6}   (digital {100 * reference:.2f}%)")
    for r in rows:
        print(
            f"{r['time']:>6}  {100 * r['accuracy_mean']:6.2f}  {100 * r['accuracy_std']:5.2f}  "
            f"{100 * r['accuracy_min']:6.2f}  {100 * r['accuracy_max']:6.2f}"
        )
    where = Path(args.out) if args.out else Path(args.source)
    print(f"inference {where if where.is_dir() else where.parent.parent}/inference.csv")
    return 0


def register(sub) -> None:
    """Add the `inference` sub-command to the sub-parsers `sub`."""
    p = sub.add_parser(
        "inference",
        help="test accuracy of a trained run programmed onto inference tiles (PCM noise, drift) at times after "
        "programming, over noise draws",
    )
    p.add_argument(
        "source",
        metavar="RUN_OR_CHECKPOINT",
        help="folder of a finished `aimc train` run (digital, analog or with [inference]), or a checkpoint in it",
    )
    p.add_argument(
        "--times",
        nargs="+",
        metavar="T",
        default=None,
        help="times after programming: seconds or with a unit (s, min, h, d, mo = 30 d, y = 365.25 d); "
        "default 1s 1min 1h 1d 1mo 1y 10y",
    )
    p.add_argument("--repeats", type=int, default=5, help="noise draws per time (default 5)")
    p.add_argument(
        "--config",
        default=None,
        metavar="TOML",
        help="a TOML file whose [inference] table is the tile config (default: the run's [inference] table, "
        "else PCM noise with global drift compensation)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the tiles' draws (default 0)")
    p.add_argument("--out", default=None, metavar="FOLDER", help="output folder (default: the run folder)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_run)
