"""The inference life of a model on inference tiles: `convert_inference` maps its layers, `program` writes
the trained weights once (programming noise of the tile's noise model), `drift` ages them to a time after
programming (drift and read noise) and sets the drift compensation (aihwkit's program_analog_weights and
drift_analog_weights)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from aimc.common import seeds
from aimc.trainers.convert import ANALOG, digital_layers
from aimc.trainers.inference_config import InferenceTileConfig
from aimc.trainers.inference_layers import INFERENCE, InferenceLayer, inference_layers
from aimc.trainers.inference_modifiers import clip_


def convert_inference(
    model: nn.Module, cfg: InferenceTileConfig, layers: Iterable[str] | None = None, seed: int = 0
) -> nn.Module:
    """Replace (in place, and return) the model's nn.Linear and nn.Conv2d by InferenceLinear /
    InferenceConv2d on tiles of `cfg` (the layers named in `layers`, or all); layer k (in module order) is
    seeded from (seed, k). Layers convert cannot map stay digital (convert's warning and strict apply)."""
    wanted = None if layers is None else set(layers)
    left = digital_layers(model, wanted)
    targets = []
    for name, m in model.named_modules():
        kind = next((t for t in INFERENCE if isinstance(m, t)), None)
        if kind is None or name in left or (wanted is not None and name not in wanted):
            continue
        if kind is nn.Conv2d and ANALOG[nn.Conv2d].unsupported(m) is not None:
            continue
        targets.append((name, m, kind))
    for k, (name, m, kind) in enumerate(targets):
        new = INFERENCE[kind](m, cfg, seed=seeds.layer_seed(seed, k))
        new.train(m.training)
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, new)
    return model


def _checked_layers(model: nn.Module, what: str) -> list[InferenceLayer]:
    found = inference_layers(model)
    if not found:
        raise ValueError(f"{what}: the model has no inference layers (convert it with an InferenceTileConfig)")
    return found


@torch.no_grad()
def program(model: nn.Module, t_inference: float | None = None, draw: int = 0) -> nn.Module:
    """Program every tile of every inference layer of the model: clip its weights (the tile config's clip),
    write them with the programming noise of the noise model and record the drift coefficients; with a
    drift compensation, read its baseline. t_inference (s): then drift to that time. draw: which noise draw
    (repeats of an evaluation use draws 0, 1, ...; the draws of a tile come from (tile seed, draw)).
    Evaluation (model.eval()) reads the programmed weights until the next `program` or `unprogram`;
    training reads the targets."""
    for layer in _checked_layers(model, "program"):
        for tile in layer.tiles:
            target = layer.weight.data[tile.rows, tile.cols]
            clip_(target, layer.tile_config.clip)
            key = int(seeds.generator(tile.seed, int(draw), 3).integers(2**62))
            tile.program_generator = torch.Generator().manual_seed(key)
            prog, state = layer.noise_model.apply_programming_noise(target.contiguous(), tile.program_generator)
            tile.programmed, tile.drift_state = prog.to(torch.float32), state
            tile.read, tile.alpha = tile.programmed, torch.ones(1)
            comp = layer.compensation
            if comp is not None:
                exact = comp.get_readout_tensor(target.shape[1]) @ target.T if comp.exact_reference else None
                tile.baseline = comp.readout(exact if exact is not None else layer.readout(tile, tile.programmed))
    if t_inference is not None:
        drift(model, t_inference)
    return model


@torch.no_grad()
def drift(model: nn.Module, t_inference: float) -> nn.Module:
    """Age the programmed weights of every tile to t_inference (s after programming): drift and read noise
    of the noise model, always from the programmed state (layers not yet programmed are programmed first,
    draw 0), then the drift compensation's output scale alpha = baseline / readout(drifted weights)."""
    if not (t_inference >= 0):
        raise ValueError(f"drift: t_inference must be a time >= 0 s (got {t_inference!r})")
    for layer in _checked_layers(model, "drift"):
        if not layer.programmed:
            program(layer)
        for tile in layer.tiles:
            w = layer.noise_model.apply_drift_noise(
                tile.programmed, tile.drift_state, float(t_inference), tile.program_generator
            )
            tile.read = w.to(torch.float32)
            if layer.compensation is not None:
                tile.alpha = layer.compensation.apply(layer.readout(tile, tile.read), tile.baseline)
    return model


def unprogram(model: nn.Module) -> nn.Module:
    """Forget the programmed state: evaluation reads the target weights again."""
    for layer in inference_layers(model):
        for tile in layer.tiles:
            tile.programmed = tile.drift_state = tile.read = tile.baseline = None
            tile.alpha = torch.ones(1)
    return model
