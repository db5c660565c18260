"""devices.gpu.periphery, column_read and effective_weight against their CPU twins.

Where the product's sums are exact in float32 (dyadic weights and inputs of a few bits, a DAC whose step is
a power of 2), the GPU read equals the CPU read bit for bit, whatever the summation order: those tests cover
every noise-management type, the DAC and ADC, output noise and bound management's re-reads. With general
float32 data the two products differ by rounding only: recursive summation of n terms in any order is within
(n - 1) u sum_k |W_ok xq_k| of the exact sum (u = 2^-24, Higham, Accuracy and Stability of Numerical
Algorithms, 2002, eq. 4.4), so the two differ by at most 2 (n - 1) u sum_k |W_ok xq_k|; the outputs are
then equal except in a row where an exact pre-ADC value lies within that distance of an ADC level edge or
the saturation bound, which the tests check explicitly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpu_helpers import assert_twins, gpu_code, needs_kernels, needs_ptx, on_device

from aimc.devices.column_read import one_hot_settings, read_column
from aimc.devices.effective_weight import effective_weight_kernel
from aimc.devices.gpu.column_read import column_reads_kernel, read_columns
from aimc.devices.gpu.effective_weight import effective_weight
from aimc.devices.gpu.periphery import adc_kernel, analog_mvm, dac_kernel, np_sum_kernel
from aimc.devices.noise_management import fresh_average
from aimc.devices.periphery import PeripheryConfig
from aimc.devices.periphery import analog_mvm as cpu_analog_mvm
from aimc.devices.rng import Stream, normal_kernel

U = 2.0**-24
SEED = 12345


def _reads(w: np.ndarray, x: np.ndarray, cfg: PeripheryConfig, transposed: bool = False):
    """(CPU read, GPU read as numpy, CPU stream counter, GPU stream counter) of w (out, in) and x; transposed:
    weight passed as the transposed view of a contiguous (in, out) array, as a backward read."""
    wt = np.ascontiguousarray(w.T)
    cpu_stream, gpu_stream = Stream(SEED), Stream(SEED)
    y_cpu = cpu_analog_mvm(wt.T if transposed else w, x, cfg, cpu_stream)
    weight = on_device(wt).T if transposed else on_device(w)
    y_gpu = analog_mvm(weight, on_device(x), cfg, gpu_stream)
    assert y_gpu.dtype == torch.float32 and y_gpu.shape == y_cpu.shape
    return y_cpu, y_gpu.cpu().numpy(), cpu_stream.counter, gpu_stream.counter


def _dyadic(rng, batch=6, n_in=12, n_out=5):
    """Weights k/16 (|k| <= 8) and inputs k/8 in [-1, 1]: row 0 has max |x| = max x = 1, row 1 is zero, row 2
    has no positive entry (a zero scale under max), row 3 max |x| = 1/2; every product sum is exact."""
    w = (rng.integers(-8, 9, (n_out, n_in)) / 16).astype(np.float32)
    x = (rng.integers(-8, 9, (batch, n_in)) / 8).astype(np.float32)
    x[:, 0] = 1.0
    x[1] = 0.0
    x[2] = -np.abs(x[2])
    x[3] = np.clip(x[3], -0.5, 0.5)
    return w, x


DAC3 = dict(inp_bits=3, inp_bound=0.375)  # DAC step 2 * 0.375 / 6 = 1/8: every converted input is dyadic
EXACT_CONFIGS = {
    "dac3": PeripheryConfig(**DAC3),
    "no_noise": PeripheryConfig(**DAC3, out_noise=0.0),
    "nm_off": PeripheryConfig(**DAC3, noise_management=False),
    "nm_max": PeripheryConfig(**DAC3, noise_management="max"),
    "nm_constant": PeripheryConfig(**DAC3, noise_management="constant", nm_thres=2.0),
    "nm_constant_0": PeripheryConfig(**DAC3, noise_management="constant"),
    "nm_abs_max_thres": PeripheryConfig(**DAC3, noise_management="abs_max", nm_thres=0.5),
    "nm_max_thres": PeripheryConfig(**DAC3, noise_management="max", nm_thres=0.5),
    "nm_np_sum": PeripheryConfig(**DAC3, noise_management="abs_max_np_sum", nm_assumed_wmax=2.0, out_bound=3.0),
    "nm_np_sum_thres": PeripheryConfig(**DAC3, noise_management="abs_max_np_sum", nm_thres=0.5, out_bound=1.0),
    "nm_average": PeripheryConfig(**DAC3, noise_management="average_abs_max", nm_decay=0.25),
    "no_converters": PeripheryConfig(inp_bits=None, out_bits=None, out_noise=0.1),
    "adc4": PeripheryConfig(**DAC3, out_bits=4, out_bound=2.0, bound_management=False),
    "bm_dac": PeripheryConfig(**DAC3, out_bound=0.3),
    "bm_no_dac": PeripheryConfig(inp_bits=None, out_bound=0.5, max_bm_factor=8),
    "bm_capped": PeripheryConfig(inp_bits=None, out_bound=0.2, max_bm_reads=2),
    "bm_nm_max": PeripheryConfig(inp_bits=None, out_bound=0.5, noise_management="max", out_bits=5),
    "bm_off_clipped": PeripheryConfig(**DAC3, out_bound=0.3, bound_management=False),
}


@needs_kernels
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("name", list(EXACT_CONFIGS))
def test_analog_mvm_equals_cpu_where_the_product_is_exact(name, transposed):
    cfg = EXACT_CONFIGS[name]
    w, x = _dyadic(np.random.default_rng(3))
    y_cpu, y_gpu, c_cpu, c_gpu = _reads(w, x, cfg, transposed)
    assert_twins(y_gpu, y_cpu)
    assert c_gpu == c_cpu
    if name.startswith("bm_") and name != "bm_off_clipped":
        assert c_cpu > 1  # saturated rows were read again
    if cfg.nm_code in (1, 2):  # a zero input (and under max one without a positive entry) reads 0
        assert not y_cpu[1].any() and (cfg.nm_code == 1 or not y_cpu[2].any())


DIAGONAL_CONFIGS = {
    "default": PeripheryConfig(),
    "nm_max": PeripheryConfig(noise_management="max"),
    "nm_abs_max_thres": PeripheryConfig(nm_thres=0.8),
    "nm_constant": PeripheryConfig(noise_management="constant", nm_thres=1.3),
    "nm_np_sum": PeripheryConfig(noise_management="abs_max_np_sum", nm_assumed_wmax=3.0),
    "dac4_adc6": PeripheryConfig(inp_bits=4, out_bits=6, out_bound=20.0),
}


@needs_kernels
def test_running_average_continues_across_reads_as_on_the_cpu():
    """average_abs_max with a running average held across three reads (forward and backward views): the
    GPU's scales and the average after each read are the CPU's, bit for bit."""
    cfg = EXACT_CONFIGS["nm_average"]
    w, x = _dyadic(np.random.default_rng(5))
    avg_cpu, avg_gpu = fresh_average(), fresh_average()
    cpu_stream, gpu_stream = Stream(SEED), Stream(SEED)
    for k, transposed in enumerate((False, True, False)):
        xk = x * np.float32(2.0**-k)
        wk = np.ascontiguousarray(w.T).T if transposed else w
        y_cpu = cpu_analog_mvm(wk, xk, cfg, cpu_stream, avg_cpu)
        y_gpu = analog_mvm(on_device(wk), on_device(xk), cfg, gpu_stream, avg_gpu)
        assert_twins(y_gpu.cpu().numpy(), y_cpu)
        assert avg_gpu[0] == avg_cpu[0] > 0


@needs_kernels
@pytest.mark.parametrize("name", list(DIAGONAL_CONFIGS))
def test_analog_mvm_equals_cpu_for_a_diagonal_weight(name):
    """General float32 inputs (some on the 7-bit DAC's level edges) through a diagonal weight: every product
    sum has one nonzero term, so it is exact, and the whole read equals the CPU's bit for bit. Weight 16 on
    input 0, the largest input of the even samples: their outputs reach 16 and saturate the bound 12, and
    they are read again; weight 8 elsewhere (the odd samples' first read is their only one)."""
    cfg = DIAGONAL_CONFIGS[name]
    rng = np.random.default_rng(8)
    x = rng.normal(0, 1, (8, 10)).astype(np.float32)
    scale = np.abs(x).max(axis=1)
    step = np.float32(2.0 / 126.0)
    edges = ((np.arange(32).reshape(8, 4) - 15.5) * step).astype(np.float32)
    x[:, 0] = np.where(np.arange(8) % 2 == 0, scale, np.float32(0.25) * scale)
    x[1::2, 5] = scale[1::2]
    x[:, 1:5] = scale[:, None] * edges  # x / max |x| on or next to a DAC level edge
    w = np.diag(np.where(np.arange(10) == 0, 16.0, 8.0)).astype(np.float32)
    y_cpu, y_gpu, c_cpu, c_gpu = _reads(w, x, cfg)
    assert_twins(y_gpu, y_cpu)
    assert c_gpu == c_cpu
    assert name == "dac4_adc6" or c_cpu > 1


@needs_kernels
@pytest.mark.parametrize("cfg", [PeripheryConfig.perfect(), PeripheryConfig(inp_bits=None, out_bits=None, out_noise=0)])
def test_analog_mvm_product_within_its_rounding_bound(cfg):
    rng = np.random.default_rng(5)
    w = rng.normal(0, 0.3, (7, 40)).astype(np.float32)
    x = rng.normal(0, 1, (6, 40)).astype(np.float32)
    y_cpu, y_gpu, c_cpu, c_gpu = _reads(w, x, cfg)
    scale = 1.0 if cfg.ideal else np.abs(x).max(axis=1, keepdims=True)
    xq = x.astype(np.float64) / scale
    bound = 2 * (w.shape[1] - 1) * U * (np.abs(xq) @ np.abs(w.T).astype(np.float64)) * scale
    assert np.all(np.abs(y_gpu.astype(np.float64) - y_cpu) <= bound + 2 * U * np.abs(y_cpu))
    assert c_gpu == c_cpu == (0 if cfg.ideal else 1)


def _dac(x: np.ndarray, scale: np.ndarray, cfg: PeripheryConfig) -> np.ndarray:
    """The DAC's float32 conversion of x / scale (rows of scale 0 divided by 1)."""
    b = np.float32(cfg.inp_bound)
    step = np.float32(2.0 * cfg.inp_bound / (2.0**cfg.inp_bits - 2.0))
    v = x / np.where(scale > 0, scale, np.float32(1.0))[:, None]
    return np.rint(np.clip(v, -b, b) / step) * step


def _ambiguous_rows(w: np.ndarray, x: np.ndarray, cfg: PeripheryConfig) -> np.ndarray:
    """Rows whose read may differ between two float32 products (abs_max noise management, a DAC, an ADC):
    at some read k (input divided by 2^k), an exact pre-ADC value (float64 product of the converted input
    plus the float32 noise of stream (SEED, k + 1, row)) lies within the products' rounding distance of an
    ADC level edge or of the saturation bound."""
    scale = np.abs(x).max(axis=1)
    step = float(np.float32(2.0 * cfg.out_bound / (2.0**cfg.out_bits - 2.0)))
    flagged = np.zeros(len(x), bool)
    for k in range(cfg.bm_reads):
        xq = _dac(x * (np.float32(2.0**-k) / scale)[:, None], np.ones_like(scale), cfg) if k else _dac(x, scale, cfg)
        pre = xq.astype(np.float64) @ w.T.astype(np.float64)
        pre = pre + (cfg.out_noise * normal_kernel(len(x), w.shape[0], SEED, k + 1)).astype(np.float32)
        margin = 2 * w.shape[1] * U * (np.abs(xq).astype(np.float64) @ np.abs(w.T)) + 8 * U * np.abs(pre)
        to_edge = np.abs(pre / step - np.floor(pre / step) - 0.5) * step
        flagged |= ((to_edge <= margin) | (np.abs(np.abs(pre) - cfg.out_bound) <= margin)).any(axis=1)
    return flagged


@needs_kernels
@pytest.mark.parametrize("weight_scale", [0.3, 3.0])  # 3: many saturated rows, read again
def test_analog_mvm_default_periphery_levels_agree_off_the_edges(weight_scale):
    cfg = PeripheryConfig()
    rng = np.random.default_rng(11)
    w = rng.normal(0, weight_scale, (9, 32)).astype(np.float32)
    x = rng.normal(0, 1, (10, 32)).astype(np.float32)
    y_cpu, y_gpu, c_cpu, c_gpu = _reads(w, x, cfg)
    clear = ~_ambiguous_rows(w, x, cfg)
    assert clear.sum() >= 8
    assert_twins(y_gpu[clear], y_cpu[clear])
    assert c_gpu == c_cpu
    assert (c_cpu > 1) == (weight_scale > 1)


@needs_kernels
def test_analog_mvm_empty_batch_reads_nothing():
    stream = Stream(1)
    y = analog_mvm(
        on_device(np.ones((3, 4), np.float32)), on_device(np.zeros((0, 4), np.float32)), PeripheryConfig(), stream
    )
    assert y.shape == (0, 3) and stream.counter == 0


COLUMN_CONFIGS = [
    PeripheryConfig(),
    PeripheryConfig(out_bound=0.4),  # columns saturate: bound management's re-reads
    PeripheryConfig(out_bound=0.4, max_bm_reads=2),
    PeripheryConfig(noise_management="constant", nm_thres=2.0, out_bits=None),
    PeripheryConfig(noise_management="abs_max", nm_thres=0.5, inp_bits=None),
    PeripheryConfig.perfect(),
]


@needs_kernels
@pytest.mark.parametrize("cfg", COLUMN_CONFIGS)
def test_read_columns_equals_cpu_read_column(cfg):
    rng = np.random.default_rng(2)
    w = rng.normal(0, 0.5, (6, 5)).astype(np.float32)
    ref = rng.normal(0, 0.1, (6, 5)).astype(np.float32)
    cols = np.array([3, 0, 3, 4])
    settings = one_hot_settings(cfg)
    counts = np.array([7, 2], np.int64)
    expected = np.empty((len(cols), w.shape[0]), np.float32)
    for m, c in enumerate(cols):
        read_column((settings, SEED, counts), np.ascontiguousarray(w[:, c] - ref[:, c]), expected[m])
    gpu_counts = on_device(np.array([7, 2], np.int64))
    got = read_columns(on_device(w), on_device(ref), on_device(cols), (settings, SEED, gpu_counts))
    assert_twins(got.cpu().numpy(), expected)
    assert_twins(gpu_counts.cpu().numpy(), counts)


@needs_kernels
def test_effective_weight_equals_cpu_kernel():
    rng = np.random.default_rng(4)
    ws = tuple(rng.normal(0, 1, (4, 6)).astype(np.float32) for _ in range(3))
    refs = tuple(rng.normal(0, 0.2, (4, 6)).astype(np.float32) for _ in range(3))
    gains = np.array([1.0, 0.0, -0.37], np.float32)
    expected = np.empty((4, 6), np.float32)
    effective_weight_kernel(expected, ws, refs, gains)
    out = on_device(np.full((4, 6), np.nan, np.float32))
    effective_weight(out, tuple(on_device(w) for w in ws), tuple(on_device(r) for r in refs), gains)
    assert_twins(out.cpu().numpy(), expected)


F32_2D = np.zeros((3, 4), np.float32)
ROWS = np.zeros(3, np.int64)
SCALES = np.zeros(3, np.float32)


@needs_ptx
def test_dac_kernel_compiles():
    assert "dac_kernel" in gpu_code(dac_kernel, F32_2D, ROWS, SCALES, np.float32(1.0), 1.0, 7, F32_2D)


@needs_ptx
def test_adc_kernel_compiles():
    done = np.zeros(3, np.bool_)
    code = gpu_code(adc_kernel, F32_2D, ROWS, SCALES, np.float32(0.5), 0.06, 12.0, 9, True, SEED, 3, done)
    assert "adc_kernel" in code


@needs_ptx
def test_np_sum_kernel_compiles():
    _, _, wmax, out_bound, inp_res, max_bm_res, _ = PeripheryConfig(noise_management="abs_max_np_sum").nm_settings
    code = gpu_code(np_sum_kernel, F32_2D, SCALES, wmax, out_bound, inp_res, max_bm_res, SCALES)
    assert "np_sum_kernel" in code


@needs_ptx
def test_column_reads_kernel_compiles():
    reader = (one_hot_settings(PeripheryConfig()), SEED, np.zeros(2, np.int64))
    code = gpu_code(column_reads_kernel, F32_2D, F32_2D, ROWS, reader, F32_2D, F32_2D)
    assert "column_reads_kernel" in code
