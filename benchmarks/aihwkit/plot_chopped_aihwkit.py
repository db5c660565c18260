#!/usr/bin/env python
"""Test accuracy per epoch of aimc's and aihwkit 1.1.0's c-TTv2 and AGAD on the same job
(examples/sweeps/chopped_aihwkit.toml beside train_chopped_fcn_aihwkit.py): one panel per device, the mean
over seeds of each simulator and algorithm, the seeds' range shaded. Runs in aimc's environment.

    python benchmarks/aihwkit/plot_chopped_aihwkit.py runs/sweeps/chopped-aihwkit runs/aihwkit-chopped \
        docs/figures/chopped_aihwkit.png

The aihwkit folder holds train_chopped_fcn_aihwkit.py's outputs named ak_<algorithm>_<device>_<seed>.jsonl
(algorithm c-ttv2 or agad, device softbounds or powstep).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

DEVICES = {"SoftBounds": "softbounds", "PowStep": "powstep"}
ALGORITHMS = {"c_ttv2": "c-ttv2", "agad": "agad"}


def aimc_curves(sweep: Path) -> dict:
    """{(device kind, algorithm): [per-seed accuracy % per epoch]} of the sweep's finished runs."""
    out = defaultdict(list)
    for run in sorted((sweep / "runs").iterdir()):
        if not (run / "metrics.jsonl").exists():
            continue
        cfg = json.loads((run / "config.json").read_text())
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        out[cfg["tile"]["device"]["kind"], cfg["trainer"]["algorithm"]].append(
            [100 * r["test_accuracy"] for r in rows if r["epoch"] > 0]
        )
    return out


def aihwkit_curves(folder: Path) -> dict:
    """The same for aihwkit's runs."""
    out = defaultdict(list)
    for kind, dev in DEVICES.items():
        for alg, name in ALGORITHMS.items():
            for f in sorted(folder.glob(f"ak_{name}_{dev}_*.jsonl")):
                out[kind, alg].append([json.loads(line)["test_accuracy"] for line in f.read_text().splitlines()])
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", type=Path)
    p.add_argument("aihwkit", type=Path)
    p.add_argument("out", type=Path)
    a = p.parse_args()
    ours, theirs = aimc_curves(a.sweep), aihwkit_curves(a.aihwkit)
    fig, axes = plt.subplots(1, len(DEVICES), figsize=(10, 3.8), sharey=True)
    for ax, kind in zip(axes, DEVICES):
        for alg, color in zip(ALGORITHMS, ("C0", "C3")):
            for name, curves, style in (("aimc", ours, "-"), ("aihwkit 1.1.0", theirs, "--")):
                runs = curves.get((kind, alg))
                if not runs:
                    continue
                acc = np.array(runs)
                epochs = np.arange(1, acc.shape[1] + 1)
                ax.plot(epochs, acc.mean(0), style, color=color, label=f"{name} {ALGORITHMS[alg]} ({len(acc)} seeds)")
                ax.fill_between(epochs, acc.min(0), acc.max(0), color=color, alpha=0.12)
        ax.set_title(kind)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy (%)")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)


if __name__ == "__main__":
    main()
