"""R1 Fig. 2: least squares on a shifted-linear device, Analog SGD vs Tiki-Taka vs residual learning.

The problem of [R1] Fig. 2 (Wu et al., NeurIPS 2025, arXiv:2502.06309): f(W) = 0.5 ||A W - b||^2 with
A in R^(100x50) ~ N(0, 1), W* ~ N(0, 0.5^2), b = A W*; the device is R1's shifted linear response
(tau = 3.5, dw_min = 1e-4, c in {0, 0.1, 0.2, 0.3}) with pulse trains of at most BL = 8, read exactly (the
floor then comes from dw_min alone). Every step uses the full batch: the 100 rows of A are the 100 samples
of one pulsed rank-100 update.

    python examples/r1_fig2_least_squares.py [--steps 1000] [--out docs/figures]

Writes r1_fig2.png and r1_fig2.json (final ||W - W*||^2 per algorithm and c). Transfer settings are tuned
per algorithm: Tiki-Taka transfers every column each step with trains of up to 31 pulses (aihwkit's
transfer BL; at the gradient's BL = 8 a transfer moves W by at most 8 dw_min), residual learning 5 columns
with transfer_lr 0.5.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from aimc import trainers
from aimc.devices import Linear, PeripheryConfig, UpdateConfig


def problem(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(100, 50, generator=g)
    w_star = 0.5 * torch.randn(50, generator=g)
    return a, w_star, a @ w_star


def run(algorithm: dict, c: float, steps: int, seed: int = 0) -> np.ndarray:
    """||W_k - W*||^2 over the steps for one algorithm on the device with asymmetry c."""
    a, w_star, b = problem(seed)
    tile = trainers.TileConfig(
        device=Linear(tau=3.5, dw_min=1e-4, c=c),
        forward=PeripheryConfig.perfect(),
        backward=PeripheryConfig.perfect(),
        update=UpdateConfig(desired_bl=8),
    )
    model = nn.Sequential(nn.Linear(50, 1, bias=False))
    nn.init.zeros_(model[0].weight)
    trainers.convert(model, tile, seed=seed)
    opt = trainers.build_optimizer(model, algorithm)
    err = np.empty(steps)
    for k in range(steps):
        opt.zero_grad()
        loss = 0.5 * ((model(a).squeeze(1) - b) ** 2).sum()
        loss.backward()
        opt.step()
        w, _ = model[0].get_weights()
        err[k] = float(((w.squeeze(0) - w_star) ** 2).sum())
    return err


ALGORITHMS = {
    "Analog SGD": {"algorithm": "analog_sgd", "lr": 2e-3},
    "Tiki-Taka": {"algorithm": "tiki_taka", "lr": 2e-3, "transfer_lr": 0.3, "n_columns": 50, "transfer_bl": 31},
    "Residual learning": {"algorithm": "residual", "lr": 2e-3, "transfer_lr": 0.5, "n_columns": 5, "gamma": 1.0},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = (0.0, 0.1, 0.2, 0.3)
    fig, axes = plt.subplots(1, len(cs), figsize=(4 * len(cs), 3.2), sharey=True)
    final: dict[str, dict[str, float]] = {}
    for ax, c in zip(axes, cs):
        for name, alg in ALGORITHMS.items():
            err = run(alg, c, args.steps)
            final.setdefault(name, {})[f"c={c}"] = float(err[-1])
            ax.semilogy(err, label=name)
            print(f"c = {c:.1f}  {name:18s} final ||W - W*||^2 = {err[-1]:.3g}")
        ax.set_title(f"c = {c}")
        ax.set_xlabel("step")
    axes[0].set_ylabel("||W - W*||^2")
    axes[0].legend()
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "r1_fig2.png", dpi=120)
    (args.out / "r1_fig2.json").write_text(json.dumps(final, indent=2))


if __name__ == "__main__":
    main()
