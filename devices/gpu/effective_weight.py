"""The forward weight of a tile on a GPU: devices.effective_weight.effective_weight_kernel in torch."""

from __future__ import annotations

import torch


def effective_weight(out: torch.Tensor, ws: tuple, refs: tuple, gains) -> torch.Tensor:
    """out = sum_n gains[n] (ws[n] - refs[n]) in float32, summed in the order of n with arrays of gain 0
    skipped, one rounding per subtraction, product and sum (the CPU kernel's numbers: torch's element-wise
    operations neither fuse nor reorder them); ws, refs: (out, in) float32 tensors, gains float32. Returns
    out."""
    out.zero_()
    for w, r, g in zip(ws, refs, gains):
        if g != 0:
            out.add_(torch.sub(w, r).mul_(float(g)))
    return out
