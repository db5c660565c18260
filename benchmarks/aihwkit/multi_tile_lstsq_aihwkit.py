#!/usr/bin/env python
"""R3's least-squares problem on aihwkit 1.1.0's TransferCompound, the cascade that R3's multi-tile method builds on.

Runs inside the separate aihwkit venv (~/aihwkit-venv). Argument: a JSON spec with "n_tiles" (a list: 1 is a
single SoftBoundsDevice trained by Analog SGD), "lr" (the optimizer's), "fast_lr", "transfer_lr" (absolute:
scale_transfer_lr off), "gamma", "period_ratio", "transfer_every", "steps", "k" and "seed". The problem and its
training loop are lstsq_problem.py's, shared with examples/r3_least_squares.py: k independent scalar weights w_i,
the loss sum_i (w_i - b_i)^2 at the input x = 1, b_i uniform in [-1, 1] on a 16-bit grid. The device is that
example's: N noiseless 4-state soft-bounds devices (w in [-1, 1], dw_min 0.5) with gains gamma^(N-1-i),
transfer periods transfer_every * period_ratio^i mini-batches, one column per transfer, perfect reads. Prints one
JSON line: {N: mean squared error of the last quarter of the steps}, sampled every 10 steps.
"""

import json
import sys

import torch
from aihwkit.nn import AnalogLinear
from aihwkit.optim import AnalogSGD
from aihwkit.simulator.configs import SingleRPUConfig, UnitCellRPUConfig
from aihwkit.simulator.configs.compounds import TransferCompound
from aihwkit.simulator.configs.devices import SoftBoundsDevice
from lstsq_problem import last_quarter_error, targets


def _device() -> SoftBoundsDevice:
    return SoftBoundsDevice(
        w_min=-1.0,
        w_max=1.0,
        dw_min=0.5,
        dw_min_dtod=0.0,
        dw_min_std=0.0,
        w_min_dtod=0.0,
        w_max_dtod=0.0,
        up_down=0.0,
        up_down_dtod=0.0,
    )


def _config(n: int, spec: dict):
    if n == 1:
        cfg = SingleRPUConfig(device=_device())
    else:
        cfg = UnitCellRPUConfig(
            device=TransferCompound(
                unit_cell_devices=[_device() for _ in range(n)],
                fast_lr=spec["fast_lr"],
                transfer_lr_vec=[spec["transfer_lr"]] * n,
                scale_transfer_lr=False,
                transfer_every_vec=[spec["transfer_every"] * spec["period_ratio"] ** i for i in range(n)],
                gamma_vec=[spec["gamma"] ** (n - 1 - i) for i in range(n)],
                units_in_mbatch=True,
                n_reads_per_transfer=1,
                transfer_columns=True,
            )
        )
        cfg.device.transfer_forward.is_perfect = True
    cfg.forward.is_perfect = True
    cfg.backward.is_perfect = True
    cfg.mapping.digital_bias = False
    return cfg


def error(n: int, spec: dict) -> float:
    torch.manual_seed(spec["seed"])
    b = targets(spec["k"], spec["seed"])
    model = AnalogLinear(1, spec["k"], bias=False, rpu_config=_config(n, spec))
    model.set_weights(torch.zeros(spec["k"], 1))
    opt = AnalogSGD(model.parameters(), lr=spec["lr"])
    opt.regroup_param_groups(model)
    return last_quarter_error(model, opt, b, spec["steps"], lambda: model.get_weights()[0][:, 0].numpy())


def main():
    spec = json.loads(open(sys.argv[1]).read())
    torch.set_num_threads(1)
    print(json.dumps({str(n): error(n, spec) for n in spec["n_tiles"]}))


if __name__ == "__main__":
    main()
