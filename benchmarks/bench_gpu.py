#!/usr/bin/env python
"""Training steps on a GPU: every layer analog against the digital step on the same GPU, for R1's FCN, R1's
CNN and ResNet-18 (CIFAR form) at batch 128 on synthetic data; and the pulsed update of a 512 x 512 array at
batch 64 on the GPU against the same update on the CPU path.

Variants (benchmarks/bench_fcn.py `algorithm`): digital; Analog SGD with the pulsed and with the expected
update (`analog_sgd`, `analog_sgd_expected`); residual learning; c-TTv2 with one column read per mini-batch
(`c_ttv2_mb`; `c_ttv2` reads after every sample, aihwkit's setting, and is bound by its kernel launches).
Device r1_power_1 unless --device, R1's periphery, lr 0.05 (analog) / 0.1 (digital); the residual run's
zero shift (--zero-shift-cycles) is setup, not timed. Inputs uniform in [0, 1], random labels out of 10. A
step = zero_grad + forward + loss + backward + optimizer step, timed with torch.cuda.synchronize() around
it; variants in interleaved rounds, median; ratios against the digital step of the same model in the same
run. The update comes first (it compiles the pulsed-update kernels), then the models in --models order; the
JSON is rewritten after each, so a run cut short keeps what it measured. Needs a CUDA GPU and
pip install 'aimc[gpu]'; under Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) it runs the same code on the
CPU, a check of the script with small sizes, not a timing.

    python3 benchmarks/bench_gpu.py [--steps 5] [--rounds 2] [--models resnet18,cnn,fcn] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numba  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_fcn import algorithm, analog_copy, time_steps  # noqa: E402
from torch import nn  # noqa: E402

from aimc import trainers as T  # noqa: E402
from aimc.config import CifarResNetConfig, FCNConfig, R1CNNConfig  # noqa: E402
from aimc.devices import ConductanceArray, UpdateConfig, load_device  # noqa: E402
from aimc.devices.gpu.array import GpuArray  # noqa: E402
from aimc.devices.gpu.runtime import simulated  # noqa: E402
from aimc.models import build_model  # noqa: E402

MODELS = {
    "fcn": (FCNConfig(), (1, 28, 28)),
    "cnn": (R1CNNConfig(), (1, 28, 28)),
    "resnet18": (CifarResNetConfig(name="resnet18"), (3, 32, 32)),
}
VARIANTS = "digital,analog_sgd,analog_sgd_expected,residual,c_ttv2_mb"
DEVICE = torch.device("cpu" if simulated() else "cuda")
"""Where the tensors go: the GPU, or the CPU under the simulator (its kernels take CPU tensors)."""


def synchronize() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def on_device(model: nn.Module) -> nn.Module:
    """The model moved to DEVICE, its tiles GPU tiles (under the simulator: GPU tiles holding CPU tensors)."""
    if DEVICE.type == "cuda":
        return model.cuda()
    for layer in T.analog_layers(model):
        layer.move_tiles(DEVICE, gpu_kernels=True)
    return model


def variant(name: str, base: nn.Module, a: argparse.Namespace) -> tuple[nn.Module, torch.optim.Optimizer]:
    """(model, optimizer) of variant `name` (an algorithm of bench_fcn.algorithm, `_expected` for that update
    mode) on DEVICE; the optimizer is built after the move, so its set-up (the zero shift) runs there."""
    algo = name.removesuffix("_expected")
    mode = "expected" if name.endswith("_expected") else "pulsed"
    settings = argparse.Namespace(**vars(a), mode=mode, exact_reads=False)
    if algo == "digital":
        model = copy.deepcopy(base).to(DEVICE)
    else:
        model = on_device(analog_copy(algo, base, settings))
    return model, T.build_optimizer(model, algorithm(algo, settings))


def update_timing(a: argparse.Namespace) -> dict[str, float]:
    """Milliseconds of one pulsed update W -= lr d^T x of an n x n array (n = --update-size) at batch 64: the
    CPU path (ConductanceArray.update) and the GPU path (devices.gpu.array.GpuArray.update), median of
    steps x rounds."""
    n, dev, cfg = a.update_size, load_device(a.device), UpdateConfig()
    cpu = ConductanceArray(n, n, dev, seed=1)
    gpu = GpuArray(ConductanceArray(n, n, dev, seed=1), DEVICE)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (64, n)).astype(np.float32)
    d = rng.uniform(-1, 1, (64, n)).astype(np.float32) * 0.01
    xg, dg = torch.from_numpy(x).to(DEVICE), torch.from_numpy(d).to(DEVICE)
    out = {}
    for label, run in (("cpu", lambda: cpu.update(x, d, 0.05, cfg)), ("gpu", lambda: gpu.update(xg, dg, 0.05, cfg))):
        for _ in range(a.warmup):
            run()
        ms = []
        for _ in range(a.steps * a.rounds):
            synchronize()
            t0 = time.perf_counter()
            run()
            synchronize()
            ms.append((time.perf_counter() - t0) * 1e3)
        out[label] = float(np.median(ms))
    out["speedup"] = out["cpu"] / out["gpu"]
    return out


def write(res: dict, path: str | None) -> None:
    """res as JSON at path, atomically (a temporary file renamed over it)."""
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump(res, f, indent=1)
        os.replace(path + ".tmp", path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5, help="timed steps per round and variant")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--update-size", type=int, default=512, help="rows and columns of the timed update's array")
    p.add_argument("--device", default="r1_power_1", help="device preset")
    p.add_argument("--models", default="resnet18,cnn,fcn")
    p.add_argument("--variants", default=VARIANTS)
    p.add_argument("--lr-analog", type=float, default=0.05)
    p.add_argument("--transfer-lr", type=float, default=0.01)
    p.add_argument("--zero-shift-cycles", type=int, default=20, help="setup only; not timed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    if DEVICE.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_gpu: torch sees no CUDA GPU")
    torch.manual_seed(a.seed)
    gpu = torch.cuda.get_device_name() if DEVICE.type == "cuda" else "Numba's CUDA simulator (not a timing)"
    cpu = {"cpu_count": os.cpu_count(), "numba_threads": numba.get_num_threads()}  # the CPU path of the update
    res = {"config": {**vars(a), "gpu": gpu, "torch": torch.__version__, **cpu}, "models": {}}
    res["update_ms"] = update_timing(a)
    print(f"update {a.update_size}x{a.update_size} batch 64", json.dumps(res["update_ms"]), flush=True)
    write(res, a.json)
    for m in a.models.split(","):
        config, shape = MODELS[m]
        base = build_model(config, 10, shape)
        data = [(torch.rand(a.batch, *shape).to(DEVICE), torch.randint(0, 10, (a.batch,)).to(DEVICE)) for _ in range(4)]
        runs = {v: variant(v, base, a) for v in a.variants.split(",")}
        ms = {v: float(np.median(t)) for v, t in time_steps(runs, data, a, synchronize).items()}
        res["models"][m] = {"ms": ms, "x_digital": {v: ms[v] / ms["digital"] for v in ms} if "digital" in ms else {}}
        print(m, json.dumps(res["models"][m]), flush=True)
        write(res, a.json)


if __name__ == "__main__":
    main()
