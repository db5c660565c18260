#!/usr/bin/env python
"""Per-step training time of R1 Fig. 4's CNN (batch 8): every aimc algorithm vs digital torch SGD.

Model (R1's S2-mnist-CNN, DSPT's LeNet-5): conv 5x5 1->16, tanh, maxpool 2, conv 5x5 16->32, tanh, maxpool 2,
tanh, flatten, 512->128, tanh, 128->10; inputs uniform in [0, 1] (1 x 28 x 28), random labels, CrossEntropy.
Algorithm settings as benchmarks/bench_fcn.py (`build`). A step = zero_grad + forward + loss + backward +
optimizer step; variants timed in interleaved rounds, median; ratios against digital in the same run. With
--aihwkit-python also runs benchmarks/aihwkit/bench_chopped_aihwkit.py --model cnn.

    python3 benchmarks/bench_cnn.py [--steps 10] [--rounds 12] [--variants digital,c_ttv2] [--json out.json]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_fcn import build, parse_args, time_steps  # noqa: E402

from aimc.config import R1CNNConfig  # noqa: E402
from aimc.models import build_model  # noqa: E402


def main():
    a = parse_args(__doc__, steps=10, rounds=12, warmup=3, batch=8, aihwkit_script="bench_chopped_aihwkit.py")
    data = [(torch.rand(a.batch, 1, 28, 28), torch.randint(0, 10, (a.batch,))) for _ in range(20)]
    base = build_model(R1CNNConfig())
    variants = a.variants.split(",")
    runs = {v: build(v, base, a) for v in variants}
    times = time_steps(runs, data, a)
    res = {
        "config": {
            "model": "r1_cnn",
            "batch": a.batch,
            "device": a.device,
            "mode": a.mode,
            "steps": a.steps * a.rounds,
            "torch_threads": torch.get_num_threads(),
        },
        "ms": {v: float(np.median(times[v])) for v in variants},
        "reads_per_step": {},
    }
    for v in variants:
        c = runs[v][1].costs()
        res["reads_per_step"][v] = c.get("transfer_reads", 0) / max(c["steps"], 1)
    if "digital" in res["ms"]:
        res["ratio"] = {v: ms / res["ms"]["digital"] for v, ms in res["ms"].items()}
    if a.aihwkit_python:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aihwkit", "bench_chopped_aihwkit.py")
        out = subprocess.run(
            [os.path.expanduser(a.aihwkit_python), script, "--model", "cnn"], capture_output=True, text=True
        )
        res["aihwkit"] = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else out.stderr[-2000:]
    print(f"{'variant':16s} {'ms/step':>9s} {'x digital':>10s} {'reads/step':>11s}")
    for v in variants:
        print(
            f"{v:16s} {res['ms'][v]:9.2f} {res.get('ratio', {}).get(v, float('nan')):10.2f} "
            f"{res['reads_per_step'][v]:11.0f}"
        )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
