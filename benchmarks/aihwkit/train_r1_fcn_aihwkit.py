#!/usr/bin/env python
"""R1's FCN on the full MNIST, trained by IBM aihwkit 1.1.0 (Analog SGD or Tiki-Taka) at the settings of R1's
published script (github.com/Zhaoxian-Wu/analog-training, NeurIPS-2025/S2-mnist-FCN.py) or of R1 Table 7's
sweep, to set our simulator's runs of examples/sweeps/table8_r1code.toml and r1_table7_30ep.toml beside
aihwkit's own.

Runs inside the separate aihwkit venv (~/aihwkit-venv), not the aimc env; reads the four MNIST IDX files
(gzip) from --data. The settings taken from R1's script: 784-256-128-10 with sigmoid, log-softmax and NLL
loss, batch 10, AnalogSGD with lr 0.05 (its digital 0.1 halved for analog), StepLR(15, 0.5) unless
--no-decay, SingleRPUConfig with aihwkit's default periphery and update, learn_out_scaling and
weight_scaling_columnwise on, and the device

    --family pow:  PowStepDevice(dw_min = 2 tau / 1200, pow_gamma = g, pow_gamma_dtod = 0,
                                 w_max = tau, w_min = -tau, w_max_dtod = w_min_dtod = 0)
    --family exp:  ExpStepDevice(dw_min = 2 tau / 1200, gamma_up = gamma_down = g,
                                 w_max = tau, w_min = -tau, w_max_dtod = w_min_dtod = 0)

(aihwkit's other defaults: dw_min_dtod 0.3, dw_min_std 0.3, up_down_dtod 0.01, ExpStep's A and a, b), or,
for R1 Table 7's cycle-noise ablation (examples/sweeps/r1_table7_30ep.toml),

    --family softbounds:  SoftBoundsReferenceDevice(dw_min = 2 tau / 1200, w_max = tau, w_min = -tau,
                                 dw_min_std = --dw-min-std (additive: aihwkit's mult_noise False),
                                 no device-to-device spread)

with --no-out-scaling --no-decay (no output scale, lr kept at 0.05) as in that sweep. --algorithm tiki-taka
trains that sweep's TT instead of Analog SGD: UnitCellRPUConfig(TransferCompound([device, device],
gamma = 0, fast_lr = 0.05, transfer_lr = --transfer-lr with scale_transfer_lr off, one column read per
mini-batch: transfer_every 1 in units_in_mbatch, n_reads_per_transfer 1)), aimc's `tiki_taka` with lr 0.05
(docs/porting.md); its transfer reads and writes use aihwkit's defaults (transfer_forward, transfer_update).
Writes one JSON line per epoch to --out: test accuracy (%), mean training loss, the output scales.

    ~/aihwkit-venv/bin/python benchmarks/aihwkit/train_r1_fcn_aihwkit.py --family pow --g 1 \
        --data data/mnist --out runs/aihwkit-pow1.jsonl          # about 10 minutes
    ~/aihwkit-venv/bin/python benchmarks/aihwkit/train_r1_fcn_aihwkit.py --family softbounds --tau 1 \
        --dw-min-std 0.1 --no-out-scaling --no-decay --data data/mnist --out runs/aihwkit-sb1-010.jsonl
    ~/aihwkit-venv/bin/python benchmarks/aihwkit/train_r1_fcn_aihwkit.py --family softbounds --tau 1 \
        --dw-min-std 0.1 --no-out-scaling --no-decay --algorithm tiki-taka --data data/mnist \
        --out runs/aihwkit-tt-sb1-010.jsonl
"""

import argparse
import json
import time

import numpy as np
import torch
from aihwkit.nn.conversion import convert_to_analog
from aihwkit.optim import AnalogSGD
from aihwkit.simulator.configs.devices import ExpStepDevice, PowStepDevice, SoftBoundsReferenceDevice
from harness import read_idx, rpu_config, test_accuracy, train_epoch
from torch import nn

LR = 0.05
"""The gradient step: AnalogSGD's lr (also the digital biases') and Tiki-Taka's fast_lr."""


def load(data: str, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(images (n, 784) in [0, 1], labels) of the train or t10k split."""
    x = read_idx(f"{data}/{split}-images-idx3-ubyte.gz").reshape(-1, 784) / 255.0
    y = read_idx(f"{data}/{split}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y)


def device_of(family: str, g: float, tau: float, dw_min_std: float):
    # R1's code: 1200 states over [-tau, tau], bounds not spread
    common = dict(dw_min=2 * tau / 1200, dw_min_std=dw_min_std, w_max=tau, w_min=-tau, w_max_dtod=0, w_min_dtod=0)
    if family == "softbounds":
        return SoftBoundsReferenceDevice(**common, dw_min_dtod=0, up_down_dtod=0)
    if family == "pow":
        dev = PowStepDevice(**common, pow_gamma_dtod=0)
        dev.pow_gamma = g
    else:
        dev = ExpStepDevice(**common)
        dev.gamma_up = g
        dev.gamma_down = g
    return dev


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=["pow", "exp", "softbounds"], required=True)
    p.add_argument("--g", type=float, default=1.0, help="pow_gamma (pow) or gamma_up = gamma_down (exp)")
    p.add_argument("--dw-min-std", type=float, default=0.3, help="cycle noise, relative to dw_min")
    p.add_argument("--algorithm", choices=["sgd", "tiki-taka"], default="sgd")
    p.add_argument("--transfer-lr", type=float, default=0.5, help="tiki-taka's transfer rate (absolute)")
    p.add_argument("--no-out-scaling", action="store_true", help="no learnable output scale, no weight scaling")
    p.add_argument("--tau", type=float, default=0.6)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-decay", action="store_true", help="keep lr 0.05 (no StepLR)")
    p.add_argument("--data", required=True, help="directory with the four MNIST IDX files (gzip)")
    p.add_argument("--out", required=True, help="JSON lines file, one line per epoch")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    x_train, y_train = load(a.data, "train")
    x_test, y_test = load(a.data, "t10k")

    device = device_of(a.family, a.g, a.tau, a.dw_min_std)
    cfg = rpu_config(
        device, a.algorithm, fast_lr=LR, transfer_lr=a.transfer_lr, scale_transfer_lr=False, units_in_mbatch=True
    )
    cfg.mapping.learn_out_scaling = not a.no_out_scaling
    cfg.mapping.weight_scaling_columnwise = not a.no_out_scaling
    model = convert_to_analog(
        nn.Sequential(
            nn.Linear(784, 256),
            nn.Sigmoid(),
            nn.Linear(256, 128),
            nn.Sigmoid(),
            nn.Linear(128, 10),
            nn.LogSoftmax(dim=1),
        ),
        cfg,
    )
    opt = AnalogSGD(model.parameters(), lr=LR)
    opt.regroup_param_groups(model)
    decay = None if a.no_decay else torch.optim.lr_scheduler.StepLR(opt, step_size=15, gamma=0.5)
    loss_fn = nn.NLLLoss()

    with open(a.out, "w") as log:
        print(
            json.dumps({"args": vars(a), "epoch": 0, "test_accuracy": test_accuracy(model, x_test, y_test, 10)}),
            file=log,
            flush=True,
        )
        for epoch in range(1, a.epochs + 1):
            t0 = time.time()
            train_loss = train_epoch(model, opt, loss_fn, x_train, y_train)
            if decay is not None:
                decay.step()
            scales = [
                round(float(q.detach().abs().mean()), 4) for n, q in model.named_parameters() if "out_scaling" in n
            ]
            print(
                json.dumps(
                    {
                        "epoch": epoch,
                        "train_loss": train_loss,
                        "test_accuracy": test_accuracy(model, x_test, y_test, 10),
                        "out_scales": scales,
                        "seconds": round(time.time() - t0, 1),
                    }
                ),
                file=log,
                flush=True,
            )


if __name__ == "__main__":
    main()
