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
from numba import njit

from devices import PeripheryConfig


@njit(cache=True)
def _prep_input(x, bound, bits, nm):
    """Noise management (scale by max|x|, 1 where 0), clip to +-bound, quantize: returns (xq, scale)."""
    batch, n = x.shape
    xq = np.empty((batch, n), np.float32)
    scale = np.ones((batch, 1), np.float32)
    quant = bits > 0
    step = np.float32(2.0 * bound / (2.0**bits - 2.0)) if quant else np.float32(1.0)
    b32 = np.float32(bound)
    for i in range(batch):
        s = np.float32(1.0)
        if nm:
            m = np.float32(0.0)
            for j in range(n):
                a = abs(x[i, j])
                if a > m:
                    m = a
            if m > 0:
                s = m
        scale[i, 0] = s
        for j in range(n):
            v = x[i, j] / s
            v = min(max(v, -b32), b32)
            if quant:
                v = np.float32(np.rint(v / step)) * step
            xq[i, j] = v
    return xq, scale


@njit(cache=True)
def _finish_output(y, noise, out_noise, bound, bits, scale, check):
    """Add out_noise * noise, then (if no row saturates or not check) clip, quantize and rescale y in
    place; returns True where it did, False (y holds the noisy values) when some row saturates."""
    batch, n = y.shape
    b32 = np.float32(bound)
    if out_noise > 0:
        for i in range(batch):
            for j in range(n):
                y[i, j] += np.float32(out_noise * noise[i, j])
    if check:
        for i in range(batch):
            for j in range(n):
                if abs(y[i, j]) >= b32:
                    return False
    quant = bits > 0
    step = np.float32(2.0 * bound / (2.0**bits - 2.0)) if quant else np.float32(1.0)
    for i in range(batch):
        s = scale[i, 0]
        for j in range(n):
            v = min(max(y[i, j], -b32), b32)
            if quant:
                v = np.float32(np.rint(v / step)) * step
            y[i, j] = v * s
    return True


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


_NO_NOISE = np.zeros((1, 1))


def read(wt: torch.Tensor, x: np.ndarray, cfg: PeripheryConfig, rng: np.random.Generator) -> np.ndarray:
    """y[b] = W x[b] through the periphery; wt is W^T (in, out) as a torch view, x (batch, in) float32."""
    if cfg.ideal:
        return _mm(x, wt)
    # fast path: one fused kernel each side of the product; falls back when an output saturates
    x = np.ascontiguousarray(x, np.float32)
    xq, scale = _prep_input(x, cfg.inp_bound, cfg.inp_bits or 0, cfg.noise_management)
    y = _mm(xq, wt)
    noise = rng.standard_normal(y.shape) if cfg.out_noise > 0 else _NO_NOISE
    if _finish_output(y, noise, cfg.out_noise, cfg.out_bound, cfg.out_bits or 0, scale,
                      cfg.bound_management and cfg.max_bm_reads > 1):
        return y
    return _read_general(wt, x, cfg, rng, y)


def _read_general(wt, x, cfg, rng, y_first):
    """The general path (bound management re-reads); y_first: the first read's noisy outputs."""
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
        if attempt == 0:
            y = y_first
        else:
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
