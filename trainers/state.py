"""Nested state dicts between numpy (what tiles and optimizers keep) and torch (what checkpoints hold).

A checkpoint of tensors and plain Python values loads with `torch.load(weights_only=True)`.
"""

from __future__ import annotations

import hashlib

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


def device_identity(cfg) -> dict[str, str]:
    """What identifies the devices of a layer's tiles (`cfg`: its TileConfig), kept in its checkpoint: the
    device as the config names it (preset or file name, else its family), its family (`kind`) and a digest
    of every resolved device parameter (the per-element parameters are drawn from these)."""
    device = cfg.resolved_device()
    name = cfg.device if isinstance(cfg.device, str) else device.kind
    digest = hashlib.sha256(device.model_dump_json().encode()).hexdigest()[:12]
    return {"name": name, "kind": device.kind, "digest": digest}


def check_device(saved: dict | None, mine: dict[str, str], where: str) -> None:
    """Refuse (ValueError naming both devices) a checkpoint of a layer whose tiles have other devices than
    this layer's; a checkpoint without a device identity (`saved` None) is taken as it is."""
    if saved is None or saved.get("digest") == mine["digest"]:
        return

    def said(d: dict) -> str:
        kind = "" if d["name"] == d["kind"] else f" ({d['kind']})"
        return f"{d['name']!r}{kind}, parameters {d['digest']}"

    raise ValueError(
        f"{where}: the checkpoint's tiles have device {said(saved)}, this layer's device {said(mine)}; "
        "load it into a model built with the checkpoint's tile config"
    )
