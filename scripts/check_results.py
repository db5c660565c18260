"""Rerun the short results of docs/results.md and flag every number that moved beyond its stated spread.

    python3 scripts/check_results.py                      # every short check (about 10 minutes on 2 quiet cores)
    python3 scripts/check_results.py --only r1_fig2       # one check
    python3 scripts/check_results.py --long --data DIR    # and the long ones (full MNIST in DIR, about 1 h)

Each check regenerates the numbers of one table of docs/results.md with the script or config the page names
and compares them with the values documented there (held below, with the commit of the code that measured
them): an error of a least-squares run moves when it is off by more than its factor, an accuracy when it is
off by more than its points. Prints one line per number; the exit status is 1 where any moved.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Documented:
    """A number of docs/results.md: its value, how far a rerun may land from it (`factor` for errors spanning
    decades, `points` for accuracies in %), and the commit of the code that measured it."""

    value: float
    commit: str
    factor: float | None = None
    points: float | None = None

    def moved(self, measured: float) -> bool:
        if self.factor is not None:
            return not (self.value / self.factor <= measured <= self.value * self.factor)
        return abs(measured - self.value) > float(self.points)


@dataclass(frozen=True)
class Check:
    """One table of docs/results.md: its section, how to regenerate it, whether it is long, and its numbers."""

    section: str
    command: str
    long: bool
    run: Callable[[argparse.Namespace], dict[str, float]]
    numbers: dict[str, Documented]


def r1_fig2(_: argparse.Namespace) -> dict[str, float]:
    """R1 Fig. 2: final ||W - W*||^2 after 1000 steps, per algorithm and c (examples/r1_fig2_least_squares.py)."""
    sys.path.insert(0, str(ROOT / "examples"))
    import r1_fig2_least_squares as fig2

    return {
        f"{name}, c = {c}": float(fig2.run(alg, c, 1000)[-1])
        for name, alg in fig2.ALGORITHMS.items()
        for c in (0.0, 0.1, 0.2, 0.3)
    }


def default_job(_: argparse.Namespace) -> dict[str, float]:
    """The default job of `aimc train`: test accuracy % of each trainer after 10 epochs."""
    from aimc.config import default_job as job
    from aimc.runs.experiment import run_experiment

    with tempfile.TemporaryDirectory() as out:
        final = run_experiment(job(), out)
    return {label: 100 * float(final[f"{label}.test_accuracy"]) for label in ("sgd", "analog_sgd", "residual")}


def table8_short(args: argparse.Namespace) -> dict[str, float]:
    """R1 Table 8 shortened (examples/sweeps/table8_short.toml, 5 epochs on the full MNIST in --data): test
    accuracy % of each of its ten runs."""
    from aimc.runs.experiment import run_experiment
    from aimc.sweeps.sweep_file import load_sweep

    if args.data is None:
        raise SystemExit("check_results: table8_short needs --data, a folder with the MNIST idx files")
    sweep = load_sweep(ROOT / "examples/sweeps/table8_short.toml")
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for k, run in enumerate(sweep.runs):
            cfg = run.config.model_copy(update={"data": run.config.data.model_copy(update={"path": str(args.data)})})
            final = run_experiment(cfg, Path(folder) / str(k))
            labels = (dim.labels[pos] for dim, pos in zip(sweep.dims, sweep.points[run.point]))
            out[", ".join(labels)] = 100 * float(final["test_accuracy"])
    return out


def _fig2(values: dict[str, list[float]], commit: str) -> dict[str, Documented]:
    cs = (0.0, 0.1, 0.2, 0.3)
    return {
        f"{name}, c = {c}": Documented(v, commit, factor=1.6 if v < 0.05 else 1.2)
        for name, vs in values.items()
        for c, v in zip(cs, vs)
    }


CHECKS = {
    "r1_fig2": Check(
        "R1 Fig. 2: least squares on a shifted-linear device",
        "python3 examples/r1_fig2_least_squares.py --steps 1000 --out docs/figures",
        False,
        r1_fig2,
        _fig2(
            {
                "Analog SGD": [1.71e-05, 0.0829, 4.46, 19.7],
                "Tiki-Taka": [0.0266, 4.04, 169, 266],
                "Residual learning": [4.82e-05, 5.06e-05, 4.54e-05, 5.12e-05],
            },
            "6591b36",
        ),
    ),
    "default_job": Check(
        "The default job: a strongly asymmetric device on MNIST",
        "python3 -m aimc train",
        False,
        default_job,
        {
            "sgd": Documented(93.9, "89a9174", points=0.3),
            "analog_sgd": Documented(26.2, "89a9174", points=0.3),
            "residual": Documented(89.7, "89a9174", points=0.3),
        },
    ),
    "table8_short": Check(
        "R1 Table 8 (shortened): response families on the full MNIST",
        "aimc sweep examples/sweeps/table8_short.toml --out runs/sweeps/table8-short --workers 2",
        True,
        table8_short,
        {
            f"{device}, {alg}": Documented(v, "ccb8d6b", points=2.0)
            for device, pair in {
                "power g=0.5 tau=0.6": (85.4, 90.2),
                "power g=1 tau=0.6": (47.0, 86.3),
                "power g=2 tau=0.7": (28.2, 75.9),
                "exp g=0.5 tau=0.6": (28.2, 83.6),
                "exp g=2 tau=0.7": (27.7, 71.9),
            }.items()
            for alg, v in zip(("analog_sgd", "residual"), pair)
        },
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CHECKS), action="append", help="run this check (repeatable)")
    parser.add_argument("--long", action="store_true", help="run the long checks too (full MNIST)")
    parser.add_argument("--data", type=Path, help="folder of the full MNIST (the long checks)")
    args = parser.parse_args()
    names = args.only or [n for n, c in CHECKS.items() if args.long or not c.long]
    moved = 0
    for name in names:
        check = CHECKS[name]
        print(f"== {name}: {check.section}\n   regenerated by: {check.command}", flush=True)
        measured = check.run(args)
        for key, doc in check.numbers.items():
            got = measured.get(key, math.nan)
            bad = not math.isfinite(got) or doc.moved(got)
            moved += bad
            spread = f"x/ {doc.factor}" if doc.factor is not None else f"+- {doc.points}"
            print(
                f"   {key:32s} documented {doc.value:<10.4g} ({spread}, code of {doc.commit})  "
                f"now {got:<10.4g} {'MOVED' if bad else 'ok'}",
                flush=True,
            )
    print(f"{moved} number(s) moved beyond their spread" if moved else "every number within its spread")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
