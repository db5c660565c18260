#!/usr/bin/env python
"""Per-step training time of ResNet-18 (CIFAR form, batch 32, 3 x 32 x 32 inputs) on the CPU: Analog SGD,
Tiki-Taka and residual learning against digital torch SGD in one run.

Every convolution and the fc on tiles (device r1_power_1, pulsed update, R1's periphery); inputs uniform in
[0, 1], random labels out of 10, CrossEntropy. Algorithm settings as benchmarks/bench_fcn.py (`build`); the
residual run's zero shift (--zero-shift-cycles) is setup, not timed. A step = zero_grad + forward + loss +
backward + optimizer step; variants timed in interleaved rounds, median; ratios against digital in the same run.
--width narrows the network (64: the standard ResNet-18).

    python3 benchmarks/bench_resnet.py [--steps 2] [--rounds 3] [--width 64] [--json out.json]
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_fcn import build_timed, parse_args, time_steps  # noqa: E402

from aimc.config import CifarResNetConfig  # noqa: E402
from aimc.models import build_model  # noqa: E402

VARIANTS = "digital,analog_sgd,tiki_taka,residual"


def main():
    width = 64
    if "--width" in sys.argv:
        i = sys.argv.index("--width")
        width = int(sys.argv[i + 1])
        del sys.argv[i : i + 2]
    if not any(arg.startswith("--variants") for arg in sys.argv):
        sys.argv += ["--variants", VARIANTS]
    a = parse_args(__doc__, steps=2, rounds=3, warmup=1, batch=32, aihwkit_script="(none for ResNet)")
    data = [(torch.rand(a.batch, 3, 32, 32), torch.randint(0, 10, (a.batch,))) for _ in range(4)]
    base = build_model(CifarResNetConfig(name="resnet18", width=width), 10, (3, 32, 32))
    variants = a.variants.split(",")
    runs = build_timed(variants, base, a)
    times = time_steps(runs, data, a)
    res = {
        "config": {
            "model": f"resnet18 (width {width})",
            "batch": a.batch,
            "device": a.device,
            "mode": a.mode,
            "exact_reads": a.exact_reads,
            "steps": a.steps * a.rounds,
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
        },
        "ms": {v: float(np.median(times[v])) for v in variants},
        "setup_s": {v: runs[v][2] for v in variants},
    }
    if "digital" in res["ms"]:
        res["ratio"] = {v: ms / res["ms"]["digital"] for v, ms in res["ms"].items()}
    print(f"{'variant':12s} {'ms/step':>10s} {'x digital':>10s} {'setup s':>8s}")
    for v in variants:
        ratio = res.get("ratio", {}).get(v, float("nan"))
        print(f"{v:12s} {res['ms'][v]:10.1f} {ratio:10.2f} {res['setup_s'][v]:8.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
