"""R3's least-squares problem (arXiv:2510.02516, Appendix K), shared by its aimc side (examples/r3_least_squares.py)
and its aihwkit side (multi_tile_lstsq_aihwkit.py), so that both simulators solve the same problem the same way.

It imports only torch, numpy and the standard library: it runs in aimc's environment and in aihwkit's.
"""

from collections.abc import Callable

import numpy as np
import torch


def targets(k: int, seed: int) -> torch.Tensor:
    """The k targets b_i, uniform in [-1, 1] on a 16-bit grid."""
    return torch.tensor(
        np.round(np.random.default_rng(seed).uniform(-1.0, 1.0, k) * 2**15) / 2**15, dtype=torch.float32
    )


def last_quarter_error(
    model: torch.nn.Module, opt: torch.optim.Optimizer, b: torch.Tensor, steps: int, weights: Callable[[], np.ndarray]
) -> float:
    """Train `model` (one layer of k outputs at the input x = 1) on sum_i (y_i - b_i)^2 for `steps` steps of
    `opt`; the mean of (w - b)^2 over the k weights (`weights()`, the layer's k weights) and every 10th step of
    the last quarter."""
    x = torch.ones(1, 1)
    errs = []
    for t in range(steps):
        opt.zero_grad()
        ((model(x)[0] - b) ** 2).sum().backward()
        opt.step()
        if t >= steps - steps // 4 and t % 10 == 0:
            errs.append(float(((weights() - b.numpy()) ** 2).mean()))
    return float(np.mean(errs))
