#!/usr/bin/env python
"""R1's FCN on the MNIST subset shipped with aimc, trained by aihwkit 1.1.0 with c-TTv2 or AGAD, to set our
runs of the same setting beside aihwkit's own (docs/results.md).

Runs inside the separate aihwkit venv (~/aihwkit-venv); reads aimc's aimc/data/mnist_small.npz (6000 training,
1000 test images). Model 784-256-128-10, sigmoid, cross-entropy on the logits, batch 10, AnalogSGD with --lr,
aihwkit's default periphery, build_config("c-ttv2" | "agad") (auto-scaled fast step fast_lr 0.1, fast update
BL 5, a column read per sample), digital biases, on

    --device softbounds:  SoftBoundsDevice() (aihwkit's defaults)
    --device powstep:     PowStepDevice(pow_gamma=--g) (aihwkit's other defaults)

Writes one JSON line per epoch to --out: test accuracy (%), mean training loss, seconds.

    ~/aihwkit-venv/bin/python benchmarks/aihwkit/train_chopped_fcn_aihwkit.py --algorithm c-ttv2 \
        --device softbounds --seed 0 --epochs 2 --out runs/aihwkit-cttv2-sb-0.jsonl
"""

import argparse
import json
import os
import time

import numpy as np
import torch
from aihwkit.nn import AnalogLinear
from aihwkit.optim import AnalogSGD
from aihwkit.simulator.configs import PowStepDevice, SoftBoundsDevice, build_config
from harness import test_accuracy, train_epoch
from torch import nn

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "aimc", "data", "mnist_small.npz")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithm", choices=["c-ttv2", "agad"], required=True)
    p.add_argument("--device", choices=["softbounds", "powstep"], required=True)
    p.add_argument("--g", type=float, default=1.0, help="pow_gamma of the PowStep device")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="JSON lines file, one line per epoch")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    z = np.load(DATA)
    x_train = torch.tensor(z["x_train"].reshape(-1, 784) / 255.0, dtype=torch.float32)
    y_train = torch.tensor(z["y_train"].astype(np.int64))
    x_test = torch.tensor(z["x_test"].reshape(-1, 784) / 255.0, dtype=torch.float32)
    y_test = torch.tensor(z["y_test"].astype(np.int64))
    device = SoftBoundsDevice() if a.device == "softbounds" else PowStepDevice(pow_gamma=a.g)
    cfg = build_config(a.algorithm, device=device)
    lin = lambda i, o: AnalogLinear(i, o, rpu_config=cfg)  # noqa: E731
    model = nn.Sequential(lin(784, 256), nn.Sigmoid(), lin(256, 128), nn.Sigmoid(), lin(128, 10))
    opt = AnalogSGD(model.parameters(), lr=a.lr)
    opt.regroup_param_groups(model)
    loss_fn = nn.CrossEntropyLoss()

    with open(a.out, "w") as log:
        for epoch in range(1, a.epochs + 1):
            t0 = time.time()
            train_loss = train_epoch(model, opt, loss_fn, x_train, y_train)
            print(
                json.dumps(
                    {
                        "args": vars(a),
                        "epoch": epoch,
                        "train_loss": train_loss,
                        "test_accuracy": test_accuracy(model, x_test, y_test, 100),
                        "seconds": round(time.time() - t0, 1),
                    }
                ),
                file=log,
                flush=True,
            )


if __name__ == "__main__":
    main()
