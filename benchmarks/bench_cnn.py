#!/usr/bin/env python
"""Per-step training time of R1 Fig. 4's CNN (batch 8): every aimc algorithm vs digital torch SGD.

Model (R1's S2-mnist-CNN, DSPT's LeNet-5): conv 5x5 1->16, tanh, maxpool 2, conv 5x5 16->32, tanh, maxpool 2,
tanh, flatten, 512->128, tanh, 128->10; inputs uniform in [0, 1] (1 x 28 x 28), random labels, CrossEntropy.
Algorithm settings as benchmarks/bench_fcn.py (`build`). A step = zero_grad + forward + loss + backward +
optimizer step; variants timed in interleaved rounds, median; ratios against digital in the same run. With
--aihwkit-python also runs benchmarks/aihwkit/bench_chopped_aihwkit.py --model cnn.

    python3 benchmarks/bench_cnn.py [--steps 5] [--variants digital,c_ttv2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_fcn import VARIANTS, build  # noqa: E402
from torch import nn  # noqa: E402


def make_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 16, 5), nn.Tanh(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 5), nn.Tanh(),
                         nn.MaxPool2d(2), nn.Tanh(), nn.Flatten(), nn.Linear(512, 128), nn.Tanh(), nn.Linear(128, 10))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5, help="timed steps per round and variant")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--device", default="r1_power_1", help="device preset")
    p.add_argument("--mode", default="pulsed", choices=["pulsed", "expected"])
    p.add_argument("--lr-analog", type=float, default=0.05)
    p.add_argument("--transfer-lr", type=float, default=0.01)
    p.add_argument("--zero-shift-cycles", type=int, default=200, help="setup only; not timed")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--aihwkit-python", default=None, help="also run benchmarks/aihwkit/bench_chopped_aihwkit.py")
    p.add_argument("--json", default=None, help="write the results here")
    a = p.parse_args()
    if a.threads is not None:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    data = [(torch.rand(a.batch, 1, 28, 28), torch.randint(0, 10, (a.batch,))) for _ in range(20)]
    base = make_net()
    loss_fn = nn.CrossEntropyLoss()
    variants = a.variants.split(",")
    runs = {v: build(v, base, a) for v in variants}
    times = {v: [] for v in variants}
    counter = {v: 0 for v in variants}

    def one_step(v):
        model, opt = runs[v]
        x, y = data[counter[v] % len(data)]
        counter[v] += 1
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for v in variants:
        for _ in range(a.warmup):
            one_step(v)
    for _ in range(a.rounds):
        for v in variants:
            for _ in range(a.steps):
                t0 = time.perf_counter()
                one_step(v)
                times[v].append((time.perf_counter() - t0) * 1e3)
    res = {"config": {"model": "r1_cnn", "batch": a.batch, "device": a.device, "mode": a.mode,
                      "steps": a.steps * a.rounds, "torch_threads": torch.get_num_threads()},
           "ms": {v: float(np.median(times[v])) for v in variants}, "reads_per_step": {}}
    for v in variants:
        c = runs[v][1].costs()
        res["reads_per_step"][v] = c.get("transfer_reads", 0) / max(c["steps"], 1)
    if "digital" in res["ms"]:
        res["ratio"] = {v: ms / res["ms"]["digital"] for v, ms in res["ms"].items()}
    if a.aihwkit_python:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aihwkit", "bench_chopped_aihwkit.py")
        out = subprocess.run([os.path.expanduser(a.aihwkit_python), script, "--model", "cnn"],
                             capture_output=True, text=True)
        res["aihwkit"] = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else out.stderr[-2000:]
    print(f"{'variant':16s} {'ms/step':>9s} {'x digital':>10s} {'reads/step':>11s}")
    for v in variants:
        print(f"{v:16s} {res['ms'][v]:9.2f} {res.get('ratio', {}).get(v, float('nan')):10.2f} "
              f"{res['reads_per_step'][v]:11.0f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
