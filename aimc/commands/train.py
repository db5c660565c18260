"""`aimc train [config.toml] [--out DIR]`: run an experiment config, or the default comparison job."""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
from pathlib import Path

from aimc.common.errors import ConfigError


def _parse_set(items: list[str]) -> dict:
    """`--set a.b=value` pairs; the value is read as a TOML value (a bare word stays a string)."""
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected dotted.key=value")
        try:
            out[key.strip()] = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            out[key.strip()] = raw.strip()
    return out


def _cmd_train(args: argparse.Namespace) -> int:
    from aimc.config import apply_overrides, config_schema, default_job, read_toml, validate_config
    from aimc.runs.run_folder import read_json

    if args.schema:
        print(json.dumps(config_schema(), indent=2))
        return 0
    overrides = _parse_set(args.set)
    if args.resume:
        if args.config or args.out or overrides:
            raise ConfigError("--resume RUN_DIR takes the config from the run folder: no config, --out or --set")
        out = Path(args.resume)
        if not (out / "config.json").is_file():
            raise ConfigError(f"--resume {str(out)!r}: not a run folder (no config.json)")
        cfg = validate_config(read_json(out / "config.json"), where=str(out / "config.json"))
    else:
        if args.config:
            data = read_toml(args.config)
            if not data:
                print(
                    f"aimc train: config file {args.config!r} is empty: every field takes its default (docs/usage.md)",
                    file=sys.stderr,
                )
            cfg = validate_config(apply_overrides(data, overrides), where=str(args.config))
        else:
            cfg = validate_config(
                apply_overrides(default_job().model_dump(mode="json"), overrides), where="the default job"
            )
        out = Path(args.out) if args.out else Path("runs") / f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"

    from aimc.runs.comparison import comparison_table, run_comparison
    from aimc.runs.experiment import run_retention
    from aimc.runs.training import TrainingDiverged, train_run

    args.resume_hint = f"aimc train --resume {out}"  # for the one-line message on Ctrl-C
    print(f"aimc train: {cfg.name} -> {out}", file=sys.stderr)
    try:
        if cfg.compare:
            results = run_comparison(cfg, out, progress=not args.quiet)
        else:
            results = {cfg.trainer.algorithm: {"status": "finished", **train_run(cfg, out, not args.quiet)}}
    except TrainingDiverged as err:
        print(f"aimc train: {err}", file=sys.stderr)
        return 1
    diverged = [label for label, res in results.items() if res.get("status") != "finished"]
    retained = cfg.retention is not None and len(diverged) < len(results)  # a trained model to keep
    if retained:
        run_retention(cfg, out, progress=not args.quiet)
    print(comparison_table(results))
    if retained:
        print(f"\nretention: {out / 'retention.csv'}")
    print(f"\nrun folder: {out}")
    if diverged:
        print(f"aimc train: diverged: {', '.join(diverged)} (the table gives the last good epoch)", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `train` sub-command to the `aimc` parser."""
    p = sub.add_parser(
        "train",
        help="train a model on analog tiles (default: the comparison job)",
        description=__doc__ + " Without a config: R1's FCN on the shipped MNIST subset with "
        "digital SGD, Analog SGD and residual learning on an asymmetric device.",
    )
    p.add_argument("config", nargs="?", help="experiment config (TOML); default: the built-in comparison job")
    p.add_argument(
        "--out",
        help="run folder (default: runs/<name>-<timestamp>); an unfinished run of the same config there is resumed",
    )
    p.add_argument("--resume", metavar="RUN_DIR", help="resume the run in RUN_DIR with its own config")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field by dotted path, e.g. --set trainer.lr=0.1 (repeatable)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--schema", action="store_true", help="print the JSON schema of the config and exit")
    p.set_defaults(func=_cmd_train)
