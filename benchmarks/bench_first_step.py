#!/usr/bin/env python
"""Time of the first training steps on an empty Numba cache: what the first `aimc train` of a fresh install
waits while the kernels compile. Each step is timed in a fresh process with NUMBA_CACHE_DIR set to a new
empty folder: Analog SGD, c-TTv2 and AGAD, each on a small FCN then on a small CNN (the second of a pair
mostly reuses what the first compiled). Prints seconds per step.

    python3 benchmarks/bench_first_step.py [--algorithms analog_sgd,c_ttv2] [--device r1_power_1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

STEPS = """
import time, torch
from aimc import trainers
for algorithm in {algorithms!r}:
    for conv in (False, True):
        torch.manual_seed(0)
        if conv:
            model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(32, 4))
            x = torch.randn(6, 1, 6, 6)
        else:
            model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4))
            x = torch.randn(6, 6)
        model = trainers.convert(model, trainers.TileConfig(device={device!r}), seed=5)
        opt = trainers.build_optimizer(model, {{"algorithm": algorithm, "lr": 0.05}})
        t = time.perf_counter()
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()
        print(f"{{algorithm:12s}} {{'cnn' if conv else 'fcn'}}  {{time.perf_counter() - t:7.1f}} s", flush=True)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algorithms", default="analog_sgd,c_ttv2,agad")
    p.add_argument("--device", default="r1_power_1", help="device preset of every tile")
    a = p.parse_args()
    code = STEPS.format(algorithms=a.algorithms.split(","), device=a.device)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env, check=True)


if __name__ == "__main__":
    main()
