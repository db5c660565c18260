#!/usr/bin/env python
"""Per-step training time of R1's MNIST FCN (784-256-128-10, sigmoid, batch 10): aimc vs digital torch SGD.

A step = zero_grad + forward + loss + backward + optimizer step (as benchmarks/aihwkit/bench_fcn_aihwkit.py).
Inputs uniform in [0, 1], random labels, CrossEntropy on the logits. Variants: digital (torch SGD, lr 0.1),
every analog algorithm (lr 0.05, transfer_lr 0.01; c_ttv2 and agad with aihwkit's build_config settings, a
column read after every sample; c_ttv2_mb, agad_mb one per mini-batch; c_ttv2_fast c-TTv2 without any column
read or transfer, the least work of the chopped algorithms) on R1's periphery
(DAC 7 bit, ADC 9 bit, output noise 0.06, noise and bound management) and the `--device` preset, tiles of at
most 512 x 512 (aihwkit's default mapping). The variants are timed in interleaved rounds (median over all
steps), so a load change on the machine hits all of them alike; ratios are against digital in the same run.

    python3 benchmarks/bench_fcn.py [--aihwkit-python ~/aihwkit-venv/bin/python] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import time

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from aimc import devices  # noqa: E402,F401  first: importing aimc sets the OpenMP spin policy (aimc/__init__.py)
from aimc import trainers as T  # noqa: E402
from aimc.devices import PeripheryConfig, UpdateConfig  # noqa: E402

SIZES = (784, 256, 128, 10)
VARIANTS = (
    "digital",
    "analog_sgd",
    "tiki_taka",
    "ttv2",
    "residual",
    "residual_v2",
    "multi_tile",
    "mixed_precision",
    "c_ttv2",
    "agad",
    "c_ttv2_mb",
    "agad_mb",
    "c_ttv2_fast",
    "c_ttv2_paper",
    "agad_paper",
    "rider",
    "e_rider",
)
# arXiv:2602.21321's Table 5 rates (its scripts': fast step 0.05 absolute, transfer_lr 0.3 scaled by lr, auto
# granularity 1000, a regular chopper every 10 sweeps, one column read per mini-batch)
PAPER_CHOPPED = dict(
    fast_lr=0.05,
    auto_scale=False,
    transfer_lr=0.3,
    scale_transfer_lr=True,
    auto_granularity=1000,
    in_chop_prob=0.1,
    in_chop_random=False,
    units_in_mbatch=True,
)


def make_net():
    layers = []
    for i in range(len(SIZES) - 1):
        layers.append(nn.Linear(SIZES[i], SIZES[i + 1]))
        if i < len(SIZES) - 2:
            layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)


def build(variant, base, a):
    """(model, optimizer) of `variant` on a copy of `base` with the settings of `a`."""
    model = copy.deepcopy(base) if variant == "digital" else analog_copy(variant, base, a)
    return model, T.build_optimizer(model, algorithm(variant, a))


def build_timed(variants: list[str], base, a) -> dict[str, tuple]:
    """{variant: (model, optimizer, seconds to build them)} for each of `variants` (build)."""
    runs = {}
    for v in variants:
        t0 = time.perf_counter()
        runs[v] = (*build(v, base, a), time.perf_counter() - t0)
    return runs


def analog_copy(variant, base, a):
    """A copy of `base` with every layer on tiles (device, update mode and periphery of `a`) for `variant`."""
    model = copy.deepcopy(base)
    # aihwkit's build_config("c-ttv2") / ("agad") give the fast update BL 5
    bl = 5 if variant.startswith(("c_ttv2", "agad")) and not variant.endswith("_paper") else 31
    reads = {"forward": PeripheryConfig.perfect(), "backward": PeripheryConfig.perfect()} if a.exact_reads else {}
    tile = T.TileConfig(device=a.device, update=UpdateConfig(mode=a.mode, desired_bl=bl), **reads)
    return T.convert(model, tile, seed=a.seed)


def algorithm(variant, a):
    """The optimizer config of `variant` (rates of `a`)."""
    lr, tlr = a.lr_analog, a.transfer_lr
    return {
        "digital": T.DigitalSGDConfig(lr=0.1),
        "analog_sgd": T.AnalogSGDConfig(lr=lr),
        "tiki_taka": T.TikiTakaConfig(lr=lr, transfer_lr=tlr),
        "residual": T.ResidualConfig(lr=lr, transfer_lr=tlr, zero_shift_cycles=a.zero_shift_cycles),
        "residual_v2": T.ResidualV2Config(lr=lr, zero_shift_cycles=a.zero_shift_cycles),
        "mixed_precision": T.MixedPrecisionConfig(lr=lr),
        "ttv2": T.TTv2Config(lr=lr, transfer_lr=tlr),
        "multi_tile": T.MultiTileConfig(lr=lr, transfer_lr=tlr, zero_shift_cycles=a.zero_shift_cycles),
        # aihwkit 1.1.0 build_config("c-ttv2") / ("agad") settings: a column read after every sample
        "c_ttv2": T.CTTv2Config(lr=lr),
        "agad": T.AGADConfig(lr=lr),
        # the same with one column read per mini-batch (units_in_mbatch, as R1's and DSPT's scripts)
        "c_ttv2_mb": T.CTTv2Config(lr=lr, units_in_mbatch=True),
        "agad_mb": T.AGADConfig(lr=lr, units_in_mbatch=True),
        # c-TTv2's fast-array work alone (chopper, auto-scaled fast update), no column read or transfer in the
        # run: what c_ttv2_mb and agad_mb cost at the least, whatever their reads and transfers cost
        "c_ttv2_fast": T.CTTv2Config(lr=lr, units_in_mbatch=True, transfer_every=1e9),
        "c_ttv2_paper": T.CTTv2Config(lr=lr, **PAPER_CHOPPED),
        "agad_paper": T.AGADConfig(lr=lr, **PAPER_CHOPPED),
        "rider": T.RiderConfig(lr=lr, transfer_lr=tlr),
        "e_rider": T.ERiderConfig(lr=lr, transfer_lr=tlr),
    }[variant]


def parse_args(doc: str, steps: int, rounds: int, warmup: int, batch: int, aihwkit_script: str) -> argparse.Namespace:
    """The command line of a step benchmark (this one and bench_cnn.py), with its own defaults."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--steps", type=int, default=steps, help="timed steps per round and variant")
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--device", default="r1_power_1", help="device preset")
    p.add_argument("--mode", default="pulsed", choices=["pulsed", "expected"])
    p.add_argument("--exact-reads", action="store_true", help="reads without periphery: numpy's exact float32 product")
    p.add_argument("--lr-analog", type=float, default=0.05)
    p.add_argument("--transfer-lr", type=float, default=0.01)
    p.add_argument("--zero-shift-cycles", type=int, default=200, help="setup only; not timed")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--aihwkit-python", default=None, help=f"also run benchmarks/aihwkit/{aihwkit_script}")
    p.add_argument("--json", default=None, help="write the results here")
    a = p.parse_args()
    if a.threads is not None:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    return a


def time_steps(runs: dict, data: list, a: argparse.Namespace, synchronize=lambda: None) -> dict[str, list[float]]:
    """Milliseconds of each timed step per variant: `a.warmup` untimed steps each, then `a.rounds` rounds of
    `a.steps` steps of every variant in turn (a load change on the machine hits all of them alike);
    synchronize() before and after each timed step (a GPU's torch.cuda.synchronize: benchmarks/bench_gpu.py)."""
    loss_fn = nn.CrossEntropyLoss()
    times = {v: [] for v in runs}
    counter = dict.fromkeys(runs, 0)

    def one_step(v):
        model, opt = runs[v][:2]
        x, y = data[counter[v] % len(data)]
        counter[v] += 1
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for v in runs:
        for _ in range(a.warmup):
            one_step(v)
    for _ in range(a.rounds):
        for v in runs:
            for _ in range(a.steps):
                synchronize()
                t0 = time.perf_counter()
                one_step(v)
                synchronize()
                times[v].append((time.perf_counter() - t0) * 1e3)
    return times


def main():
    a = parse_args(__doc__, steps=60, rounds=5, warmup=20, batch=10, aihwkit_script="bench_fcn_aihwkit.py")
    data = [(torch.rand(a.batch, SIZES[0]), torch.randint(0, SIZES[-1], (a.batch,))) for _ in range(100)]
    base = make_net()
    variants = a.variants.split(",")
    runs = build_timed(variants, base, a)
    times = time_steps(runs, data, a)
    res = {
        "config": {
            "sizes": SIZES,
            "batch": a.batch,
            "device": a.device,
            "mode": a.mode,
            "lr_analog": a.lr_analog,
            "transfer_lr": a.transfer_lr,
            "steps": a.steps * a.rounds,
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
        },
        "ms": {},
        "ratio": {},
        "setup_s": {},
        "pulses_per_step": {},
    }
    dig = float(np.median(times["digital"])) if "digital" in times else None
    for v in variants:
        med = float(np.median(times[v]))
        res["ms"][v] = med
        res["setup_s"][v] = runs[v][2]
        c = runs[v][1].costs()
        res["pulses_per_step"][v] = c["pulses"] - c.get("setup_pulses", 0)
        res["pulses_per_step"][v] /= max(c["steps"], 1)
        if dig:
            res["ratio"][v] = med / dig
    if a.aihwkit_python:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aihwkit", "bench_fcn_aihwkit.py")
        out = subprocess.run([os.path.expanduser(a.aihwkit_python), script], capture_output=True, text=True)
        if out.returncode == 0:
            res["aihwkit"] = json.loads(out.stdout.strip().splitlines()[-1])
        else:
            res["aihwkit_error"] = out.stderr[-2000:]
    print(f"{'variant':16s} {'ms/step':>9s} {'x digital':>10s} {'pulses/step':>12s} {'setup s':>8s}")
    for v in variants:
        print(
            f"{v:16s} {res['ms'][v]:9.3f} {res['ratio'].get(v, float('nan')):10.2f} "
            f"{res['pulses_per_step'][v]:12.0f} {res['setup_s'][v]:8.2f}"
        )
    if "aihwkit" in res:
        ak = res["aihwkit"]
        print(
            f"aihwkit {ak['aihwkit_version']}: digital {ak['digital_ms']:.3f} ms, analog_sgd "
            f"{ak['analog_sgd_ms']:.3f} ms ({ak['ratio_analog_sgd']:.2f}x), ttv1 {ak['ttv1_ms']:.3f} ms "
            f"({ak['ratio_ttv1']:.2f}x)"
        )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
