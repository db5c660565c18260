"""aihwkit 1.1.0's answer to one device question, for the equivalence tests (tests/test_devices_aihwkit*.py).

Reads a JSON list of specs from stdin and prints one JSON line, the list of answers. Runs in aihwkit's own
virtual environment (the project never imports aihwkit). Modes:
- "trace": a 1 x 1 tile fires one pulse per update (x = 1, d = -sign, BL 1, both managements off, lr above
  the granularity so the probability clips at 1); returns the weight after every pulse.
- "stats": per seed a new tile (fresh device-to-device draws), set to w0, one mini-batch update of x, d with
  lr and the update parameters given; returns the per-element mean and variance of the change over seeds.
- "fields": the numeric and boolean fields of one of aihwkit's preset device classes.
- "effects": a 200 x 200 tile set to w0, then `steps` post-update steps (diffusion, decay) or, with
  "reset", one reset of every element; returns the apparent and hidden weights' mean and std.
"""

import dataclasses
import json
import sys

import numpy as np
import torch
from aihwkit.simulator import presets
from aihwkit.simulator.configs import SingleRPUConfig, UpdateParameters, devices
from aihwkit.simulator.tiles import AnalogTile


def _tile(spec: dict, rows: int, cols: int, update: dict) -> AnalogTile:
    device = getattr(devices, spec["kind"] + "Device")(**spec["device"])
    return AnalogTile(rows, cols, SingleRPUConfig(device=device, update=UpdateParameters(**update)), bias=False)


def trace(spec: dict) -> dict:
    tile = _tile(spec, 1, 1, dict(desired_bl=1, update_management=False, update_bl_management=False))
    tile.set_learning_rate(spec["lr"])
    tile.set_weights(torch.full((1, 1), spec["w0"]))
    one = torch.ones((1, 1))
    out = []
    for s in spec["signs"]:
        tile.update(one, torch.full((1, 1), -float(s)))  # W -= lr d x: d = -1 is an up pulse
        out.append(float(tile.get_weights()[0][0, 0]))
    return {"w": out}


def stats(spec: dict) -> dict:
    x = torch.tensor(spec["x"], dtype=torch.float32)
    d = torch.tensor(spec["d"], dtype=torch.float32)
    acc = np.zeros((d.shape[1], x.shape[1]))
    acc2 = np.zeros_like(acc)
    for seed in range(spec["seeds"]):
        torch.manual_seed(seed)
        tile = _tile(spec, d.shape[1], x.shape[1], spec.get("update", {}))
        tile.set_learning_rate(spec["lr"])
        tile.set_weights(torch.full((d.shape[1], x.shape[1]), spec["w0"]))
        w0 = tile.get_weights()[0].numpy().astype(float)
        tile.update(x, d)
        dw = tile.get_weights()[0].numpy().astype(float) - w0
        acc += dw
        acc2 += dw**2
    m = acc / spec["seeds"]
    return {"mean": m.tolist(), "var": (acc2 / spec["seeds"] - m**2).tolist()}


def fields(spec: dict) -> dict:
    dev = getattr(presets, spec["preset"])()
    return {
        f.name: getattr(dev, f.name)
        for f in dataclasses.fields(dev)
        if isinstance(getattr(dev, f.name), (bool, int, float))
    }


def effects(spec: dict) -> dict:
    torch.manual_seed(0)
    tile = _tile(spec, 200, 200, {})
    tile.set_weights(torch.full((200, 200), spec["w0"]))
    if spec.get("reset"):
        tile.reset(1.0)
    for _ in range(spec.get("steps", 0)):
        tile.post_update_step()
    w = tile.get_weights()[0].numpy().astype(float)
    hidden = tile.get_hidden_parameters().get("persistent_weights")
    out = {"mean": float(w.mean()), "std": float(w.std())}
    if hidden is not None:
        out["noise_std"] = float((w - hidden.numpy().astype(float)).std())
    return out


if __name__ == "__main__":
    torch.set_num_threads(1)
    modes = {"trace": trace, "stats": stats, "fields": fields, "effects": effects}
    print(json.dumps([modes[spec["mode"]](spec) for spec in json.loads(sys.stdin.read())]))
