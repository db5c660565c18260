"""The memory a run needs, estimated before it starts, against the memory the process may use.

A run's memory is dominated by its layers' weights: per weight, torch's parameter and gradient (float32),
and for an analog layer every array the algorithm stacks on a tile with its per-element device parameters
and the optimizer's per-element state. That analog share is measured on an 8 x 8 layer of the same tile
config and algorithm (it scales with the elements), so it follows every device family and algorithm without
a table to keep up. A run whose largest layers cannot fit is refused, naming the largest, before the run
folder is written; without the check it would end in an allocator traceback, or within a memory limit in a
kill that leaves its manifest `running`.
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
from pathlib import Path

import numpy as np
import torch
from torch import nn

from aimc import trainers
from aimc.common.errors import ConfigError
from aimc.config import ExperimentConfig
from aimc.models import build_model

DIGITAL_BYTES = 16
"""Bytes per weight of a digital layer: float32 parameter, gradient and up to two optimizer buffers."""

HEADROOM = 1.5
"""The estimate's factor for what it does not count: activations, temporary copies, the data set."""


def available_bytes() -> tuple[int, str]:
    """(bytes this process may still allocate, where the limit comes from): the smaller of the memory the
    system has available (/proc/meminfo's MemAvailable, else sysconf's free pages) and what is left below
    the address-space limit RLIMIT_AS (`ulimit -v`)."""
    free, where = _system_available(), "available memory"
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        left = soft - _address_space()
        if left < free:
            free, where = max(left, 0), f"the address-space limit (RLIMIT_AS, ulimit -v) of {_size(soft)}"
    return free, where


def _system_available() -> int:
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _address_space() -> int:
    """Bytes of address space this process maps now (/proc/self/statm's first field; 0 where absent)."""
    statm = Path("/proc/self/statm")
    return int(statm.read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE") if statm.is_file() else 0


def analog_bytes_per_weight(cfg: ExperimentConfig) -> float:
    """Bytes per weight of an analog layer of `cfg`'s tile config and algorithm, measured on an 8 x 8 layer:
    its tiles' arrays and their state, and the optimizer's state, plus torch's parameter and gradient."""
    quiet = contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO())  # a zero shift's cost
    with torch.random.fork_rng(devices=[]), quiet[0], quiet[1]:  # torch's global generator left as it was
        model = trainers.convert(nn.Sequential(nn.Linear(8, 8, bias=False)), cfg.tile, seed=cfg.seed)
        opt = trainers.build_optimizer(model, cfg.trainer)
    state = [model.state_dict(), opt.state_dict()]
    return _nbytes(state) / 64 + 8


def _nbytes(v) -> int:
    if isinstance(v, np.ndarray):
        return v.nbytes
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if isinstance(v, dict):
        return sum(_nbytes(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return sum(_nbytes(x) for x in v)
    return 0


def layers_of(cfg: ExperimentConfig) -> list[tuple[str, str, int]]:
    """(name, shape in words, weights) of every Linear and Conv layer of `cfg`'s model, built on torch's
    meta device (shapes without memory)."""
    with torch.device("meta"):
        model = build_model(cfg.model)
    out = []
    for name, m in model.named_modules():
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d)):
            shape = " x ".join(str(s) for s in m.weight.shape)
            out.append((name, f"{type(m).__name__} {shape}", m.weight.numel()))
    return out


def check_memory(cfg: ExperimentConfig) -> None:
    """Refuse (ConfigError naming the largest layer) a run whose estimated memory exceeds what this process
    may allocate (`available_bytes`). Every run of a comparison is checked (they run one after the other)."""
    layers = layers_of(cfg)
    free, where = available_bytes()
    for _, sub in cfg.runs():
        per = DIGITAL_BYTES if sub.trainer.algorithm == "sgd" else analog_bytes_per_weight(sub)
        need = HEADROOM * per * sum(n for _, _, n in layers)
        if need > free:
            name, shape, n = max(layers, key=lambda x: x[2])
            raise ConfigError(
                f"the model needs about {_size(need)} of memory, more than {where} ({_size(free)}): its largest "
                f"layer {name or 'model'} ({shape}, {n:.3g} weights) takes {_size(HEADROOM * per * n)} with "
                f"{sub.trainer.algorithm} ({per:.0f} bytes per weight); make the model smaller"
            )


def _size(n: float) -> str:
    """Bytes in words, in powers of 1000: 512 B, 1.5 GB."""
    for k, unit in ((12, "TB"), (9, "GB"), (6, "MB"), (3, "kB")):
        if n >= 10**k:
            return f"{n / 10**k:.3g} {unit}"
    return f"{n:.0f} B"
