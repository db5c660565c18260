"""Fingerprints of the simulator's results: sha256 digests of the weights, reads and optimizer states after a
fixed set of updates, reads and training steps (every device preset, pulsed and expected updates, programming,
zero shift, every algorithm, PowStep and the effects, the one-sided cell, c-TTv2 and AGAD on a convolution).

A refactoring that keeps results bit-identical keeps every digest:

    python scripts/fingerprints.py --write tests/data/fingerprints.json   # record (before the change)
    python scripts/fingerprints.py --check tests/data/fingerprints.json   # compare (after it)

tests/test_fingerprints.py runs the check. Regenerate the file only with a change that is meant to change
results, and say so in its commit.

The digests are the same on any x86-64 processor with AVX2: MKL (torch's BLAS) and torch's vectorised kernels
run their AVX2 code paths here (PINNED_ENV, set before torch loads), where by default they take AVX-512 kernels
on some processors and not on others, and those round apart. Digital SGD (torch's own arithmetic, whose bits
depend on the processor even so) has no fingerprint.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator

PINNED_ENV = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
"""The libraries' code paths the digests are computed with; they take effect only where torch has not been
loaded yet in the process (tests/test_fingerprints.py runs this script in a subprocess)."""
os.environ.update(PINNED_ENV)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from aimc import trainers  # noqa: E402
from aimc.devices import PRESETS, AnalogTile, ConductanceArray, PeripheryConfig, UpdateConfig, load_device  # noqa: E402


def digest(*arrays) -> str:
    """sha256 over the raw bytes of the arrays (float32 / float64 / int as they are)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:24]


def _batches(rng: np.random.Generator, n: int, out: int, inp: int, batch: int = 4) -> list:
    return [
        (rng.standard_normal((batch, inp)).astype(np.float32), rng.standard_normal((batch, out)).astype(np.float32))
        for _ in range(n)
    ]


def array_cases() -> Iterator[tuple[str, Callable[[], str]]]:
    """Every preset: pulsed and expected updates, single pulses, zero shift, reads of a tile."""
    for name in PRESETS:
        dev = load_device(name)

        def pulsed(dev=dev, name=name) -> str:
            tile = AnalogTile(6, 5, dev, gains=(1.0, 0.5), seed=7)
            rng = np.random.default_rng(1)
            for x, d in _batches(rng, 6, 6, 5):
                tile.update(x, d, 0.05, 0)
                tile.update(x, -d, 0.02, 1)
            tile.post_update_step()
            y = tile.forward(rng.standard_normal((3, 5)).astype(np.float32))
            z = tile.backward(rng.standard_normal((3, 6)).astype(np.float32))
            c = tile.read_columns(1, np.array([0, 3]))
            return digest(*[a.w for a in tile.arrays], y, z, c, np.array([tile.pulses, tile.reads]))

        yield f"tile/{name}/pulsed", pulsed
        if dev.kind == "OneSided":
            continue

        def expected(dev=dev) -> str:
            a = ConductanceArray(6, 5, dev, seed=3)
            rng = np.random.default_rng(2)
            for x, d in _batches(rng, 5, 6, 5):
                a.update(x, d, 0.05, UpdateConfig(mode="expected"))
            return digest(a.w, np.array([a.pulses]))

        def programmed(dev=dev) -> str:
            a = ConductanceArray(6, 5, dev, seed=4)
            rng = np.random.default_rng(3)
            a.pulse(rng.integers(-5, 6, (6, 5)))
            a.zero_shift(20)
            return digest(a.w, a.reference, np.array([a.pulses]))

        yield f"array/{name}/expected", expected
        yield f"array/{name}/programmed", programmed


def _model(conv: bool) -> nn.Module:
    torch.manual_seed(0)
    if conv:
        return nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 4))
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))


ALGORITHMS: dict[str, dict] = {
    "analog_sgd": {},
    "tiki_taka": {"transfer_every": 2},
    "tiki_taka_reset": {"algorithm": "tiki_taka", "with_reset_prob": 0.3},
    "ttv2": {"threshold": 0.5},
    "residual": {"zero_shift_cycles": 10},
    "residual_v2": {"zero_shift_cycles": 10},
    "multi_tile": {"n_tiles": 3, "zero_shift_cycles": 10},
    "mixed_precision": {},
    "c_ttv2": {},
    "c_ttv2_regular": {"algorithm": "c_ttv2", "in_chop_random": False, "out_chop_prob": 0.2},
    "c_ttv2_step": {"algorithm": "c_ttv2", "step": 0.5, "transfer_bl": 3, "forget_buffer": False},
    "agad": {},
    "agad_feedback": {
        "algorithm": "agad",
        "experimental_fast_lr_feedback": True,
        "experimental_correct_accumulation": True,
    },
    "rider": {},
    "rider_threshold": {"algorithm": "rider", "threshold": 0.5},
    "e_rider": {"chop_prob": 0.3},
}


def train_cases() -> Iterator[tuple[str, Callable[[], str]]]:
    """Every algorithm a few steps on a small FCN and CNN, on noisy periphery, pulsed and expected updates."""
    for device in ("aihwkit_reram_es", "r1_power_1", "aihwkit_pcm"):
        for mode in ("pulsed", "expected"):
            for algo, extra in ALGORITHMS.items():
                if device == "aihwkit_pcm" and (mode == "expected" or algo != "analog_sgd"):
                    continue
                if algo == "tiki_taka_reset" and device != "aihwkit_reram_es":
                    continue
                for conv in (False, True):

                    def run(device=device, mode=mode, algo=algo, extra=extra, conv=conv) -> str:
                        noisy = PeripheryConfig(out_noise=0.02, inp_bits=7, out_bits=9)
                        tile = trainers.TileConfig(
                            device=device, forward=noisy, backward=noisy, update=UpdateConfig(mode=mode)
                        )
                        model = trainers.convert(_model(conv), tile, seed=5)
                        cfg = {"algorithm": algo, "lr": 0.05, **extra}
                        opt = trainers.build_optimizer(model, cfg)
                        g = torch.Generator().manual_seed(1)
                        shape = (6, 1, 6, 6) if conv else (6, 6)
                        for _ in range(4):
                            x = torch.randn(shape, generator=g)
                            target = torch.randn((6, 4), generator=g)
                            opt.zero_grad()
                            loss = ((model(x) - target) ** 2).mean()
                            loss.backward()
                            opt.step()
                        with torch.no_grad():
                            y = model(torch.randn(shape, generator=g))
                        state = model.state_dict()
                        parts = [
                            v.detach().numpy() if torch.is_tensor(v) else np.asarray(v)
                            for k, v in sorted(state.items())
                            if torch.is_tensor(v) or isinstance(v, np.ndarray)
                        ]
                        costs = opt.costs() if hasattr(opt, "costs") else {}
                        return digest(y.numpy(), *parts, np.array(sorted(costs.items()), dtype=object).astype(str))

                    yield f"train/{device}/{mode}/{algo}/{'cnn' if conv else 'fcn'}", run


def compute() -> dict[str, str]:
    out = {}
    for name, fn in [*array_cases(), *train_cases()]:
        try:
            quiet = open(os.devnull, "w")  # the zero shift prints its cost
            with quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                out[name] = fn()
        except Exception as err:  # a case an algorithm refuses is part of the fingerprint
            out[name] = f"error: {type(err).__name__}"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="JSON")
    g.add_argument("--check", metavar="JSON")
    args = p.parse_args(argv)
    got = compute()
    if args.write:
        with open(args.write, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{len(got)} fingerprints written to {args.write}")
        return 0
    with open(args.check) as f:
        want = json.load(f)
    bad = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    for k in bad:
        print(f"changed: {k}: {want.get(k)} -> {got.get(k)}")
    print(f"{len(want) - len(bad)} of {len(want)} fingerprints unchanged")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
