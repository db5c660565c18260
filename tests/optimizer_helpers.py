"""Models, steps and runs shared by the optimizer tests: an exact one-layer model for recursions written out
in numpy, a small noisy network, one training step and a checkpoint/resume run."""

from __future__ import annotations

import io

import numpy as np
import torch
from torch import nn

from aimc import trainers as T
from aimc.devices import Ideal, Linear, PeripheryConfig, UpdateConfig

DW = 2.0**-9
"""dw_min of the exact model: dyadic steps, so every product of the recursions is exact in float32 and float64."""
PERFECT = PeripheryConfig.perfect()


def exact_model(n_in: int = 4, n_out: int = 3, device=None) -> nn.Module:
    """A zeroed linear layer (no bias) on perfect reads, by default on an ideal constant-step device with
    dw_min = DW in expected mode: the arrays move by exactly the whole pulses the equations ask for."""
    lin = nn.Linear(n_in, n_out, bias=False)
    with torch.no_grad():
        lin.weight.zero_()
    tile = T.TileConfig(
        device=device or Ideal(tau=8.0, dw_min=DW),
        forward=PERFECT,
        backward=PERFECT,
        update=UpdateConfig(mode="expected", desired_bl=32),
    )
    return T.convert(nn.Sequential(lin), tile)


def dyadic_batches(n_batches: int, batch: int, n_in: int, n_out: int, seed: int = 0) -> list:
    """Inputs and output gradients on a grid of 1/4 (so eta d x is a whole number of dw_min)."""
    rng = np.random.default_rng(seed)
    return [
        (rng.integers(-4, 5, (batch, n_in)) / 4.0, rng.integers(-4, 5, (batch, n_out)) / 4.0) for _ in range(n_batches)
    ]


def drive(model, opt, batches) -> None:
    """One step per (x, g) with loss = sum(y * g): the layer's output gradient d is exactly g."""
    for x, g in batches:
        opt.zero_grad()
        (model(torch.tensor(x, dtype=torch.float32)) * torch.tensor(g, dtype=torch.float32)).sum().backward()
        opt.step()


def small_model(cfg):
    """A 6-5-3 sigmoid network on tiles of at most 4 inputs (split layers), with a noisy, spread device and
    output scales, and the optimizer of `cfg`: every random stream and state of a step is exercised."""
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(6, 5), nn.Sigmoid(), nn.Linear(5, 3))
    model = T.convert(
        net,
        T.TileConfig(
            device=Linear(tau=1.0, dw_min=1e-2, c=0.1, dw_min_std=0.3, dw_min_dtod=0.2), max_in=4, out_scale=True
        ),
        seed=5,
    )
    return model, T.build_optimizer(model, cfg)


def mse_step(model, opt, x, y) -> float:
    """One optimizer step on the mean squared error; the loss before the step."""
    opt.zero_grad()
    loss = 0.5 * ((model(x) - y) ** 2).sum(dim=1).mean()
    loss.backward()
    opt.step()
    return float(loss.detach())


def batches(n: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.rand(4, 6, generator=g), torch.rand(4, 3, generator=g)) for _ in range(n)]


def straight_and_resumed(cfg, cut: int = 4) -> tuple[tuple, tuple]:
    """(model, optimizer) after every batch in one go, and after a checkpoint at `cut` batches loaded into new
    objects and trained on; the old objects take two more steps first, so that state they share with the
    resumed ones would show."""
    data = batches()
    straight = small_model(cfg)
    for x, y in data:
        mse_step(*straight, x, y)
    model, opt = small_model(cfg)
    for x, y in data[:cut]:
        mse_step(model, opt, x, y)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    for x, y in data[cut : cut + 2]:
        mse_step(model, opt, x, y)
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    resumed = small_model(cfg)
    resumed[0].load_state_dict(ck["model"])
    resumed[1].load_state_dict(ck["opt"])
    for x, y in data[cut:]:
        mse_step(*resumed, x, y)
    return straight, resumed
