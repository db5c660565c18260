#!/usr/bin/env python
"""Does hardware-aware training help? examples/configs/inference_hwa.toml trained with and without its noise
injection (the weight modifier), seeds 0, 1, 2, each run then programmed onto PCM-like inference tiles and
read at 1 s, 1 d and 1 y after programming (`aimc inference`, 10 noise draws each). Prints per run the mean
accuracy at each time and per setting the mean and spread over the seeds; the margin at 1 y is the
difference of the two settings' seed means against their seed standard deviations.

    python3 examples/inference_hwa.py [--out runs/inference_hwa] [--epochs 5] [--repeats 10] [--std-dev 0.2]
                                      [--data mnist --data-path DIR]
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
SEEDS = (0, 1, 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/inference_hwa")
    p.add_argument("--epochs", type=int, default=None, help="default: the config's")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--data", default=None, help="mnist_small (default) or mnist with --data-path")
    p.add_argument("--data-path", default=None)
    p.add_argument(
        "--std-dev", type=float, default=None, help="the injection's modifier.std_dev (default: the config's)"
    )
    a = p.parse_args()
    base = read_toml(CONFIG)
    common = {"epochs": a.epochs} if a.epochs else {}
    if a.data:
        common.update({"data.name": a.data, "data.path": a.data_path})
    settings = dict(SETTINGS)
    if a.std_dev is not None:
        settings["injection"] = {"inference.modifier.std_dev": a.std_dev}
    acc: dict[str, dict[str, list[float]]] = {}
    for setting, overrides in settings.items():
        for seed in SEEDS:
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
    gain = statistics.fmean(acc["injection"]["1y"]) - statistics.fmean(acc["no_injection"]["1y"])
    spread = max(statistics.stdev(acc[s]["1y"]) for s in acc)
    print(f"\nat 1 y: injection - no injection = {100 * gain:+.2f} points; largest seed std {100 * spread:.2f} points")


if __name__ == "__main__":
    main()
