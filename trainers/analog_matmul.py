"""The autograd bridge of the analog layers: forward and backward reads through the tiles, x and d saved on
the layer for the analog optimizers (trainers.layers describes the layers).

On CPU tiles the reads take numpy arrays (torch tensors are viewed, not copied); on GPU tiles
(AnalogLayer.move_tiles) they take the tensors on the GPU.
"""

from __future__ import annotations

import torch


class AnalogMatmul(torch.autograd.Function):
    """y = read(W, x) (+ bias) forward; grad_x = read(W^T, d) and grad_bias = sum_b d backward; saves x
    and d on the layer. The digital bias is added here rather than by a torch op after the bridge: one
    autograd node per layer instead of two (about 20 us less per layer and step on R1's FCN, measured
    2026-12-03 at commit 469ee17)."""

    @staticmethod
    def forward(
        ctx, x: torch.Tensor, anchor: torch.Tensor, bias: torch.Tensor | None, layer, save: bool
    ) -> torch.Tensor:
        gpu = layer.gpu_tiles
        xn = x.detach().contiguous()
        y, xe = layer.read_forward(xn if gpu else xn.numpy())
        if bias is not None:
            y += bias.detach() if gpu else bias.detach().numpy()
        ctx.layer = layer
        ctx.slot = layer.save_x(xe) if save else -1
        return y if gpu else torch.from_numpy(y)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        layer = ctx.layer
        gpu = layer.gpu_tiles
        d = grad.detach().contiguous() if gpu else grad.detach().contiguous().numpy()
        if ctx.slot >= 0:
            layer.save_d(ctx.slot, d)
        gx = gb = None
        if ctx.needs_input_grad[0]:
            z = layer.read_backward(d)
            gx = z if gpu else torch.from_numpy(z)
        if ctx.needs_input_grad[2]:
            gb = grad.sum(0)
        return gx, None, gb, None, None
