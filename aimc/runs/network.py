"""A run's network: the model of a config with its analog layers and optimizer, and what a run measures on
it (test loss and accuracy, saturation, chip costs). The training loop and retention both build and
evaluate models here."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from aimc import trainers
from aimc.config import ExperimentConfig
from aimc.models import build_model


def build(cfg: ExperimentConfig) -> tuple[nn.Module, Any]:
    """The model (on inference tiles with `inference`, else analog unless the trainer is digital SGD) and its
    optimizer, initialised from cfg.seed."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model)
    if cfg.inference is not None:
        model = trainers.convert(model, cfg.inference, seed=cfg.seed)
    elif cfg.trainer.algorithm != "sgd":
        model = trainers.convert(model, cfg.tile, seed=cfg.seed)
    return model, trainers.build_optimizer(model, cfg.trainer)


def analog_tiles(model: nn.Module) -> list:
    """Every tile of every analog layer of the model (`trainers.analog_layers`), in module order."""
    return [t for layer in trainers.analog_layers(model) for t in layer.tiles]


def saturated_fraction(tiles: list) -> float | None:
    """Fraction of analog elements (all arrays) within dw_min / 2 of their own bounds; None without tiles."""
    counts = [tile.saturation() for tile in tiles]
    hit, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
    return hit / total if total else None


def costs_of(opt: Any) -> dict[str, Any]:
    """The optimizer's chip costs so far (pulses, reads, transfers, steps, pulses per weight...) and its
    R1 Table 3 latency estimate per training step: update_ns (one layer) and step_ns (the whole model)."""
    costs = dict(opt.costs())
    latency = opt.latency_estimate()
    costs.update(update_ns=latency["update_ns"], step_ns=latency["step_ns"])
    return costs


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int) -> tuple[float, float]:
    """(mean cross-entropy loss in nats, accuracy in [0, 1]) on (x, y)."""
    model.eval()
    loss, correct = 0.0, 0
    for i in range(0, len(y), batch):
        out = model(x[i : i + batch])
        loss += float(F.cross_entropy(out, y[i : i + batch], reduction="sum"))
        correct += int((out.argmax(1) == y[i : i + batch]).sum())
    return loss / len(y), correct / len(y)
