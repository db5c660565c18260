#!/usr/bin/env python
"""Per-step training time of aihwkit 1.1.0's chopped algorithms on R1's FCN or R1 Fig. 4's CNN.

Runs inside the separate aihwkit venv (~/aihwkit-venv), not the aimc env. Models: the FCN 784-256-128-10
(sigmoid, batch 10) or the CNN of R1 Fig. 4 (conv 5x5 1->16, tanh, maxpool 2, conv 5x5 16->32, tanh, maxpool
2, tanh, flatten, 512->128, tanh, 128->10; batch 8); random inputs in [0, 1], random labels, CrossEntropy.
Variants: digital (torch SGD), and aihwkit build_config("sgd" | "ttv1" | "ttv2" | "c-ttv2" | "agad") on SoftBounds
devices with AnalogSGD (lr 0.05); c_ttv2_mb / agad_mb with units_in_mbatch (a column read per mini-batch).
A step = zero_grad + forward + loss + backward + optimizer step; median over --steps after --warmup.
Prints one JSON line.
"""

import time

import numpy as np
import torch
from aihwkit.nn import AnalogConv2d, AnalogLinear
from aihwkit.optim import AnalogSGD
from aihwkit.simulator.configs import SoftBoundsDevice, build_config
from harness import emit, parser, set_up
from torch import nn

NAMES = {
    "analog_sgd": "sgd",
    "tiki_taka": "ttv1",
    "ttv2": "ttv2",
    "c_ttv2": "c-ttv2",
    "agad": "agad",
    "c_ttv2_mb": "c-ttv2",
    "agad_mb": "agad",
}


def make_model(kind, lin, conv):
    if kind == "fcn":
        return nn.Sequential(lin(784, 256), nn.Sigmoid(), lin(256, 128), nn.Sigmoid(), lin(128, 10))
    return nn.Sequential(
        conv(1, 16, 5),
        nn.Tanh(),
        nn.MaxPool2d(2),
        conv(16, 32, 5),
        nn.Tanh(),
        nn.MaxPool2d(2),
        nn.Tanh(),
        nn.Flatten(),
        lin(512, 128),
        nn.Tanh(),
        lin(128, 10),
    )


def main():
    p = parser(__doc__)
    p.add_argument("--model", choices=["fcn", "cnn"], default="fcn")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--variants", default="digital,analog_sgd,tiki_taka,ttv2,c_ttv2,agad,c_ttv2_mb,agad_mb")
    a = p.parse_args()
    set_up(a)
    batch = 10 if a.model == "fcn" else 8
    shape = (batch, 784) if a.model == "fcn" else (batch, 1, 28, 28)
    data = [(torch.rand(shape), torch.randint(0, 10, (batch,))) for _ in range(20)]
    loss_fn = nn.CrossEntropyLoss()
    out = {"model": a.model, "batch": batch, "steps": a.steps, "ms": {}}
    for v in a.variants.split(","):
        if v == "digital":
            model = make_model(a.model, nn.Linear, nn.Conv2d)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        else:
            cfg = build_config(NAMES[v], device=SoftBoundsDevice())
            if v.endswith("_mb"):  # one column read per mini-batch
                cfg.device.units_in_mbatch = True
            model = make_model(
                a.model,
                lambda i, o: AnalogLinear(i, o, rpu_config=cfg),
                lambda i, o, k: AnalogConv2d(i, o, k, rpu_config=cfg),
            )
            opt = AnalogSGD(model.parameters(), lr=0.05)
        times = []
        for k in range(a.warmup + a.steps):
            x, y = data[k % len(data)]
            t0 = time.perf_counter()
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            if k >= a.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
        out["ms"][v] = float(np.median(times))
    if "digital" in out["ms"]:
        out["ratio"] = {v: ms / out["ms"]["digital"] for v, ms in out["ms"].items()}
    emit(out, a)


if __name__ == "__main__":
    main()
