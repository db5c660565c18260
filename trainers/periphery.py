"""The read periphery of `devices.periphery.analog_mvm`, with the matrix product done by torch.

Same model, same order of random draws from the tile's generator (so a read gives the same values as
`analog_mvm` up to float summation order); the only difference is that `xq @ W^T` runs through
`torch.mm` on zero-copy views (torch's threads; numpy's BLAS is limited to one thread by
`devices.threads`). Used by the analog layers for forward and backward reads; `analog_mvm` stays the
reference (tests/test_trainers_layers.py pins the two together).
"""

from __future__ import annotations

import numpy as np
import torch

from devices import PeripheryConfig


def _quantize_(v: np.ndarray, bound: float, bits: int | None) -> np.ndarray:
    """In place: clip to +-bound and round to 2^bits - 1 levels (as devices.periphery._quantize)."""
    np.clip(v, -bound, bound, out=v)
    if bits is not None:
        step = np.float32(2.0 * bound / (2.0**bits - 2.0))
        # same arithmetic as np.round(v / step) * step
        np.divide(v, step, out=v)
        np.round(v, out=v)
        np.multiply(v, step, out=v)
    return v


def _mm(a: np.ndarray, wt: torch.Tensor) -> np.ndarray:
    """a (batch, in) float32 numpy times wt (in, out) torch -> numpy (batch, out)."""
    return torch.mm(torch.from_numpy(np.ascontiguousarray(a)), wt).numpy()


def read(wt: torch.Tensor, x: np.ndarray, cfg: PeripheryConfig, rng: np.random.Generator) -> np.ndarray:
    """y[b] = W x[b] through the periphery; wt is W^T (in, out) as a torch view, x (batch, in) float32."""
    if cfg.ideal:
        return _mm(x, wt)
    batch = x.shape[0]
    if cfg.noise_management:
        scale = np.abs(x).max(axis=1, keepdims=True)
    else:
        scale = np.ones((batch, 1), np.float32)
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    xn = x / scale
    out = np.empty((batch, wt.shape[1]), np.float32)
    todo = None  # None: all samples (the common case, no fancy indexing)
    factor = 1.0
    for attempt in range(cfg.max_bm_reads):
        xq = xn if todo is None else xn[todo]
        xq = xq * np.float32(factor) if factor != 1.0 else xq.copy()
        _quantize_(xq, cfg.inp_bound, cfg.inp_bits)
        y = _mm(xq, wt)
        if cfg.out_noise > 0:
            y += (cfg.out_noise * rng.standard_normal(y.shape)).astype(np.float32)
        last = not cfg.bound_management or attempt == cfg.max_bm_reads - 1
        if last:
            done = None
        else:
            saturated = np.abs(y).max(axis=1) >= cfg.out_bound
            done = None if not saturated.any() else ~saturated
        if done is None:
            yq = _quantize_(y, cfg.out_bound, cfg.out_bits)
            if factor != 1.0:
                yq /= np.float32(factor)
            if todo is None:
                out = yq
            else:
                out[todo] = yq
            break
        yq = _quantize_(y[done], cfg.out_bound, cfg.out_bits)
        if factor != 1.0:
            yq /= np.float32(factor)
        idx = np.arange(batch) if todo is None else todo
        out[idx[done]] = yq
        todo = idx[~done]
        if len(todo) == 0:
            break
        factor *= 0.5
    out *= scale
    return out
