#!/usr/bin/env python
"""Evaluation time of R1's CNN (`r1_cnn`) on inference tiles vs its digital forward pass.

The same trained-from-init weights, evaluated (torch.no_grad, eval mode) on batches of uniform [0, 1] 1 x 28 x 28
inputs: digital torch; inference tiles programmed and drifted to 1 y (PCM noise, global drift compensation,
R1's forward periphery: DAC 7 bit, ADC 9 bit, output noise, noise and bound management); and inference tiles
with an exact read (the cost of the tile layers alone). Variants timed in interleaved rounds, median per
batch; ratios against digital in the same run.

    python3 benchmarks/bench_inference.py [--batch 100] [--rounds 15] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import numpy as np
import torch

from aimc import trainers
from aimc.config import R1CNNConfig
from aimc.devices import set_kernel_threads
from aimc.devices.periphery import PeripheryConfig
from aimc.models import build_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--threads", type=int, default=1, help="torch and Numba threads")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    set_kernel_threads(a.threads)
    torch.manual_seed(0)
    digital = build_model(R1CNNConfig()).eval()
    tiles = trainers.convert(copy.deepcopy(digital), trainers.InferenceTileConfig()).eval()
    trainers.program(tiles, t_inference=365.25 * 86400)
    exact = trainers.convert(
        copy.deepcopy(digital), trainers.InferenceTileConfig(forward=PeripheryConfig.perfect(), noise_model="none")
    ).eval()
    trainers.program(exact)
    variants = {"digital": digital, "inference": tiles, "inference_exact_read": exact}
    x = torch.rand(a.batch, 1, 28, 28)
    times = {v: [] for v in variants}
    with torch.no_grad():
        for m in variants.values():
            m(x)  # warm-up: Numba compilation and caches
        for _ in range(a.rounds):
            for v, m in variants.items():
                t0 = time.perf_counter()
                m(x)
                times[v].append(time.perf_counter() - t0)
    ms = {v: 1e3 * float(np.median(t)) for v, t in times.items()}
    res = {
        "config": {"model": "r1_cnn", "batch": a.batch, "rounds": a.rounds, "threads": a.threads},
        "ms_per_batch": ms,
        "ratio": {v: ms[v] / ms["digital"] for v in ms},
    }
    print(f"{'variant':22s} {'ms/batch':>9s} {'x digital':>10s}")
    for v in ms:
        print(f"{v:22s} {ms[v]:9.3f} {res['ratio'][v]:10.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
