"""R3's least-squares problem (arXiv:2510.02516, Appendix K, Fig. 7 right): multi-tile residual learning against the
number of tiles, on aimc and, where its venv exists, on aihwkit 1.1.0's TransferCompound.

k independent scalar weights w_i (one AnalogLinear(1, k) at the input x = 1) minimise sum_i (w_i - b_i)^2, b_i
uniform in [-1, 1] on a 16-bit grid, batch 1; every array is a noiseless 4-state soft-bounds device (w in
[-1, 1], dw_min 0.5: R3's SoftBoundsDevice with "2-bit granularity"), read exactly. R3's settings: gains 0.1^n,
transfer rate 0.01 (fixed), periods 2 x 2^n mini-batches, lr 0.001. R3 leaves aihwkit's fast_lr unset, and
aihwkit's TransferCompound then steps the fastest array by 1.0 whatever the lr, so both are run: fast step
1.0 (aihwkit's default) and 0.001 (the lr). The error is the mean of (w - b)^2 over the weights and the last
quarter of the steps; 1 tile is Analog SGD at lr 0.001.

    python examples/r3_least_squares.py [--steps 20000] [--out docs/figures] [--aihwkit ~/aihwkit-venv/bin/python]

Writes r3_least_squares.json and r3_least_squares.png (error against the number of tiles). With --aihwkit, the
same problem runs on aihwkit (benchmarks/aihwkit/multi_tile_lstsq_aihwkit.py) and its errors are drawn dashed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

from aimc import trainers
from aimc.devices import Linear, PeripheryConfig, UpdateConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "aihwkit"))
from lstsq_problem import last_quarter_error, targets  # noqa: E402  (the problem aihwkit's side solves too)

R3 = dict(lr=0.001, transfer_lr=0.01, gamma=0.1, period_ratio=2.0, transfer_every=2)
"""R3 Appendix K's least-squares settings (transfer_lr_vec 0.01 fixed, transfer_every_vec 2 x 2^n, gamma_vec
0.1^(N-1-i), lr 0.001)."""
FAST_STEPS = (1.0, 0.001)  # aihwkit's default fast_lr, and the lr
TILES = (1, 2, 3, 4)
AIHWKIT_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "aihwkit" / "multi_tile_lstsq_aihwkit.py"


def tracking_error(
    n_tiles: int,
    fast_lr: float,
    steps: int,
    k: int = 256,
    seed: int = 0,
    lr: float = R3["lr"],
    transfer_lr: float = R3["transfer_lr"],
    gamma: float = R3["gamma"],
    period_ratio: float = R3["period_ratio"],
    transfer_every: int = R3["transfer_every"],
) -> float:
    """Mean of (w - b)^2 over the k weights and the last quarter of `steps` (every 10th step), for `n_tiles`
    arrays (1: Analog SGD at lr)."""
    torch.manual_seed(seed)
    b = targets(k, seed)
    lin = nn.Linear(1, k, bias=False)
    with torch.no_grad():
        lin.weight.zero_()
    perfect = PeripheryConfig.perfect()
    tile = trainers.TileConfig(
        device=Linear(tau=1.0, dw_min=0.5), forward=perfect, backward=perfect, update=UpdateConfig(mode="pulsed")
    )
    model = trainers.convert(nn.Sequential(lin), tile, seed=seed)
    cfg = (
        trainers.AnalogSGDConfig(lr=lr)
        if n_tiles == 1
        else trainers.MultiTileConfig(
            n_tiles=n_tiles,
            gamma=gamma,
            lr=lr,
            fast_lr=fast_lr,
            transfer_lr=transfer_lr,
            transfer_every=transfer_every,
            period_ratio=period_ratio,
            zero_shift=False,
        )
    )
    opt = trainers.build_optimizer(model, cfg)
    return last_quarter_error(model, opt, b, steps, lambda: model[0].analog_weight()[:, 0])


def aihwkit_errors(python: str, fast_lr: float, steps: int, tiles=TILES, k: int = 256, seed: int = 0) -> dict:
    """{n_tiles: error} of the same problem on aihwkit 1.1.0 (its interpreter `python`)."""
    spec = dict(R3, fast_lr=fast_lr, n_tiles=list(tiles), steps=steps, k=k, seed=seed)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    out = subprocess.run([python, str(AIHWKIT_SCRIPT), f.name], capture_output=True, text=True, check=True)
    Path(f.name).unlink()
    return {int(n): v for n, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--out", default="docs/figures")
    ap.add_argument("--aihwkit", default=None, help="the interpreter of a venv with aihwkit 1.1.0")
    args = ap.parse_args()
    results = {}
    for fast in FAST_STEPS:
        row = {"aimc": {n: tracking_error(n, fast, args.steps) for n in TILES}}
        if args.aihwkit:
            row["aihwkit"] = aihwkit_errors(args.aihwkit, fast, args.steps)
        results[f"fast step {fast:g}"] = row
        print(f"fast step {fast:g}: " + json.dumps(row), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "r3_least_squares.json").write_text(
        json.dumps({"settings": dict(R3, steps=args.steps, k=256), "error": results}, indent=1)
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for (label, row), color in zip(results.items(), ("C0", "C1")):
        for sim, style in (("aimc", "-o"), ("aihwkit", "--s")):
            if sim in row:
                ax.plot(list(row[sim]), list(row[sim].values()), style, color=color, label=f"{sim}, {label}")
    ax.set(
        xlabel="tiles (1: Analog SGD)",
        ylabel="mean (w - b)^2, last quarter",
        yscale="log",
        title=f"R3 least squares, 4-state device, {args.steps} steps",
        xticks=list(TILES),
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "r3_least_squares.png", dpi=120)


if __name__ == "__main__":
    main()
