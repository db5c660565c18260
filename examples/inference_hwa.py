#!/usr/bin/env python
"""Does hardware-aware training help? examples/configs/inference_hwa.toml trained with and without its noise
injection (the weight modifier), seeds 0 .. N-1, each run then programmed onto PCM-like inference tiles
and read at 1 s, 1 d and 1 y after programming (`aimc inference`, 10 noise draws each). Prints per run the
mean accuracy at each time and per setting the mean and spread over the seeds, then the paired gain at 1 y
(injection minus no injection of the same seed: same initialisation and data order) with its mean, std and
standard error of the mean.

    python3 examples/inference_hwa.py [--out runs/inference_hwa] [--seeds 5] [--epochs 5] [--repeats 10]
                                      [--std-dev 0.2] [--injection KEY=VALUE ...] [--data mnist --data-path DIR]

--injection replaces the injection's modifier by config overrides, e.g. `--injection
inference.modifier.type=pcm_noise inference.modifier.pcm_t_inference=3.15576e7` (PCM programming noise and
one year of drift in every training forward pass).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from aimc.config import apply_overrides, read_toml, validate_config
from aimc.runs.inference import inference_evaluation
from aimc.runs.training import train_run

CONFIG = Path(__file__).with_name("configs") / "inference_hwa.toml"
TIMES = ["1s", "1d", "1y"]
SETTINGS = {"no_injection": {"inference.modifier.type": "none"}, "injection": {}}


def _override(item: str) -> tuple[str, object]:
    """KEY=VALUE -> (KEY, VALUE as a number where it reads as one)."""
    key, sep, value = item.partition("=")
    if not sep:
        raise SystemExit(f"--injection: {item!r} is not KEY=VALUE")
    try:
        return key, float(value)
    except ValueError:
        return key, value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/inference_hwa")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0 .. SEEDS-1 (at least 2)")
    p.add_argument("--epochs", type=int, default=None, help="default: the config's")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--data", default=None, help="mnist_small (default) or mnist with --data-path")
    p.add_argument("--data-path", default=None)
    p.add_argument(
        "--std-dev", type=float, default=None, help="the injection's modifier.std_dev (default: the config's)"
    )
    p.add_argument(
        "--injection", nargs="+", default=None, metavar="KEY=VALUE", help="the injection setting's overrides"
    )
    a = p.parse_args()
    base = read_toml(CONFIG)
    common = {"epochs": a.epochs} if a.epochs else {}
    if a.data:
        common.update({"data.name": a.data, "data.path": a.data_path})
    settings = dict(SETTINGS)
    if a.std_dev is not None:
        settings["injection"] = {"inference.modifier.std_dev": a.std_dev}
    if a.injection:
        settings["injection"] = dict(_override(item) for item in a.injection)
    acc: dict[str, dict[str, list[float]]] = {}
    for setting, overrides in settings.items():
        for seed in range(a.seeds):
            cfg = validate_config(apply_overrides(base, {**common, **overrides, "seed": seed, "name": setting}))
            folder = Path(a.out) / f"{setting}-seed{seed}"
            final = train_run(cfg, folder)
            rows, digital = inference_evaluation(folder, TIMES, repeats=a.repeats, seed=seed)
            line = ", ".join(f"{r['time']} {100 * r['accuracy_mean']:.2f}+-{100 * r['accuracy_std']:.2f}" for r in rows)
            print(
                f"{setting:13s} seed {seed}: trained {100 * final['test_accuracy']:.2f}%, digital "
                f"{100 * digital:.2f}%, programmed: {line}",
                flush=True,
            )
            for r in rows:
                acc.setdefault(setting, {}).setdefault(r["time"], []).append(r["accuracy_mean"])
    print(f"\n{'setting':13s} " + " ".join(f"{t + ' %':>14s}" for t in TIMES) + "   (mean +- std over seeds)")
    for setting, by_time in acc.items():
        cells = [f"{100 * statistics.fmean(v):6.2f} +- {100 * statistics.stdev(v):4.2f}" for v in by_time.values()]
        print(f"{setting:13s} " + " ".join(f"{c:>14s}" for c in cells))
    gains = [100 * (i - n) for i, n in zip(acc["injection"]["1y"], acc["no_injection"]["1y"])]
    mean, std = statistics.fmean(gains), statistics.stdev(gains)
    sem = std / len(gains) ** 0.5
    spread = max(100 * statistics.stdev(acc[s]["1y"]) for s in acc)
    print(f"\npaired gain at 1 y per seed: {', '.join(f'{g:+.2f}' for g in gains)} points")
    print(
        f"mean {mean:+.2f}, std {std:.2f}, standard error {sem:.2f} (mean / s.e. = {mean / sem:.1f}); "
        f"largest seed std of a setting {spread:.2f} points"
    )


if __name__ == "__main__":
    main()
