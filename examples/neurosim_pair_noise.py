#!/usr/bin/env python
"""How much read noise one digitised LTP/LTD pair can carry before the fit stops telling its two shapes apart.

The pair follows DNN+NeuroSim's model, G(P) = B (1 - e^(-P/A)) + G_min per direction (A / P_max 0.54 up, 0.22
down, 100 pulses each way, G from 1 to 5 uS), read after every pulse with normal read noise of a given share of
the range, written as `--format runs` files and fitted with every family (`aimc.calibration.fit`, BIC). For each
noise level and number of cycles of the pair it prints how often a family with its own shape per direction
(SoftBounds, power_ud, exponential_ud) is chosen, and BIC(SoftBounds) - BIC(best one-shape family): median and
10th-90th percentile over the seeds, and the pair's NeuroSim A / P_max per direction from the chosen fit
(median over the seeds; truth 0.54 up, 0.22 down). --gls fits by generalised least squares over the read
noise that consecutive increments share (`fit(gls=True)`; docs/calibration.md, "measured LTP/LTD pair").

    python examples/neurosim_pair_noise.py [--noise 0.002,0.005,0.01] [--cycles 1] [--seeds 20] [--gls]
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import numpy as np

from aimc.calibration import fit, read_runs
from aimc.calibration.response_numbers import crossing

P_MAX, G_MIN, G_MAX = 100, 1.0, 5.0
A_NORM = {"up": 0.5433, "down": 0.2165}  # A / P_max of each direction
PER_DIRECTION = ("SoftBounds", "power_ud", "exponential_ud")
ONE_SHAPE = ("ideal", "linear", "power", "exponential")


def curve(r: float) -> np.ndarray:
    """NeuroSim's normalised curve at pulses 0 .. P_MAX: (1 - e^(-P/A)) / (1 - e^(-P_max/A)), A = r P_max."""
    return np.expm1(-np.arange(P_MAX + 1) / (r * P_MAX)) / math.expm1(-1 / r)


def write_pair(folder: Path, noise: float, seed: int, n_cycles: int) -> list[Path]:
    """The run files of n_cycles cycles of the pair with read noise `noise` x the range."""
    rng = np.random.default_rng(seed)
    paths = []
    for c in range(n_cycles):
        up = G_MIN + (G_MAX - G_MIN) * curve(A_NORM["up"])
        down = G_MAX - (G_MAX - G_MIN) * curve(A_NORM["down"])
        for name, g in (("up", up), ("down", down)):
            g = g + rng.normal(0.0, noise * (G_MAX - G_MIN), g.shape)
            path = folder / f"D1_{c}_{name}.csv"
            path.write_text("pulse,conductance [uS]\n" + "".join(f"{p},{v:.6f}\n" for p, v in enumerate(g)))
            paths.append(path)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noise", default="0.002,0.005,0.01", help="read noise levels, shares of the range")
    ap.add_argument("--cycles", default="1", help="cycles of the pair, a comma-separated list")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--gls", action="store_true", help="fit(gls=True)")
    args = ap.parse_args()
    for n_cycles in map(int, args.cycles.split(",")):
        for noise in map(float, args.noise.split(",")):
            chosen, gaps, a_up, a_down = [], [], [], []
            for seed in range(args.seeds):
                with tempfile.TemporaryDirectory() as tmp:
                    res = fit(read_runs(write_pair(Path(tmp), noise, seed, n_cycles)), spread=False, gls=args.gls)
                chosen.append(res.best.kind)
                gaps.append(res.fits["SoftBounds"].bic - min(res.fits[k].bic for k in ONE_SHAPE))
                c = crossing(res.device, measured=(res.data.lo, res.data.hi))
                a_up.append(c["A_over_Pmax_LTP"])
                a_down.append(c["A_over_Pmax_LTD"])
            wins = sum(k in PER_DIRECTION for k in chosen)
            p10, p50, p90 = np.percentile(gaps, [10, 50, 90])
            print(
                f"noise {noise:.3%}, {n_cycles} cycle(s): per-direction family {wins} of {args.seeds}; "
                f"dBIC {p50:+.1f} ({p10:+.1f} to {p90:+.1f}); chosen {sorted(set(chosen))}; "
                f"A / P_max {np.median(a_up):.3g} up, {np.median(a_down):.3g} down",
                flush=True,
            )


if __name__ == "__main__":
    main()
