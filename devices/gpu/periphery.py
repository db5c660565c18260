"""The read periphery on a GPU: devices.periphery.analog_mvm on torch tensors, its element-wise stages as
CUDA kernels.

The stages and their threads: noise management's scales are torch reductions (amax: exact, the CPU's numbers),
abs_max_np_sum's sums `np_sum_kernel`, one thread per sample summing in the CPU's order, and average_abs_max's
running average the CPU's own loop on the host over the batch's max |x| (one copy of batch floats a read); the
DAC is `dac_kernel`, one thread per (sample, input); the product is torch's matmul; output noise, bound
management's saturation test and the ADC are `adc_kernel`, one thread per sample, calling the CPU's own
`devices.periphery.finish_row`: a sample's noise comes from its stream (seed, counter, sample), drawn in order
over its outputs (the ziggurat takes a varying number of draws, so draw j has no index of its own). Saturated
samples are read again, with their input halved per attempt, as the CPU reads them: the same stream counters
(one per read) and the same stream keys, so everything but the product's summation order equals the CPU's
result. Each product is within (n - 1) 2^-24 sum_k |W_ok xq_k| of the exact sum (n inputs, any summation
order), so the two differ by at most twice that: an output can land on the other side of an ADC level edge, or
of bound management's saturation test, only where the exact sum lies that close to it.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import cuda

from aimc.devices.converters import level_step, quantize
from aimc.devices.gpu.runtime import launch
from aimc.devices.noise_management import fresh_average, nm_scales, np_sum_scale
from aimc.devices.periphery import PeripheryConfig, finish_row
from aimc.devices.rng import Stream


@cuda.jit
def dac_kernel(x, rows, scale, factor, bound, bits, xq):
    """xq[k, j] = the DAC's conversion of input x[rows[k], j] (clip to +-bound, 2^bits - 1 levels; bits 0:
    clip only), one thread per (k, j). factor 1: the first read, x divided by its noise-management scale
    (1 where 0); factor < 1: a re-read, x times factor / scale (devices.periphery's re-read, in float32)."""
    t = cuda.grid(1)
    n = x.shape[1]
    if t >= rows.shape[0] * n:
        return
    k = t // n
    j = t - k * n
    r = rows[k]
    if factor < 1:
        v = x[r, j] * (factor / scale[r])
    else:
        s = scale[r] if scale[r] > 0 else np.float32(1.0)
        v = x[r, j] / s
    b32 = np.float32(bound)
    if bits > 0:  # np.float32: a float32 under the simulator too, where a call returns a Python float
        xq[k, j] = quantize(v, b32, np.float32(level_step(bound, bits)))
    else:
        xq[k, j] = min(max(v, -b32), b32)


@cuda.jit
def adc_kernel(y, rows, scale, factor, out_noise, bound, bits, check, seed, counter, done):
    """finish_row for row rows[k] of y, one thread per k: output noise from stream (seed, counter, rows[k]),
    the saturation test (check), the ADC and the scale back by scale[rows[k]] / factor; done[k]: the row
    is finished (False: saturated, left for a re-read)."""
    k = cuda.grid(1)
    if k >= rows.shape[0]:
        return
    r = rows[k]
    done[k] = finish_row(y[r], scale[r] / factor, out_noise, bound, bits, check, seed, counter, r)


@cuda.jit
def np_sum_kernel(x, amax, wmax, out_bound, inp_res, max_bm_res, scale):
    """scale[i] = abs_max_np_sum's scale of row i of x (devices.noise_management.np_sum_scale) whose max |x| (at
    most nm_thres) is amax[i], 0 where not positive; one thread per row."""
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    v = np_sum_scale(x[i], amax[i], wmax, out_bound, inp_res, max_bm_res)
    scale[i] = v if v > 0 else np.float32(0.0)


def input_scales(x: torch.Tensor, cfg: PeripheryConfig, nm_average: np.ndarray | None = None) -> torch.Tensor:
    """Noise management's scale of each input vector x (batch, in), float32 (batch,), as
    devices.noise_management.nm_scales: max |x| (abs_max, abs_max_np_sum) or max x (max), at most nm_thres where it
    is > 0, abs_max_np_sum's raised by np_sum_kernel, 0 where not positive; nm_thres (1 where 0) for
    constant; the running average nm_average (None: a fresh one), updated in place, for average_abs_max; 1
    without noise management."""
    nm, thres = cfg.nm_code, np.float32(cfg.nm_thres)
    if nm == 5:
        x_max = np.ascontiguousarray(x.abs().amax(dim=1).cpu().numpy().reshape(-1, 1))  # rows of one: max |x|
        average = fresh_average() if nm_average is None else nm_average
        return torch.from_numpy(nm_scales(x_max, cfg.nm_settings, average)).to(x.device)
    if nm in (1, 2, 4):
        m = x.amax(dim=1) if nm == 2 else x.abs().amax(dim=1)
        if thres > 0:
            m = torch.minimum(m, torch.tensor(thres, device=x.device))
        if nm == 4:
            scale = torch.empty_like(m)
            _, _, wmax, out_bound, inp_res, max_bm_res, _ = cfg.nm_settings
            launch(np_sum_kernel, len(m), x, m.contiguous(), wmax, out_bound, inp_res, max_bm_res, scale)
            return scale
        return torch.where(m > 0, m, torch.zeros_like(m))
    value = thres if nm == 3 and thres > 0 else np.float32(1.0)
    return torch.full((x.shape[0],), float(value), dtype=torch.float32, device=x.device)


def analog_mvm(
    weight: torch.Tensor,
    x: torch.Tensor,
    cfg: PeripheryConfig,
    stream: Stream,
    nm_average: np.ndarray | None = None,
) -> torch.Tensor:
    """y[b] = weight @ x[b] read through the periphery, as devices.periphery.analog_mvm: weight (out, in)
    (a transposed view too), x (batch, in) -> (batch, out) float32 on x's device. stream: the source of
    the output noise, one counter per read and re-read (an empty batch takes none). nm_average: the host's
    running average of average_abs_max (devices.periphery.analog_mvm)."""
    x = x.to(torch.float32).contiguous()
    weight = weight.to(torch.float32)
    if x.shape[0] == 0:
        return torch.zeros((0, weight.shape[0]), dtype=torch.float32, device=x.device)
    if cfg.ideal:
        return torch.matmul(x, weight.T)
    batch, n_in = x.shape
    inp_bits, out_bits = cfg.inp_bits or 0, cfg.out_bits or 0
    scale = input_scales(x, cfg, nm_average)
    rows = torch.arange(batch, device=x.device)
    xq = torch.empty_like(x)
    one = np.float32(1.0)
    launch(dac_kernel, batch * n_in, x, rows, scale, one, cfg.inp_bound, inp_bits, xq)
    y = torch.matmul(xq, weight.T).contiguous()
    check = cfg.bm_reads > 1
    done = torch.empty(batch, dtype=torch.bool, device=x.device)
    seed = stream.seed
    finish = (cfg.out_noise, cfg.out_bound, out_bits)
    launch(adc_kernel, batch, y, rows, scale, one, *finish, check, seed, stream.take(), done)
    if not check:
        return y
    todo = rows[~done]
    factor = one
    for attempt in range(1, cfg.bm_reads):
        if len(todo) == 0:
            break
        factor = factor * np.float32(0.5)
        xs = torch.empty((len(todo), n_in), dtype=torch.float32, device=x.device)
        launch(dac_kernel, len(todo) * n_in, x, todo, scale, factor, cfg.inp_bound, inp_bits, xs)
        y[todo] = torch.matmul(xs, weight.T)
        done = torch.empty(len(todo), dtype=torch.bool, device=x.device)
        last = attempt == cfg.bm_reads - 1
        launch(adc_kernel, len(todo), y, todo, scale, factor, *finish, not last, seed, stream.take(), done)
        todo = todo[~done]
    return y
