"""Drift compensation of inference tiles (aihwkit 1.1.0, inference/compensation/base.py and drift.py).

Right after programming, a tile reads a probe, the in_size one-hot input vectors (the identity), through its
forward path, noise included, and keeps a baseline readout r_0 of the outputs; after drifting to an inference
time it reads the same probe again, r(t), and scales every later forward output by alpha = r_0 / r(t):
- global: r = max(mean |y|, 1e-4) over all outputs of all probe vectors, one scalar alpha;
- per column: r_j = max(mean_k |y_kj|, 1e-4) over the probe vectors k, one alpha_j per output j.
A drift that scales every weight (of an output) by one factor f is undone exactly, up to the read noise of the
two probe reads: r(t) = f r_0.

A read_fn maps a probe batch (in_size, in_size) to the tile's forward output (in_size, out_size); the tile
owns it (its periphery, noise and device), these classes own the probe and the statistic.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

READOUT_FLOOR = 1e-4
"""Smallest readout r (aihwkit's clamp), so that a tile reading all zeros gets a finite scale."""

ReadFn = Callable[[torch.Tensor], torch.Tensor]
"""Maps a probe input batch (rows = input vectors) to the tile's forward output (rows = output vectors)."""


class DriftCompensation:
    """Probe, readout statistic and compensation scale of a drift compensation (module docstring)."""

    exact_reference: bool = False
    """Whether the baseline is read without noise, from the exact programmed-to weights: the tile then passes
    an ideal read_fn (x @ W_target^T) to init_baseline."""

    def get_readout_tensor(self, in_size: int, device: torch.device | str | None = None) -> torch.Tensor:
        """The probe: the in_size one-hot input vectors, a float32 identity (in_size, in_size)."""
        if not (isinstance(in_size, int) and in_size >= 1):
            raise ValueError(f"in_size: must be a positive integer, got {in_size!r}")
        return torch.eye(in_size, dtype=torch.float32, device=device)

    def readout(self, out_tensor: torch.Tensor) -> torch.Tensor:
        """The statistic r of the forward output of the probe."""
        raise NotImplementedError

    @torch.no_grad()
    def get_readout(self, read_fn: ReadFn, in_size: int, device: torch.device | str | None = None) -> torch.Tensor:
        """r of read_fn's output for the probe."""
        return self.readout(read_fn(self.get_readout_tensor(in_size, device)))

    @torch.no_grad()
    def init_baseline(self, read_fn: ReadFn, in_size: int, device: torch.device | str | None = None) -> torch.Tensor:
        """The baseline r_0, read right after programming."""
        return self.get_readout(read_fn, in_size, device)

    @torch.no_grad()
    def apply(self, forward_output: torch.Tensor, baseline: torch.Tensor) -> torch.Tensor:
        """alpha = r_0 / r(t), r(t) the statistic of forward_output, the drifted tile's output for the probe."""
        return baseline / self.readout(forward_output)

    @torch.no_grad()
    def compensation_scale(
        self, read_fn: ReadFn, in_size: int, baseline: torch.Tensor, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """alpha = r_0 / r(t), reading the probe through read_fn now."""
        return self.apply(read_fn(self.get_readout_tensor(in_size, device)), baseline)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class GlobalDriftCompensation(DriftCompensation):
    """One scale for the whole tile: r = max(mean |y|, 1e-4) over all probe outputs (a 0-d tensor)."""

    def readout(self, out_tensor: torch.Tensor) -> torch.Tensor:
        return out_tensor.abs().mean().clamp(min=READOUT_FLOOR)


class GlobalDriftCompensationWithExactReference(GlobalDriftCompensation):
    """GlobalDriftCompensation whose baseline is read from the exact target weights without noise."""

    exact_reference = True


class PerColumnDriftCompensation(DriftCompensation):
    """One scale per output: r_j = max(mean_k |y_kj|, 1e-4) over the probe vectors k (shape (out_size,))."""

    def readout(self, out_tensor: torch.Tensor) -> torch.Tensor:
        return out_tensor.abs().mean(dim=0).clamp(min=READOUT_FLOOR)
