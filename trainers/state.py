"""Nested state dicts between numpy (what tiles and optimizers keep) and torch (what checkpoints hold).

A checkpoint of tensors and plain Python values loads with `torch.load(weights_only=True)`.
"""

from __future__ import annotations

import numpy as np
import torch


def state_to_torch(v):
    """Numpy arrays inside a (nested) state dict -> torch tensors; numpy scalars -> Python numbers."""
    if isinstance(v, np.ndarray):
        return torch.from_numpy(v.copy())
    if isinstance(v, dict):
        return {k: state_to_torch(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [state_to_torch(x) for x in v]
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def state_to_numpy(v):
    """Torch tensors inside a (nested) state dict -> numpy arrays (copies)."""
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().numpy().copy()
    if isinstance(v, dict):
        return {k: state_to_numpy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [state_to_numpy(x) for x in v]
    return v
