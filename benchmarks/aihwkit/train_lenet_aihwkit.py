#!/usr/bin/env python
"""aimc's LeNet-5 (tanh) on the full MNIST, trained by aihwkit 1.1.0 with Analog SGD or Tiki-Taka on R1's
soft-bounds device, to set aimc's CNN runs (docs/results.md, R1 Table 7 CNN) beside aihwkit's own.

Runs inside the separate aihwkit venv (~/aihwkit-venv). Model: conv 5x5 1->6 (padding 2), tanh, max pool 2,
conv 5x5 6->16, tanh, max pool 2, 400-120-84-10 with tanh; every layer analog, digital biases; batch 8,
AnalogSGD with --lr; inputs / 255. Device: SoftBoundsDevice with bounds -+--tau, dw_min --dw-min, additive
cycle noise --sigma-c (dw_min units), no device-to-device spread (R1's `linear` family, aimc's
`{kind = "linear"}`); aihwkit's default periphery (DAC 7 bit, ADC 9 bit, output noise 0.06, noise and bound
management) on both passes, or an ideal backward pass with --ideal-backward; pulsed update BL 31 with
update management. Trains on the first --n-train images for one epoch, tests on all 10 000, prints one JSON
line.

    ~/aihwkit-venv/bin/python benchmarks/aihwkit/train_lenet_aihwkit.py --data data/mnist --algorithm sgd
"""

import argparse
import json
import os
import time

import numpy as np
import torch
from aihwkit.nn import AnalogConv2d, AnalogLinear
from aihwkit.optim import AnalogSGD
from aihwkit.simulator.configs import SoftBoundsDevice
from harness import read_idx, rpu_config, test_accuracy, train_epoch
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="folder with the four MNIST IDX files (gzip)")
    p.add_argument("--algorithm", choices=["sgd", "tiki-taka"], default="sgd")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--transfer-lr", type=float, default=0.5)
    p.add_argument("--tau", type=float, default=0.6)
    p.add_argument("--dw-min", type=float, default=0.001)
    p.add_argument("--sigma-c", type=float, default=0.1)
    p.add_argument("--n-train", type=int, default=16000)
    p.add_argument("--ideal-backward", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    load = lambda name: read_idx(os.path.join(a.data, name))  # noqa: E731
    x_train = torch.tensor(load("train-images-idx3-ubyte.gz")[: a.n_train] / 255.0, dtype=torch.float32)[:, None]
    y_train = torch.tensor(load("train-labels-idx1-ubyte.gz")[: a.n_train].astype(np.int64))
    x_test = torch.tensor(load("t10k-images-idx3-ubyte.gz") / 255.0, dtype=torch.float32)[:, None]
    y_test = torch.tensor(load("t10k-labels-idx1-ubyte.gz").astype(np.int64))
    device = SoftBoundsDevice(
        dw_min=a.dw_min,
        w_max=a.tau,
        w_min=-a.tau,
        dw_min_dtod=0.0,
        w_max_dtod=0.0,
        w_min_dtod=0.0,
        up_down=0.0,
        up_down_dtod=0.0,
        dw_min_std=a.sigma_c,
        mult_noise=False,
    )
    cfg = rpu_config(device, a.algorithm, units_in_mbatch=False, scale_transfer_lr=True, transfer_lr=a.transfer_lr)
    if a.ideal_backward:
        cfg.backward.is_perfect = True
    act = nn.Tanh
    model = nn.Sequential(
        AnalogConv2d(1, 6, 5, padding=2, rpu_config=cfg),
        act(),
        nn.MaxPool2d(2),
        AnalogConv2d(6, 16, 5, rpu_config=cfg),
        act(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        AnalogLinear(400, 120, rpu_config=cfg),
        act(),
        AnalogLinear(120, 84, rpu_config=cfg),
        act(),
        AnalogLinear(84, 10, rpu_config=cfg),
    )
    opt = AnalogSGD(model.parameters(), lr=a.lr)
    opt.regroup_param_groups(model)
    t0 = time.time()
    loss = train_epoch(model, opt, nn.CrossEntropyLoss(), x_train, y_train, batch=8)
    print(
        json.dumps(
            {
                "args": vars(a),
                "train_loss": loss,
                "test_accuracy": test_accuracy(model, x_test, y_test, 500),
                "seconds": round(time.time() - t0, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
