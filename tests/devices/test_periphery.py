"""Read periphery: exact reads, DAC/ADC steps, output noise, noise and bound management."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from aihwkit_helpers import PYTHON as AIHWKIT

from aimc.devices import ConductanceArray, PeripheryConfig, analog_mvm, parse_device
from aimc.devices.rng import Stream

CLEAN = dict(out_noise=0.0, inp_bits=None, out_bits=None, out_bound=1e9, bound_management=False)


def _rng():
    return np.random.default_rng(0)


def test_ideal_read_is_exactly_w_x():
    rng = _rng()
    w = rng.normal(0, 1, (20, 30)).astype(np.float32)
    x = rng.normal(0, 1, (7, 30)).astype(np.float32)
    y = analog_mvm(w, x, PeripheryConfig.perfect(), Stream(0))
    assert np.array_equal(y, x @ w.T)


@pytest.mark.parametrize("nm", [True, False])
def test_noise_free_unquantized_read_is_w_x(nm):
    rng = _rng()
    w = rng.normal(0, 0.3, (20, 30)).astype(np.float32)
    x = rng.uniform(-1, 1, (7, 30)).astype(np.float32)  # inside the input bound without noise management
    y = analog_mvm(w, x, PeripheryConfig(noise_management=nm, **CLEAN), Stream(0))
    np.testing.assert_allclose(y, x.astype(float) @ w.T.astype(float), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bits", [2, 3, 7])
def test_dac_step_is_two_bound_over_levels(bits):
    """Identity weights, no noise management: y = the quantized input, levels 2 bound / (2^bits - 2) apart."""
    bound = 1.0
    step = 2 * bound / (2**bits - 2)
    x = np.linspace(-1.3, 1.3, 501, dtype=np.float32)[None, :]
    w = np.eye(x.shape[1], dtype=np.float32)
    cfg = PeripheryConfig(
        inp_bits=bits,
        inp_bound=bound,
        out_bits=None,
        out_noise=0.0,
        out_bound=1e9,
        noise_management=False,
        bound_management=False,
    )
    y = analog_mvm(w, x, cfg, Stream(0))[0]
    want = np.round(np.clip(x[0], -bound, bound) / step) * step
    np.testing.assert_allclose(y, want, atol=1e-6)
    assert len(np.unique(np.round(y / step))) == 2**bits - 1


@pytest.mark.parametrize("bits", [4, 9])
def test_adc_step_and_output_bound(bits):
    bound = 2.0
    step = 2 * bound / (2**bits - 2)
    x = np.linspace(-3, 3, 1001, dtype=np.float32)[None, :]
    w = np.eye(x.shape[1], dtype=np.float32)
    cfg = PeripheryConfig(
        inp_bits=None,
        inp_bound=10.0,
        out_bits=bits,
        out_bound=bound,
        out_noise=0.0,
        noise_management=False,
        bound_management=False,
    )
    y = analog_mvm(w, x, cfg, Stream(0))[0]
    np.testing.assert_allclose(y, np.round(np.clip(x[0], -bound, bound) / step) * step, atol=1e-6)
    assert np.abs(y).max() == pytest.approx(bound)


@pytest.mark.parametrize("nm", [True, False])
def test_output_noise_std(nm):
    """W = 0: the output is pure noise, std out_noise in normalized units, times max|x| with noise management."""
    amp = 2.5 if nm else 1.0
    x = np.full((2000, 16), amp if nm else 0.5, np.float32)
    x[:, 0] = amp
    cfg = PeripheryConfig(
        out_noise=0.1, inp_bits=None, out_bits=None, out_bound=1e9, noise_management=nm, bound_management=False
    )
    y = analog_mvm(np.zeros((8, 16), np.float32), x, cfg, Stream(0))
    assert y.mean() == pytest.approx(0.0, abs=5 * 0.1 * amp / np.sqrt(y.size))
    assert y.std() == pytest.approx(0.1 * amp, rel=0.03)


def test_bound_management_rescues_a_saturating_read():
    w = np.full((8, 16), 3.0, np.float32)
    x = np.ones((4, 16), np.float32)  # W x = 48, four times the output bound 12
    base = dict(out_noise=0.0, out_bits=None, inp_bits=None, out_bound=12.0)
    clipped = analog_mvm(w, x, PeripheryConfig(bound_management=False, **base), Stream(0))
    np.testing.assert_allclose(clipped, 12.0)
    rescued = analog_mvm(w, x, PeripheryConfig(bound_management=True, **base), Stream(0))
    np.testing.assert_allclose(rescued, 48.0, rtol=1e-6)
    # with R1's default periphery the rescued read is W x up to quantization and noise
    y = analog_mvm(w, x, PeripheryConfig(), Stream(0))
    np.testing.assert_allclose(y, 48.0, rtol=0.05)
    # too few halvings: still saturated, reported at the (scaled) bound
    few = analog_mvm(w, x, PeripheryConfig(bound_management=True, max_bm_reads=2, **base), Stream(0))
    np.testing.assert_allclose(few, 24.0, rtol=1e-6)


def test_array_read_and_transposed_read_use_effective_weights():
    dev = parse_device(dict(kind="ideal", tau=1.0, dw_min=0.01))
    a = ConductanceArray(6, 9, dev, seed=0)
    a.pulse(np.random.default_rng(1).integers(-30, 31, a.shape))
    a.reference[...] = 0.05
    x = np.random.default_rng(2).normal(0, 1, (3, 9)).astype(np.float32)
    d = np.random.default_rng(3).normal(0, 1, (3, 6)).astype(np.float32)
    w_eff = a.w - np.float32(0.05)
    assert np.array_equal(a.read(x, PeripheryConfig.perfect()), x @ w_eff.T)
    assert np.array_equal(a.read_transposed(d, PeripheryConfig.perfect()), d @ w_eff)


def test_product_of_both_layouts_is_the_quantized_input_times_w():
    """The read's product is the float64 product of the DAC-quantized input, within float32 rounding,
    for a row-major weight and for a transposed view (backward reads); both draw the same noise."""
    rng = _rng()
    w = rng.normal(0, 1, (24, 40)).astype(np.float32)
    x = rng.normal(0, 1, (6, 40)).astype(np.float32)
    cfg = PeripheryConfig(out_bits=None, out_bound=1e9, out_noise=0.0)
    m = np.abs(x).max(1, keepdims=True)
    step = 2.0 / (2**7 - 2)
    xq = np.rint(x / m / step) * step  # noise management, then the 7-bit DAC
    want = (xq.astype(np.float64) @ w.T.astype(np.float64)) * m
    a = analog_mvm(w, x, cfg, Stream(5))
    b = analog_mvm(np.ascontiguousarray(w.T).T, x, cfg, Stream(5))  # (out, in) view of a row-major w^T
    np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(b, want, rtol=1e-5, atol=1e-4)
    noisy = PeripheryConfig(out_bits=None, out_bound=1e9, out_noise=0.1)
    na = analog_mvm(w, x, noisy, Stream(5)) - a
    nb = analog_mvm(np.ascontiguousarray(w.T).T, x, noisy, Stream(5)) - b
    np.testing.assert_allclose(na, nb, atol=1e-4)
    assert np.std(na / m) == pytest.approx(0.1, rel=0.2)


def test_a_zero_input_reads_zero_under_noise_management():
    """aihwkit 1.1.0 (ABS_MAX noise management, measured forward and backward): a vector of zeros reads
    exactly 0, no output noise; a convolution's max-pool backward and zero padding give such vectors. The
    other rows of the batch read as they do alone; without noise management the zero row gets the noise."""
    rng = np.random.default_rng(3)
    w = rng.uniform(-0.5, 0.5, (32, 20)).astype(np.float32)
    x = rng.uniform(-1, 1, (3, 20)).astype(np.float32)
    x[1] = 0.0
    y = analog_mvm(w, x, PeripheryConfig(), Stream(7))
    assert np.array_equal(y[1], np.zeros(32, np.float32))
    alone = analog_mvm(w, x[[0, 2]], PeripheryConfig(), Stream(7))  # rows draw from (seed, counter, row)
    assert np.array_equal(y[0], alone[0])
    plain = analog_mvm(w, x, PeripheryConfig(noise_management=False), Stream(7))
    assert np.abs(plain[1]).max() > 0.05  # output noise 0.06 of the unscaled range


@pytest.mark.parametrize("transposed", [False, True])
def test_product_blocks_are_exact_and_independent_of_the_thread_count(transposed):
    """The read's product in unrolled blocks (four outputs, two samples) and their remainders: for every shape
    from 1 to 9 samples and outputs, an exact read (no converters, noise or bounds) is the float64 product
    within float32 rounding, bit for bit the same on one thread as on two (the blocks change with the thread
    count, each output's summation order does not) and as each sample (each output of the dot form) read
    alone. transposed: the weight is a transposed view, as in backward reads."""
    import numba

    cfg = PeripheryConfig(
        inp_bound=1e9,
        inp_bits=None,
        out_bound=1e9,
        out_bits=None,
        out_noise=0.0,
        noise_management=False,
        bound_management=False,
    )
    rng = _rng()
    before = numba.get_num_threads()

    def read(w, x):
        return analog_mvm(np.ascontiguousarray(w.T).T if transposed else w, x, cfg, Stream(0))

    try:
        for batch in range(1, 10):
            for out in range(1, 10):
                x = rng.normal(0, 1, (batch, 37)).astype(np.float32)
                w = rng.normal(0, 1, (out, 37)).astype(np.float32)
                ys = []
                for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
                    numba.set_num_threads(threads)
                    ys.append(read(w, x))
                np.testing.assert_allclose(ys[0], x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5, atol=1e-4)
                assert np.array_equal(ys[0], ys[1])
                for o in range(out if not transposed else 0):  # one output at a time (a one-column transposed
                    # weight is summed over its rows in vector order instead)
                    assert np.array_equal(read(np.ascontiguousarray(w[o : o + 1]), x)[:, 0], ys[0][:, o])
                for b in range(batch):  # one sample at a time
                    assert np.array_equal(read(w, x[b : b + 1])[0], ys[0][b])
    finally:
        numba.set_num_threads(before)


BM_TARGETS = [6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6, 819.2, 1638.4, 2048.0, 1e5, -2048.0]
BM_LIMITS = {
    "default": {},
    "no DAC": dict(inp_bits=None),
    "max_bm_factor 10": dict(inp_bits=None, max_bm_factor=10),
    "max_bm_res 1": dict(max_bm_res=1.0, out_bits=None),
}


def _bm_reads(targets, cfg: PeripheryConfig) -> list[float]:
    """The noise-free read of W x = t for each target t: 16 inputs of 1, 16 weights t / 16."""
    x = np.ones((1, 16), np.float32)
    return [float(analog_mvm(np.full((1, 16), t / 16, np.float32), x, cfg, Stream(0))[0, 0]) for t in targets]


@pytest.mark.parametrize("bits, reads", [(2, 1), (3, 1), (4, 2), (6, 4), (7, 5), (9, 7), (None, 11)])
def test_bound_management_stops_at_aihwkit_limits(bits, reads):
    """Read k divides the input by 2^k and is the last once 2^k > max_bm_res / DAC step (step 2 / (2^bits - 2))
    or 2^k > max_bm_factor (1000: 11 reads without a DAC); a saturating read then reads out_bound 2^(reads-1)."""
    cfg = PeripheryConfig(inp_bits=bits, out_noise=0.0, out_bits=None)
    assert cfg.bm_reads == reads
    assert _bm_reads([1e6], cfg) == [12.0 * 2 ** (reads - 1)]
    assert PeripheryConfig(inp_bits=bits, max_bm_reads=2).bm_reads == min(reads, 2)
    assert PeripheryConfig(inp_bits=bits, bound_management=False).bm_reads == 1


def test_bound_management_keeps_a_coarse_input_instead_of_rounding_it_to_zero():
    """A true output of 2048 with R1's periphery: the fifth read (input 1/16, on the 7-bit DAC 4 steps of 1/63)
    saturates and is clipped to 12 * 16 = 192, not halved on until the DAC rounds the input to 0."""
    assert _bm_reads([2048.0], PeripheryConfig(out_noise=0.0)) == [192.0]


@pytest.mark.skipif(not AIHWKIT.exists(), reason=f"no aihwkit interpreter at {AIHWKIT}")
@pytest.mark.parametrize("case", list(BM_LIMITS))
def test_bound_management_matches_aihwkit(case):
    """aihwkit 1.1.0's forward read (its IOParameters, output noise 0) of the same W x, from 6.4 to 2048 and
    beyond, with its default limits and with each changed."""
    io = {"out_noise": 0.0}
    kw = BM_LIMITS[case]
    for ours, theirs in (("inp_bits", "inp_res"), ("out_bits", "out_res")):
        if ours in kw:
            io[theirs] = -1.0
    io.update({k: v for k, v in kw.items() if k.startswith("max_bm")})
    spec = json.dumps({"targets": BM_TARGETS, "io": io})
    out = subprocess.run([str(AIHWKIT), "-c", BM_SCRIPT, spec], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    ours = _bm_reads(BM_TARGETS, PeripheryConfig(out_noise=0.0, **kw))
    np.testing.assert_allclose(ours, theirs, rtol=2e-6)


BM_SCRIPT = r"""
import json, sys
import torch
from aihwkit.simulator.configs import SingleRPUConfig
from aihwkit.simulator.configs.devices import ConstantStepDevice
from aihwkit.simulator.tiles import AnalogTile
spec = json.loads(sys.argv[1])
cfg = SingleRPUConfig(device=ConstantStepDevice(w_max=1e4, w_min=-1e4, w_max_dtod=0.0, w_min_dtod=0.0))
for k, v in spec["io"].items():
    setattr(cfg.forward, k, v)
out = []
for t in spec["targets"]:
    tile = AnalogTile(1, 16, cfg, bias=False)
    tile.set_weights(torch.full((1, 16), t / 16))
    out.append(float(tile.forward(torch.ones(1, 16))[0, 0]))
print(json.dumps(out))
"""


NM_X = np.array([[-2.0, 0.5, 0.25], [-2.0, -1.0, -0.5], [0.0, 0.0, 0.0], [3.0, 1.0, -0.5]], np.float32)
AIHWKIT_NM = {  # aihwkit 1.1.0's forward of W = [1, 2, 4] at the rows NM_X (no converters, noise or bound management)
    (True, 0.0): [0.0, -6.0, 0.0, 3.0],
    (True, 0.8): [1.2, -4.4, 0.0, 0.4],
    ("max", 0.0): [1.5, 0.0, 0.0, 3.0],
    ("max", 0.8): [1.5, 0.0, 0.0, 0.4],
    ("constant", 0.0): [1.0, -5.0, 0.0, 1.0],
    ("constant", 0.8): [1.2, -4.4, 0.0, 0.4],
    (False, 0.0): [1.0, -5.0, 0.0, 1.0],
}


@pytest.mark.parametrize("nm, thres", list(AIHWKIT_NM))
def test_noise_management_types_are_aihwkit_s(nm, thres):
    """The input is divided by max |x| (true, abs_max), max x (max: a vector without a positive entry reads 0),
    nm_thres (constant; 1 where 0) or nothing, the first two at most nm_thres, then clipped to +-1: the values
    measured with aihwkit 1.1.0's binary (its ABS_MAX, MAX, CONSTANT, NONE), e.g. MAX at [-2, 0.5, 0.25]:
    [-4, 1, 0.5] clipped to [-1, 1, 0.5], W x 3, times 0.5 = 1.5."""
    cfg = PeripheryConfig(noise_management=nm, nm_thres=thres, **{k: v for k, v in CLEAN.items() if k != "out_bound"})
    y = analog_mvm(np.array([[1.0, 2.0, 4.0]], np.float32), NM_X, cfg, Stream(0))[:, 0]
    np.testing.assert_allclose(y, AIHWKIT_NM[(nm, thres)], atol=1e-6)
    if nm == "max":  # the row without a positive entry is not read: 0 even with output noise
        noisy = PeripheryConfig(noise_management=nm, nm_thres=thres, inp_bits=None, out_bits=None)
        assert analog_mvm(np.array([[1.0, 2.0, 4.0]], np.float32), NM_X, noisy, Stream(0))[1, 0] == 0.0


@pytest.mark.parametrize("nm, thres", [(True, 0.0), (True, 0.5), ("max", 0.25), ("constant", 2.0), (False, 0.0)])
def test_one_hot_column_read_is_the_read_of_a_unit_vector(nm, thres):
    """read_one_hot (the column reads inside kernels) equals analog_mvm of the column with input [[1]] under
    every noise-management type, bit for bit, saturating re-reads included."""
    from aimc.devices.column_read import one_hot_settings
    from aimc.devices.periphery import read_one_hot

    col = np.linspace(-30, 30, 16, dtype=np.float32)
    cfg = PeripheryConfig(noise_management=nm, nm_thres=thres)
    want = analog_mvm(col[:, None], np.ones((1, 1), np.float32), cfg, Stream(3))[0]
    out = np.empty(16, np.float32)
    read_one_hot(col, one_hot_settings(cfg), 3, 0, out)
    assert np.array_equal(out, want)


def test_an_updated_copy_recomputes_what_the_config_derives():
    """The read's settings, its noise-management settings and its reads per sample are cached on a config;
    a copy with other fields gets its own (pydantic's model_copy carries the cached values along)."""
    cfg = PeripheryConfig()
    assert cfg.bm_reads == 5 and cfg.read_settings[3] == pytest.approx(0.06)  # 7-bit DAC: read 5 is the last
    other = cfg.model_copy(update={"bound_management": False, "out_noise": 0.5, "noise_management": "max"})
    assert other.bm_reads == 1 and other.read_settings[3] == 0.5 and other.nm_settings[0] == 2
    assert cfg.bm_reads == 5 and cfg.nm_settings[0] == 1


def test_a_large_batch_reads_chunk_by_chunk_as_row_by_row():
    """A batch large enough for dac_product's chunks (more than SAMPLE_CHUNK samples per thread) reads bit for
    bit as on one thread and as in slices too small to be chunked on two (DAC 7 bit, noise management on, no
    output noise or ADC so that the rows' streams do not matter), and within float32 rounding of the float64
    product of the DAC's levels."""
    import numba

    from aimc.devices.crossbar_product import SAMPLE_CHUNK

    cfg = PeripheryConfig(out_bits=None, out_bound=1e9, out_noise=0.0, bound_management=False)
    rng = _rng()
    n = 4 * SAMPLE_CHUNK + 13
    x = rng.normal(0, 1, (n, 50)).astype(np.float32)
    w = rng.normal(0, 1, (11, 50)).astype(np.float32)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        whole = analog_mvm(w, x, cfg, Stream(0))
        pieces = np.concatenate([analog_mvm(w, x[i : i + 40], cfg, Stream(0)) for i in range(0, n, 40)])
        numba.set_num_threads(1)
        one_thread = analog_mvm(w, x, cfg, Stream(0))
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(whole, pieces)
    assert np.array_equal(whole, one_thread)
    m = np.abs(x).max(1, keepdims=True)
    step = 2.0 / (2**7 - 2)
    xq = np.rint(x / m / step) * step
    np.testing.assert_allclose(whole, (xq.astype(np.float64) @ w.T.astype(np.float64)) * m, rtol=1e-5, atol=1e-4)
