#!/usr/bin/env python
"""Per-step training time of the R1 MNIST FCN (784-256-128-10) with IBM aihwkit.

Runs inside the separate aihwkit venv (~/aihwkit-venv, built as docs/performance.md says), not the aimc env.
Network: Linear 784->256, sigmoid, Linear 256->128, sigmoid, Linear 128->10,
CrossEntropy on the logits, batch 10, random inputs uniform in [0, 1] with random
labels. Three variants:

  digital    torch nn.Linear + torch.optim.SGD (lr --lr-digital, 0.1)
  analog_sgd aihwkit AnalogLinear, SingleRPUConfig(SoftBoundsDevice) + AnalogSGD (lr 0.05)
  ttv1       aihwkit AnalogLinear, build_config("ttv1", SoftBoundsDevice)
             (UnitCellRPUConfig with TransferCompound of two SoftBounds devices) + AnalogSGD

A step = zero_grad + forward + loss + backward + optimizer step. Median over --steps
after --warmup steps. Prints one JSON line to stdout.
"""

import time

import numpy as np
import torch
from aihwkit.nn import AnalogLinear
from aihwkit.optim import AnalogSGD
from aihwkit.simulator.configs import SingleRPUConfig, SoftBoundsDevice, build_config
from harness import emit, parser, set_up
from torch import nn

SIZES = (784, 256, 128, 10)


def make_net(linear_factory):
    layers = []
    for i in range(len(SIZES) - 1):
        layers.append(linear_factory(SIZES[i], SIZES[i + 1]))
        if i < len(SIZES) - 2:
            layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)


def time_training(model, optimizer, data, steps, warmup):
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    n = len(data)

    def one_step(k):
        x, y = data[k % n]
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for k in range(warmup):
        one_step(k)
    times = []
    for k in range(steps):
        t0 = time.perf_counter()
        one_step(warmup + k)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)), float(np.mean(times))


def main():
    p = parser(__doc__)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--lr-digital", type=float, default=0.1)
    p.add_argument("--lr-analog", type=float, default=0.05)
    p.add_argument("--lr-ttv1", type=float, default=0.05)
    a = p.parse_args()
    set_up(a)

    n_batches = 100
    data = [(torch.rand(a.batch, SIZES[0]), torch.randint(0, SIZES[-1], (a.batch,))) for _ in range(n_batches)]

    # (a) digital reference
    digital = make_net(lambda i, o: nn.Linear(i, o))
    opt = torch.optim.SGD(digital.parameters(), lr=a.lr_digital)
    dig_med, dig_mean = time_training(digital, opt, data, a.steps, a.warmup)

    # (b) analog SGD on soft-bounds devices
    sgd_cfg = SingleRPUConfig(device=SoftBoundsDevice())
    analog = make_net(lambda i, o: AnalogLinear(i, o, bias=True, rpu_config=sgd_cfg))
    opt = AnalogSGD(analog.parameters(), lr=a.lr_analog)
    sgd_med, sgd_mean = time_training(analog, opt, data, a.steps, a.warmup)

    # (c) Tiki-Taka v1: TransferCompound of two soft-bounds devices via aihwkit's helper
    tt_cfg = build_config("ttv1", device=SoftBoundsDevice)
    ttv1 = make_net(lambda i, o: AnalogLinear(i, o, bias=True, rpu_config=tt_cfg))
    opt = AnalogSGD(ttv1.parameters(), lr=a.lr_ttv1)
    tt_med, tt_mean = time_training(ttv1, opt, data, a.steps, a.warmup)

    out = {
        "digital_ms": dig_med,
        "analog_sgd_ms": sgd_med,
        "ttv1_ms": tt_med,
        "ratio_analog_sgd": sgd_med / dig_med,
        "ratio_ttv1": tt_med / dig_med,
        "digital_ms_mean": dig_mean,
        "analog_sgd_ms_mean": sgd_mean,
        "ttv1_ms_mean": tt_mean,
        "ttv1_device": type(tt_cfg.device).__name__,
        "ttv1_unit_cell_devices": [type(dv).__name__ for dv in tt_cfg.device.unit_cell_devices],
        "sizes": list(SIZES),
        "batch": a.batch,
        "steps": a.steps,
        "warmup": a.warmup,
        "lr_digital": a.lr_digital,
        "lr_analog": a.lr_analog,
        "lr_ttv1": a.lr_ttv1,
    }
    emit(out, a)


if __name__ == "__main__":
    main()
