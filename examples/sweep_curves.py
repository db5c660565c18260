"""Learning curves of every run of one or more sweep folders in one figure (test accuracy per epoch).

    python examples/sweep_curves.py runs/sweeps/A [runs/sweeps/B ...] --out curves.png [--title TEXT] \
        [--aihwkit "LABEL=run.jsonl" ...] [--steps-per-epoch N]

Each line is labelled with its sweep's name and the run's axis labels, read from the sweep manifest.
`--aihwkit` adds, dashed, the curve of a run of benchmarks/aihwkit/train_r1_fcn_aihwkit.py. With
`--steps-per-epoch N` the x axis counts training steps (mini-batches) instead of epochs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def curves(sweep_dir: Path) -> list[tuple[str, list[float]]]:
    """(label, test accuracy per epoch in %) for every run of the sweep that has metrics."""
    manifest = json.loads((sweep_dir / "manifest.json").read_text())
    out = []
    for run in manifest["runs"]:
        metrics = sweep_dir / run["folder"] / "metrics.jsonl"
        if not metrics.is_file():
            continue
        acc = [100 * json.loads(line)["test_accuracy"] for line in metrics.read_text().splitlines() if line]
        label = ", ".join(f"{v}" for v in run["labels"].values())
        out.append((f"{manifest['name']}: {label} (seed {run['seed']})", acc))
    return out


def aihwkit_curve(spec: str) -> tuple[str, list[float]]:
    """("aihwkit: LABEL", test accuracy per epoch in %) of a `LABEL=path.jsonl` argument."""
    label, _, path = spec.rpartition("=")  # labels may hold "=", paths do not
    records = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    return f"aihwkit: {label}", [r["test_accuracy"] for r in records]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweeps", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--title", default="")
    p.add_argument(
        "--aihwkit",
        action="append",
        default=[],
        metavar="LABEL=FILE",
        help="an aihwkit run's JSON lines (benchmarks/aihwkit/train_r1_fcn_aihwkit.py), drawn dashed",
    )
    p.add_argument(
        "--steps-per-epoch",
        type=int,
        default=None,
        metavar="N",
        help="put training steps (N per epoch) on the x axis instead of epochs",
    )
    p.add_argument("--ymin", type=float, default=0.0, help="lower end of the accuracy axis, %% (default 0)")
    a = p.parse_args()
    scale = a.steps_per_epoch or 1
    fig, ax = plt.subplots(figsize=(9, 4.5))
    runs = [run for sweep in a.sweeps for run in curves(sweep)]
    if len(runs) + len(a.aihwkit) > 10:  # more lines than tab10 has colours
        ax.set_prop_cycle(color=plt.cm.tab20(np.linspace(0, 1, 20)))
    for label, acc in runs:
        ax.plot([scale * e for e in range(len(acc))], acc, marker=".", label=label)
    for spec in a.aihwkit:
        label, acc = aihwkit_curve(spec)
        ax.plot([scale * e for e in range(len(acc))], acc, "--", label=label)
    ax.set_xlabel("epoch" if a.steps_per_epoch is None else "training steps (mini-batches)")
    ax.set_ylabel("test accuracy %")
    ax.set_ylim(a.ymin, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes: no curve hidden
    fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)


if __name__ == "__main__":
    main()
