"""A run's network: the model of a config with its analog layers and optimizer, and what a run measures on
it (test loss and accuracy, saturation, chip costs). The training loop and retention both build and
evaluate models here."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from aimc import trainers
from aimc.common.errors import ConfigError
from aimc.config import ExperimentConfig
from aimc.model_config import NetworkConfig
from aimc.models import MNIST_SHAPE, build_model

ANALOG_TYPES = {"linear": nn.Linear, "conv1d": nn.Conv1d, "conv2d": nn.Conv2d}
"""The layer types of `model.analog_types`."""


def build(
    cfg: ExperimentConfig, in_shape: tuple[int, int, int] = MNIST_SHAPE, n_classes: int = 10
) -> tuple[nn.Module, Any]:
    """The model for images of `in_shape` (channels, height, width) and `n_classes` classes, initialised from
    cfg.seed or loaded from `model.pretrained`, its `analog_layer_names` on inference tiles with `inference`,
    else on training tiles unless the trainer is digital SGD; and its optimizer."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, n_classes, in_shape)
    if cfg.model.pretrained is not None:
        load_pretrained(model, cfg.model.pretrained)
    if cfg.inference is not None:
        model = trainers.convert(model, cfg.inference, layers=analog_layer_names(model, cfg.model), seed=cfg.seed)
    elif cfg.trainer.algorithm != "sgd":
        model = trainers.convert(model, cfg.tile, layers=analog_layer_names(model, cfg.model), seed=cfg.seed)
    return model.to(training_device(cfg.device)), trainers.build_optimizer(model, cfg.trainer)


def training_device(name: str) -> torch.device:
    """The torch device of the config's `device`; ValueError naming the field where CUDA is asked for and torch
    sees no GPU."""
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device = {name!r}: torch sees no CUDA GPU here (a CUDA build of torch, a GPU and "
            "pip install 'aimc[gpu]' are needed; docs/gpu.md)"
        )
    return device


def analog_layer_names(model: nn.Module, cfg: NetworkConfig) -> list[str] | None:
    """The qualified names of the Linear / Conv1d / Conv2d layers that match one of `cfg.analog_layers`' glob
    patterns and one of `cfg.analog_types`, in module order; None (every layer) when neither is given."""
    if cfg.analog_layers is None and cfg.analog_types is None:
        return None
    types = tuple(ANALOG_TYPES[t] for t in (cfg.analog_types or ANALOG_TYPES))
    patterns = cfg.analog_layers or ["*"]
    candidates = [(n, m) for n, m in model.named_modules() if isinstance(m, tuple(ANALOG_TYPES.values()))]
    names = [n for n, m in candidates if isinstance(m, types) and any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    if not names:
        raise ConfigError(
            f"model.analog_layers {patterns} with analog_types {cfg.analog_types or list(ANALOG_TYPES)}: no layer "
            f"matches; the layers are {[n for n, _ in candidates]}"
        )
    return names


def load_pretrained(model: nn.Module, path: str) -> None:
    """Load the state dict in the file `path` (torch.save of `model.state_dict()`, or an aimc checkpoint whose
    `model` entry is one) into `model`; a `ConfigError` names the missing and unexpected keys and the shape
    mismatches."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"model.pretrained: {str(file)!r} does not exist")
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:
        raise ConfigError(f"model.pretrained: {str(file)!r} is not a torch state-dict file ({err})") from None
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ConfigError(f"model.pretrained: {str(file)!r} holds no state dict (names -> tensors)")
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = [
        f"{k} {tuple(getattr(state[k], 'shape', ()))} (model {tuple(v.shape)})"
        for k, v in own.items()
        if k in state and getattr(state[k], "shape", None) != v.shape
    ]
    problems = []
    if missing:
        problems.append(f"missing keys {missing}")
    if unexpected:
        problems.append(f"unexpected keys {unexpected}")
    if shapes:
        problems.append(f"shapes differ: {', '.join(shapes)}")
    if problems:
        raise ConfigError(f"model.pretrained: {str(file)!r} does not fit the model: {'; '.join(problems)}")
    model.load_state_dict(state)


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
def evaluate(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int, device: str = "cpu"
) -> tuple[float, float]:
    """(mean cross-entropy loss in nats, accuracy in [0, 1]) on (x, y), the model on `device` (batches are
    moved there)."""
    model.eval()
    loss, correct = 0.0, 0
    for i in range(0, len(y), batch):
        yb = y[i : i + batch].to(device)
        out = model(x[i : i + batch].to(device))
        loss += float(F.cross_entropy(out, yb, reduction="sum"))
        correct += int((out.argmax(1) == yb).sum())
    return loss / len(y), correct / len(y)
