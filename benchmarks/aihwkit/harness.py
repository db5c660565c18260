"""Command line and JSON output shared by the aihwkit benchmark scripts in this folder.

The scripts run as plain scripts in aihwkit's own virtual environment (aihwkit 1.1.0 with torch 2.10.0, built
as docs/performance.md says), so this module imports only aihwkit, torch and the standard library; a script
finds it because Python puts the script's folder first on the module path.
"""
import argparse
import json

import aihwkit
import torch


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
    out = {**out, "threads": torch.get_num_threads(), "seed": args.seed,
           "aihwkit_version": aihwkit.__version__, "torch_version": torch.__version__}
    print(json.dumps(out))
