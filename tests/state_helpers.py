"""Bit-exact comparison of nested states (model, optimizer and checkpoint state dicts) for the tests."""

from __future__ import annotations

import numpy as np
import torch


def same_state(a, b) -> bool:
    """Bit-exact equality of nested states: tensors and arrays of the same dtype and values, dicts with the
    same keys, lists and tuples of the same length, equal scalars."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    return a == b
