#!/usr/bin/env python
"""Training steps on a GPU: every layer analog (Analog SGD, pulsed and expected update) against the digital
step on the same GPU, for R1's FCN, R1's CNN and ResNet-18 (CIFAR form) at batch 128 on synthetic data; and
the pulsed update of a 512 x 512 tile at batch 64 on the GPU against the same update on the CPU path.

Device r1_power_1 unless --device, R1's periphery, lr 0.05 (analog) / 0.1 (digital); inputs uniform in
[0, 1], random labels out of 10. A step = zero_grad + forward + loss + backward + optimizer step, timed
with torch.cuda.synchronize() around it; variants in interleaved rounds, median; ratios against the
digital step of the same model in the same run. Needs a CUDA GPU and pip install 'aimc[gpu]'.

    python3 benchmarks/bench_gpu.py [--steps 10] [--rounds 3] [--models fcn,cnn,resnet18] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import numpy as np
import torch
from torch import nn

from aimc import trainers as T
from aimc.config import CifarResNetConfig, FCNConfig, R1CNNConfig
from aimc.devices import ConductanceArray, UpdateConfig, load_device
from aimc.models import build_model

MODELS = {
    "fcn": (lambda: build_model(FCNConfig(), 10, (1, 28, 28)), (1, 28, 28)),
    "cnn": (lambda: build_model(R1CNNConfig(), 10, (1, 28, 28)), (1, 28, 28)),
    "resnet18": (lambda: build_model(CifarResNetConfig(name="resnet18"), 10, (3, 32, 32)), (3, 32, 32)),
}


def variant(name: str, base: nn.Module, a: argparse.Namespace) -> tuple[nn.Module, torch.optim.Optimizer]:
    model = copy.deepcopy(base)
    if name == "digital":
        model = model.cuda()
        return model, T.build_optimizer(model, T.DigitalSGDConfig(lr=0.1))
    mode = name.removeprefix("analog_sgd_")
    T.convert(model, T.TileConfig(device=a.device, update=UpdateConfig(mode=mode)), seed=a.seed)
    model = model.cuda()
    return model, T.build_optimizer(model, T.AnalogSGDConfig(lr=0.05))


def time_steps(runs: dict, data: list, a: argparse.Namespace) -> dict[str, list[float]]:
    """Milliseconds per step of each variant, warm-up steps untimed, rounds interleaved."""
    loss_fn = nn.CrossEntropyLoss()
    times = {v: [] for v in runs}

    def step(v: str, k: int) -> None:
        model, opt = runs[v]
        x, y = data[k % len(data)]
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for v in runs:
        for k in range(a.warmup):
            step(v, k)
    for _ in range(a.rounds):
        for v in runs:
            for k in range(a.steps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                step(v, k)
                torch.cuda.synchronize()
                times[v].append((time.perf_counter() - t0) * 1e3)
    return times


def update_512(a: argparse.Namespace) -> dict[str, float]:
    """Milliseconds of one pulsed update W -= lr d^T x of a 512 x 512 array at batch 64: the CPU path
    (ConductanceArray.update) and the GPU path (devices.gpu.array.GpuArray.update), median of `steps`."""
    from aimc.devices.gpu.array import GpuArray

    dev, cfg = load_device(a.device), UpdateConfig()
    cpu = ConductanceArray(512, 512, dev, seed=1)
    gpu = GpuArray(ConductanceArray(512, 512, dev, seed=1), torch.device("cuda"))
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (64, 512)).astype(np.float32)
    d = rng.uniform(-1, 1, (64, 512)).astype(np.float32) * 0.01
    xg, dg = torch.from_numpy(x).cuda(), torch.from_numpy(d).cuda()
    out = {}
    for label, run in (("cpu", lambda: cpu.update(x, d, 0.05, cfg)), ("gpu", lambda: gpu.update(xg, dg, 0.05, cfg))):
        for _ in range(a.warmup):
            run()
        ms = []
        for _ in range(a.steps * a.rounds):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run()
            torch.cuda.synchronize()
            ms.append((time.perf_counter() - t0) * 1e3)
        out[label] = float(np.median(ms))
    out["speedup"] = out["cpu"] / out["gpu"]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--device", default="r1_power_1", help="device preset")
    p.add_argument("--models", default="fcn,cnn,resnet18")
    p.add_argument("--variants", default="digital,analog_sgd_pulsed,analog_sgd_expected")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu: torch sees no CUDA GPU")
    torch.manual_seed(a.seed)
    res = {"config": {**vars(a), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}, "models": {}}
    for m in a.models.split(","):
        make, shape = MODELS[m]
        base = make()
        data = [(torch.rand(a.batch, *shape).cuda(), torch.randint(0, 10, (a.batch,)).cuda()) for _ in range(4)]
        runs = {v: variant(v, base, a) for v in a.variants.split(",")}
        times = time_steps(runs, data, a)
        ms = {v: float(np.median(t)) for v, t in times.items()}
        res["models"][m] = {"ms": ms, "x_digital": {v: ms[v] / ms["digital"] for v in ms} if "digital" in ms else {}}
        print(m, json.dumps(res["models"][m]), flush=True)
    res["update_512x512_b64_ms"] = update_512(a)
    print("update 512x512 batch 64", json.dumps(res["update_512x512_b64_ms"]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
