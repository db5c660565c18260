"""Tile reads for the analog layers: `devices.periphery.analog_mvm` with the matrix product in torch.

numpy's BLAS is limited to one thread by `devices.threads`; the product `xq @ W^T` goes through
`torch.mm` on zero-copy views instead (torch's threads). Model and random draws are analog_mvm's.
"""

from __future__ import annotations

import numpy as np
import torch

from devices import PeripheryConfig, analog_mvm
from devices.rng import Stream


def read(wt: torch.Tensor, x: np.ndarray, cfg: PeripheryConfig, stream: Stream) -> np.ndarray:
    """y[b] = W x[b] through the periphery; wt is W^T (in, out) as a torch tensor, x (batch, in) float32."""
    return analog_mvm(wt, x, cfg, stream, product=lambda a: torch.mm(torch.from_numpy(a), wt).numpy())
