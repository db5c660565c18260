"""A torch optimizer (Adam, SGD, ...) on an analog model is refused at its first step.

Analog weights live in the tiles and never get a `.grad`: a torch optimizer given `model.parameters()`
would train only the digital biases and output scales, silently. A global step pre-hook
(`torch.optim.optimizer.register_optimizer_step_pre_hook`) checks each optimizer once, at its first step,
for parameters of a live analog layer; the analog optimizers of `build_optimizer` pass.
"""

from __future__ import annotations

import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from aimc.trainers.algorithms.base import AnalogOptimizer
from aimc.trainers.layers import LIVE_LAYERS

_CHECKED: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()


def refuse_torch_optimizer(optimizer: torch.optim.Optimizer, args, kwargs) -> None:
    """Step pre-hook: raise TypeError where a torch optimizer holds parameters of an analog layer."""
    if optimizer in _CHECKED or isinstance(optimizer, AnalogOptimizer):
        return
    _CHECKED.add(optimizer)
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    layer = next((m for m in list(LIVE_LAYERS) if any(id(p) in held for p in m.parameters())), None)
    if layer is not None:
        raise TypeError(
            f"{type(optimizer).__name__} holds parameters of {layer.label()}: analog weights live in the tiles "
            "and never get a .grad, so a torch optimizer would train only the digital biases and output scales; "
            "use aimc.trainers.build_optimizer(model, {'algorithm': 'analog_sgd', 'lr': ...}) (or another "
            "algorithm of aimc.trainers.ALGORITHMS), which also steps the digital parameters"
        )


_HANDLE = register_optimizer_step_pre_hook(refuse_torch_optimizer)
