"""Command line, JSON output, MNIST reading and the training loop shared by the aihwkit benchmark scripts in
this folder.

The scripts run as plain scripts in aihwkit's own virtual environment (aihwkit 1.1.0 with torch 2.10.0, built
as docs/performance.md says), so this module imports only aihwkit, torch, numpy (torch's dependency there) and
the standard library; a script finds it because Python puts the script's folder first on the module path.
"""

import argparse
import gzip
import json

import aihwkit
import numpy as np
import torch
from aihwkit.simulator.configs import SingleRPUConfig, UnitCellRPUConfig
from aihwkit.simulator.configs.compounds import TransferCompound


def parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser described by the first line of `doc`, with --threads and --seed."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    p.add_argument("--seed", type=int, default=0)
    return p


def set_up(args: argparse.Namespace) -> None:
    """Apply --threads (when given) and seed torch's generator with --seed."""
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)


def emit(out: dict, args: argparse.Namespace) -> None:
    """Print `out` as one JSON line, with the thread count, seed and aihwkit and torch versions added."""
    out = {
        **out,
        "threads": torch.get_num_threads(),
        "seed": args.seed,
        "aihwkit_version": aihwkit.__version__,
        "torch_version": torch.__version__,
    }
    print(json.dumps(out))


def read_idx(path: str) -> np.ndarray:
    """One gzip IDX file (the MNIST format) as a uint8 array of its dimensions."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def test_accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int) -> float:
    """Test accuracy (%) of `model` on (x, y), evaluated in mini-batches of `batch`."""
    model.eval()
    with torch.no_grad():
        ok = sum((model(x[i : i + batch]).argmax(1) == y[i : i + batch]).sum().item() for i in range(0, len(y), batch))
    model.train()
    return 100.0 * ok / len(y)


def train_epoch(model: torch.nn.Module, opt, loss_fn, x: torch.Tensor, y: torch.Tensor, batch: int = 10) -> float:
    """One epoch in a random order from torch's generator, mini-batches of `batch`; the mean training loss."""
    total, order = 0.0, torch.randperm(len(y))
    for i in range(0, len(order), batch):
        b = order[i : i + batch]
        opt.zero_grad()
        loss = loss_fn(model(x[b]), y[b])
        loss.backward()
        opt.step()
        total += loss.item() * len(b)
    return total / len(order)


def rpu_config(device, algorithm: str, **transfer):
    """SingleRPUConfig(device) for "sgd" (Analog SGD); for "tiki-taka" a UnitCellRPUConfig of aihwkit's
    TransferCompound over two copies of device with gamma 0 (the model reads the slow array alone), one column
    read every transfer period of 1, and `transfer` its other fields (rates, units of the period)."""
    if algorithm == "sgd":
        return SingleRPUConfig(device=device)
    compound = TransferCompound(
        unit_cell_devices=[device, device], gamma=0.0, transfer_every=1, n_reads_per_transfer=1, **transfer
    )
    return UnitCellRPUConfig(device=compound)
