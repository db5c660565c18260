#!/usr/bin/env python
"""Time of one chopped-transfer call on the first convolution of R1 Fig. 4's CNN (16 x 25 tile, 4608 vectors
per step at batch 8): the inputs of that call are captured from a few training steps of
benchmarks/bench_cnn.py's c_ttv2 (or agad) model, then the call is repeated on copies of its chopper state.

Prints the median ms of the call with its own read schedule (a read after every vector) and with one read
for the whole batch (the same vectors as one update), per round.

    python3 benchmarks/bench_chopped_call.py [--variant c_ttv2] [--calls 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_fcn import build, parse_args  # noqa: E402

import aimc.trainers.algorithms.c_ttv2 as c_ttv2  # noqa: E402
from aimc.config import R1CNNConfig  # noqa: E402
from aimc.models import build_model  # noqa: E402

FIRST_CONV = (4608, 25)  # the vectors x of the first convolution's call at batch 8


def capture(variant: str, steps: int = 6) -> tuple:
    """The arguments of the last chopped_transfer call on the first convolution in `steps` training steps."""
    sys.argv = sys.argv[:1]
    settings = parse_args(__doc__, steps=1, rounds=1, warmup=0, batch=8, aihwkit_script="bench_chopped_aihwkit.py")
    torch.manual_seed(0)
    model, opt = build(variant, build_model(R1CNNConfig()), settings)
    real = c_ttv2.chopped_transfer
    got = {}

    def grab(tile, arrays, x, *rest):
        if x.shape == FIRST_CONV:
            got["args"] = (tile, arrays, x.copy(), *copy.deepcopy(rest))
        return real(tile, arrays, x, *rest)

    c_ttv2.chopped_transfer = grab
    try:
        loss = torch.nn.CrossEntropyLoss()
        for _ in range(steps):
            opt.zero_grad()
            loss(model(torch.rand(8, 1, 28, 28)), torch.randint(0, 10, (8,))).backward()
            opt.step()
    finally:
        c_ttv2.chopped_transfer = real
    return got["args"]


def median_ms(call, n: int) -> float:
    call()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant", default="c_ttv2", choices=["c_ttv2", "agad"])
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    tile, arrays, x, d, steps, rule, uniforms, state, reads, position = capture(a.variant)
    n = x.shape[0]

    def run(schedule):
        return lambda: c_ttv2.chopped_transfer(
            tile, arrays, x, d, steps, rule, uniforms, copy.deepcopy(state), schedule, position
        )

    for _ in range(a.rounds):
        print(
            f"{a.variant}: a read after every vector {median_ms(run(reads), a.calls):.2f} ms, "
            f"one read per batch {median_ms(run((n - 1, n)), a.calls):.2f} ms"
        )


if __name__ == "__main__":
    main()
