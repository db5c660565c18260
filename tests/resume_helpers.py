"""A small analog model, one training step and a checkpoint/resume run, shared by the optimizer tests."""

from __future__ import annotations

import io

import torch
from torch import nn

from aimc import trainers as T
from aimc.devices import Linear


def small_model(cfg):
    """A 6-5-3 sigmoid network on tiles of at most 4 inputs (split layers), with a noisy, spread device and
    output scales, and the optimizer of `cfg`: every random stream and state of a step is exercised."""
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(6, 5), nn.Sigmoid(), nn.Linear(5, 3))
    model = T.convert(net, T.TileConfig(device=Linear(tau=1.0, dw_min=1e-2, c=0.1, dw_min_std=0.3,
                                                      dw_min_dtod=0.2), max_in=4, out_scale=True), seed=5)
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
    for x, y in data[cut:cut + 2]:
        mse_step(model, opt, x, y)
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    resumed = small_model(cfg)
    resumed[0].load_state_dict(ck["model"])
    resumed[1].load_state_dict(ck["opt"])
    for x, y in data[cut:]:
        mse_step(*resumed, x, y)
    return straight, resumed
