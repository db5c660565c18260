"""Each Numba kernel against a plain numpy/python reference; seeds and thread counts."""

from __future__ import annotations

import dataclasses
import math
import platform

import numba
import numpy as np
import pytest
from conftest import FAMILY_CONFIGS, SPREAD_CONFIGS, ref_bounds, ref_q
from numba import njit
from scipy.optimize import brentq

from aimc.devices import DEVICE_KINDS, ConductanceArray, Exponential, PeripheryConfig, UpdateConfig, parse_device
from aimc.devices.bits import lowest_bit
from aimc.devices.characteristics import element_steps_kernel, symmetric_point_kernel
from aimc.devices.coincidences import coincidence_update_kernel
from aimc.devices.effects import NO_WRITE_NOISE
from aimc.devices.expected_update import expected_update_kernel
from aimc.devices.kernel_bundles import update_settings
from aimc.devices.normals import BLOCK, fill_normals
from aimc.devices.prefetch import prefetch
from aimc.devices.pulse_trains import INDEX, NEGATIVE, plan_kernel, pulse_trains_kernel, slot_lists_kernel
from aimc.devices.pulsed_set import NO_SET
from aimc.devices.pulsed_update import SERIAL_PULSES, SERIAL_TRAIN_ELEMENTS, pulsed_update_kernel
from aimc.devices.pulses import pulse_kernel
from aimc.devices.response_step import DW_UP, GAMMA_UP, N_ELEMENT_PARAMS
from aimc.devices.rng import new_state
from aimc.devices.threads import kernel_thread_count


def _params(cfg, shape):
    """The nominal element's float64 parameters for every element of `shape`: the kernels' arithmetic
    against the float64 formulas (arrays store theirs in float32: test_array_parameters_are_float32)."""
    p = parse_device(cfg).nominal()
    return dataclasses.replace(p, ep=np.broadcast_to(p.ep, (*shape, N_ELEMENT_PARAMS)))


def _drawn_params(cfg, shape):
    """The float32 parameters an array of `shape` draws for a device without spread (a read-only shared row):
    the argument types the arrays give the kernels, so a test compiles no kernel of its own (30-60 s each)."""
    return parse_device(cfg).draw(shape, np.random.default_rng(0))


def _random_start(cfg, shape, seed):
    """The bounds, a generator, `_params` and float32 weights drawn uniformly between the bounds by it."""
    lo, hi = ref_bounds(cfg)
    rng = np.random.default_rng(seed)
    return lo, hi, rng, _params(cfg, shape), rng.uniform(lo, hi, shape).astype(np.float32)


@pytest.mark.parametrize("kind", ["SoftBounds", "power", "tabulated"])
def test_array_parameters_are_float32(kind):
    """An array stores its drawn parameters in float32 (as aihwkit's float32 tiles; half the memory a
    pulse reads); its mean steps are the float64 formula's to float32 rounding."""
    cfg = FAMILY_CONFIGS[kind]
    lo, hi = ref_bounds(cfg)
    w = np.linspace(lo, hi, 35).reshape(5, 7)
    arr = ConductanceArray(*w.shape, parse_device(cfg), seed=0)
    assert arr.params.ep.dtype == np.float32
    for up in (True, False):
        want = cfg["dw_min"] * ref_q(cfg, w, up)
        np.testing.assert_allclose(
            element_steps_kernel(w, up, arr.params.kernel), want, rtol=2e-6, atol=1e-6 * cfg["dw_min"]
        )


# -- pulse_kernel ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_pulse_kernel_matches_a_python_loop(kind):
    """sigma = 0: counts[i, j] signed pulses, each w += +-dw_min q(w) then clipped, in float32 (as aihwkit)."""
    cfg = FAMILY_CONFIGS[kind]
    shape = (12, 10)
    lo, hi, rng, p, w0 = _random_start(cfg, shape, seed=0)
    counts = rng.integers(-60, 61, shape)
    w = w0.copy()
    fired = pulse_kernel(w, counts, (*p.kernel[:6], 0.0, False), 1, 1)
    assert fired == np.abs(counts).sum()
    ref = w0.astype(np.float32)
    lo32, hi32 = np.float32(lo), np.float32(hi)
    for t in range(np.abs(counts).max()):
        active = np.abs(counts) > t
        up = counts > 0
        step = (cfg["dw_min"] * np.where(up, ref_q(cfg, ref, True), ref_q(cfg, ref, False))).astype(np.float32)
        ref = np.where(active, np.clip(ref + np.where(up, step, -step), lo32, hi32), ref)
    np.testing.assert_allclose(w, ref, atol=1e-6)


# -- symmetric_point_kernel and element_steps_kernel -------------------------------------------------------


@pytest.mark.parametrize("kind", [k for k in DEVICE_KINDS if k not in ("ideal", "ConstantStep")])
def test_symmetric_point_kernel_matches_brentq(kind):
    """Several nominal devices of the family: the kernel's bisection against scipy's brentq of the reference."""
    base = FAMILY_CONFIGS[kind]
    variants = [base]
    if "c" in base:
        variants += [dict(base, c=-0.25), dict(base, c=0.35)]
    if "up_down" in base or kind in ("ExpStep", "PowStep", "PiecewiseStep"):
        variants += [dict(base, up_down=-0.2), dict(base, up_down=0.15)]
    for cfg in variants:
        lo, hi = ref_bounds(cfg)
        h = lambda w: ref_q(cfg, w, True) - ref_q(cfg, w, False)  # noqa: E731
        want = brentq(h, lo, hi, xtol=1e-14) if h(lo) * h(hi) < 0 else (hi if h(lo) > 0 else lo)
        p = parse_device(cfg).nominal()  # float64, as Device.symmetric_point gives the kernel
        np.testing.assert_allclose(symmetric_point_kernel(p.kernel), want, atol=1e-9, err_msg=str(cfg))


# every family, and the power family at its exact exponents (sqrt, identity, square) and a general one
ELEMENT_STEP_CASES = [pytest.param(FAMILY_CONFIGS[k], 1e-10, id=k) for k in DEVICE_KINDS] + [
    pytest.param(dict(FAMILY_CONFIGS["power"], gamma=g), 1e-12, id=f"power-gamma-{g}") for g in (0.5, 1.0, 2.0, 1.3)
]


@pytest.mark.parametrize("cfg, rtol", ELEMENT_STEP_CASES)
def test_element_steps_kernel_matches_the_formula(cfg, rtol):
    lo, hi = ref_bounds(cfg)
    w = np.linspace(lo, hi, 35).reshape(5, 7)
    p = _params(cfg, w.shape)
    for up in (True, False):
        np.testing.assert_allclose(
            element_steps_kernel(w, up, p.kernel), cfg["dw_min"] * ref_q(cfg, w, up), rtol=rtol, atol=1e-15
        )


# -- pulse trains and coincidences ------------------------------------------------------------------------


def _popcount(m):
    bits = np.unpackbits(np.ascontiguousarray(m, np.uint32).view(np.uint8)).reshape(*m.shape, 32)
    return bits.sum(-1, dtype=np.int64)


def test_pulse_trains_bit_probabilities():
    probs = np.array([0.0, 0.003, 0.05, 0.2, 0.3, 0.7, 0.97, 1.0, 1.7])
    n_per = 4000
    values = np.repeat(probs, n_per)[None, :].repeat(3, 0)
    values[1] *= -1  # the sign does not matter
    values = values.astype(np.float32)
    bl = np.array([31, 7, 1], np.int32)  # BL = 1 has its own (vectorized) path
    masks = pulse_trains_kernel(values, np.ones(3), bl, 5, 1, 0)
    assert masks.shape == values.shape and masks.dtype == np.uint32
    bits = np.unpackbits(masks.view(np.uint8), bitorder="little").reshape(3, -1, 32)
    for b in range(3):
        L = bl[b]
        assert not bits[b, :, L:].any()  # no pulse beyond the train length
        for g, p in enumerate(probs):
            sel = bits[b, g * n_per : (g + 1) * n_per, :L].astype(float)
            p_eff = min(p, 1.0)
            n = sel.size
            assert abs(sel.mean() - p_eff) < 5 * np.sqrt(p_eff * (1 - p_eff) / n) + 1e-12, (b, p, sel.mean())
            # slots are independent: the pulse count per train is Binomial(L, p)
            cnt = sel.sum(1)
            pq = p_eff * (1 - p_eff)
            mu4 = L * pq * (1 + 3 * (L - 2) * pq)  # fourth central moment of Binomial(L, p)
            se = np.sqrt(max(mu4 - (L * pq) ** 2, 0.0) / n_per)  # standard error of the sample variance
            assert cnt.var() == pytest.approx(L * pq, abs=5 * se + 1e-9), (b, p)
            if 0 < p_eff < 1:
                per_slot = sel.mean(0)  # each slot fires with the same probability
                assert np.abs(per_slot - p_eff).max() < 5 * np.sqrt(p_eff * (1 - p_eff) / n_per)
    # samples draw from their own streams: the same seed and counter repeat, another counter does not
    again = pulse_trains_kernel(values, np.ones(3), bl, 5, 1, 0)
    other = pulse_trains_kernel(values, np.ones(3), bl, 5, 2, 0)
    assert np.array_equal(masks, again) and not np.array_equal(masks, other)


def test_pulse_trains_zero_length_and_zero_values_fire_nothing():
    values = np.ones((3, 50), np.float32)
    values[1, ::2] = 0.0
    masks = pulse_trains_kernel(values, np.full(3, 0.5), np.array([0, 20, 5], np.int32), 1, 1, 0)
    assert not masks[0].any()
    assert not masks[1, ::2].any() and masks[1, 1::2].any()


@pytest.mark.parametrize("max_bl", [12, 1])  # 1: one-slot trains, listed by a branch-free compaction
def test_slot_lists_match_the_masks(max_bl):
    rng = np.random.default_rng(1)
    top = 2**max_bl
    masks = (rng.integers(0, top, (3, 40)) & rng.integers(0, top, (3, 40))).astype(np.uint32)
    values = rng.normal(size=(3, 40)).astype(np.float32)
    lists, counts = slot_lists_kernel(masks, values, max_bl)
    for b in range(3):
        for t in range(max_bl):
            want = np.flatnonzero((masks[b] >> t) & 1)
            entries = lists[b, t, : counts[b, t]]
            index = entries & INDEX
            np.testing.assert_array_equal(np.sort(index), want)
            np.testing.assert_array_equal(entries >= NEGATIVE, values[b, index] < 0)  # the sign bit


def test_coincidence_update_matches_numpy_popcount():
    """Constant step dw = 2^-10, no noise, wide bounds: w changes by dw times the signed coincidence count."""
    rng = np.random.default_rng(2)
    batch, rows, cols, L = 5, 16, 24, 20
    dw = 2.0**-10
    x_masks = (rng.integers(0, 2**L, (batch, cols)) & rng.integers(0, 2**L, (batch, cols))).astype(np.uint32)
    d_masks = (rng.integers(0, 2**L, (batch, rows)) & rng.integers(0, 2**L, (batch, rows))).astype(np.uint32)
    x_masks[:, ::5] = 0
    x = (rng.uniform(0.1, 1, (batch, cols)) * rng.choice([-1, 1], (batch, cols))).astype(np.float32)
    d = (rng.uniform(0.1, 1, (batch, rows)) * rng.choice([-1, 1], (batch, rows))).astype(np.float32)
    p = _drawn_params(dict(kind="ideal", tau=1000.0, dw_min=dw), (rows, cols))
    lists, counts = slot_lists_kernel(x_masks, x, L)
    for lr_sign in (1.0, -1.0):
        w = np.zeros((rows, cols), np.float32)
        noiseless = (*p.kernel[:6], 0.0, False)
        fired = coincidence_update_kernel(w, (lists, counts, d_masks), d, lr_sign, noiseless, 3, 1)
        both = d_masks[:, :, None] & x_masks[:, None, :]  # (batch, rows, cols)
        c = _popcount(both)
        down = lr_sign * np.sign(d)[:, :, None] * np.sign(x)[:, None, :] > 0  # W -= lr d x^T
        net = np.where(down, -c, c).sum(0)
        assert fired == c.sum()
        np.testing.assert_array_equal(w, (net * dw).astype(np.float32))


@pytest.mark.parametrize("gamma_dtod", [0.0, 0.05])
def test_exponential_pulse_is_float64_for_steep_devices(gamma_dtod):
    """R1's exponential family, g = 90: one up pulse at w = 0 (distance to the bound tau, v = 1) steps by
    dw_min (expm1(g) / expm1(g) = 1). In float32 both exponentials overflow (e^88.7) and the step is NaN;
    the pulsed update takes them in float64, from the family's shared denominator (no spread) or the
    element's own (spread)."""
    dev = Exponential(gamma=90.0, tau=1.0, c=0.0, dw_min=1e-3, gamma_dtod=gamma_dtod)
    arr = ConductanceArray(1, 2, dev, seed=0)
    p = arr.params
    shared = p.consts[1:3]
    if gamma_dtod == 0.0:
        np.testing.assert_array_equal(shared, np.expm1(np.float64(np.float32(90.0))))
    else:
        assert np.isnan(shared).all()
    g = float(p.ep[0, 0, GAMMA_UP])
    lists = np.zeros((1, 1, 2), np.uint32)  # sample 0, slot 0: element 0
    counts = np.ones((1, 1), np.int32)
    d_masks = np.ones((1, 1), np.uint32)
    w = np.zeros((1, 2), np.float32)
    fired = coincidence_update_kernel(
        w, (lists, counts, d_masks), np.array([[-1.0]], np.float32), 1.0, (*p.kernel[:6], 0.0, False), 0, 1
    )
    want = float(p.ep[0, 0, DW_UP]) * (math.expm1(g * 1.0) / math.expm1(g))
    assert fired == 1 and w[0, 1] == 0.0
    assert w[0, 0] == pytest.approx(want, rel=1e-6)


def _row_pulse_normals(seed, counter, i, n):
    """The first n normals of row i's pulse-noise stream in a pulsed update (seed, call counter)."""
    out = np.empty(-(-n // BLOCK) * BLOCK, np.float32)
    fill_normals(out, 0, out.size, new_state(seed, counter, i)[0], 0)
    return out[:n].astype(np.float64)


@pytest.mark.parametrize(
    "noise, sigma, c", [("additive", 0.0, 0.2), ("multiplicative", 0.4, 0.2), ("additive", 0.4, 0.0)]
)
def test_linear_coincidence_update_matches_a_python_loop(noise, sigma, c):
    """Soft bounds (R1's linear family), each of the coincidence loop's variants (no noise, multiplicative,
    additive): per row, samples in order, slots in order, columns in order; the k-th pulse of row i takes
    normal k of the row's stream, w += +-step (1 + sigma xi) or +-(step + sigma dw_min xi), then clipped."""
    rng = np.random.default_rng(4)
    batch, rows, cols, L, dw_min, tau = 4, 6, 10, 6, 0.01, 0.6
    cfg = dict(kind="linear", tau=tau, c=c, dw_min=dw_min, dw_min_std=sigma, noise=noise)
    x_masks = rng.integers(0, 2**L, (batch, cols)).astype(np.uint32)
    d_masks = rng.integers(0, 2**L, (batch, rows)).astype(np.uint32)
    d_masks[1, 2] = 0
    x = (rng.uniform(0.1, 1, (batch, cols)) * rng.choice([-1, 1], (batch, cols))).astype(np.float32)
    d = (rng.uniform(0.1, 1, (batch, rows)) * rng.choice([-1, 1], (batch, rows))).astype(np.float32)
    w0 = rng.uniform(-0.5, 0.5, (rows, cols)).astype(np.float32)
    p = _drawn_params(cfg, (rows, cols))
    lists, counts = slot_lists_kernel(x_masks, x, L)
    w = w0.copy()
    fired = coincidence_update_kernel(w, (lists, counts, d_masks), d, 1.0, p.kernel, 9, 2)
    ref = w0.astype(np.float64)
    total = 0
    for i in range(rows):
        xi = _row_pulse_normals(9, 2, i, batch * L * cols)
        k = 0
        for b in range(batch):
            for t in range(L):
                if not (d_masks[b, i] >> t) & 1:
                    continue
                for j in range(cols):
                    if not (x_masks[b, j] >> t) & 1:
                        continue
                    up = np.sign(d[b, i]) * np.sign(x[b, j]) < 0  # W -= lr d x^T with lr > 0
                    step = dw_min * ref_q(cfg, ref[i, j], up)
                    step = step * (1 + sigma * xi[k]) if noise == "multiplicative" else step + sigma * dw_min * xi[k]
                    ref[i, j] = np.clip(ref[i, j] + (step if up else -step), -tau, tau)
                    k += 1
        total += k
    assert fired == total
    np.testing.assert_allclose(w, ref, atol=2e-6)


@njit
def _prefetch_rows(a, i):
    for j in range(a.shape[1]):
        prefetch(a, i, j)
    return a.sum()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="checks x86 assembly")
def test_prefetch_emits_the_cpu_hint_and_changes_nothing():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert _prefetch_rows(a, 2) == a.sum() and _prefetch_rows(a[:, ::2], 1) == a[:, ::2].sum()
    assert "prefetcht0" in _prefetch_rows.inspect_asm(_prefetch_rows.signatures[0])


@njit
def _lowest_bits(words):
    out = np.empty(words.size, np.int64)
    for k in range(words.size):
        out[k] = lowest_bit(words[k])
    return out


@pytest.mark.parametrize("dtype, width", [(np.uint32, 32), (np.uint64, 64)])
def test_lowest_bit_is_the_index_of_the_lowest_set_bit(dtype, width):
    rng = np.random.default_rng(3)
    shifts = rng.integers(0, width, 500).astype(dtype)
    words = (rng.integers(0, 2**31, 500).astype(dtype) | dtype(1)) << shifts  # lowest set bit at `shifts`
    words = np.concatenate([words, np.array([0, 1, 1 << (width - 1)], dtype)])
    expected = np.concatenate([shifts.astype(np.int64), [width, 0, width - 1]])
    np.testing.assert_array_equal(_lowest_bits(words), expected)


@pytest.mark.parametrize("kind", ["power", "LinearStep", "ExpStep"])
@pytest.mark.parametrize("rows, cols, batch", [(20, 30, 3), (40, 400, 48)])
def test_fused_pulsed_update_equals_the_stages(kind, rows, cols, batch):
    """pulsed_update_kernel = train plan, pulse trains (x at offset 0, d at offset B), slot lists and
    coincidences run one by one: the same weights bit for bit and the same pulse count, noise included,
    whether the fused kernel runs its stages on the calling thread (small) or in parallel (large)."""
    cfg = SPREAD_CONFIGS[kind]
    rng = np.random.default_rng(7)
    large = batch * (rows + cols) > SERIAL_TRAIN_ELEMENTS
    x = rng.normal(0, 0.5, (batch, cols)).astype(np.float32)
    d = rng.normal(0, 0.05, (batch, rows)).astype(np.float32)
    x[2] = 0.0  # a sample without pulses
    arr = ConductanceArray(rows, cols, parse_device(cfg), seed=3)
    p = arr.params
    # the last case: one-slot trains (largest firing probability sqrt(lr max|x| max|d| / dw_min) = 0.3)
    one_slot_lr = float(0.09 * p.granularity / (np.abs(x).max(1) * np.abs(d).max(1)).max())
    cases = [
        (0.5, UpdateConfig()),
        (-0.2, UpdateConfig(update_bl_management=False, desired_bl=9)),
        (one_slot_lr, UpdateConfig()),
    ]
    for lr, ucfg in cases:
        w_staged = arr.w.copy()
        bl, xs, ds = plan_kernel(
            x, d, abs(lr), p.granularity, ucfg.desired_bl, ucfg.update_management, ucfg.update_bl_management
        )
        x_masks = pulse_trains_kernel(x, xs, bl, arr.seed, 5, 0)
        d_masks = pulse_trains_kernel(d, ds, bl, arr.seed, 5, batch)
        lists, counts = slot_lists_kernel(x_masks, x, int(bl.max()))
        n_staged = coincidence_update_kernel(
            w_staged, (lists, counts, d_masks), d, float(np.sign(lr)), p.kernel, arr.seed, 5
        )
        w_fused = arr.w.copy()
        settings = update_settings(lr, p.granularity, ucfg)
        n_fused = pulsed_update_kernel(w_fused, x, d, settings, p.kernel, arr.seed, 5, w_fused, NO_WRITE_NOISE, 0)
        assert n_staged > 0 and n_fused == n_staged
        if lr == one_slot_lr:
            assert bl.max() == 1
        else:
            assert (n_fused > SERIAL_PULSES) == large  # the branch this case is meant to take
        assert np.array_equal(w_fused, w_staged)


# -- expected_update_kernel ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["linear", "SoftBounds", "ExpStep", "tabulated"])
def test_expected_update_kernel_whole_pulses_without_noise(kind):
    """|dw| an exact multiple n of dw_min: w + n * dw_min * q(w), clipped (the step is evaluated at the start)."""
    cfg = dict(FAMILY_CONFIGS[kind], dw_min=2.0**-10)
    shape = (10, 12)
    lo, hi, rng, _, w0 = _random_start(cfg, shape, seed=3)
    p = _drawn_params(cfg, shape)
    n = rng.integers(-8, 9, shape)
    w = w0.copy()
    params = (*p.kernel[:6], 0.0, False)
    fired = expected_update_kernel(w, n * cfg["dw_min"], cfg["dw_min"], params, 1, 1, NO_SET)
    assert fired == np.abs(n).sum()
    w64 = w0.astype(float)
    step = cfg["dw_min"] * np.where(n > 0, ref_q(cfg, w64, True), ref_q(cfg, w64, False))
    want = np.clip(w64 + np.sign(n) * np.abs(n) * step, lo, hi)
    np.testing.assert_allclose(w, want.astype(np.float32), atol=1e-6)


def test_expected_update_kernel_noise_variance():
    """n whole pulses with multiplicative noise: variance n (sigma s)^2; additive: n (sigma dw)^2."""
    for mult in (True, False):
        cfg = dict(FAMILY_CONFIGS["SoftBounds"], dw_min=2.0**-10, mult_noise=mult)
        shape = (200, 200)
        p = _drawn_params(cfg, shape)
        w = np.full(shape, 0.1, np.float32)
        n = 4
        expected_update_kernel(
            w, np.full(shape, n * cfg["dw_min"]), cfg["dw_min"], (*p.kernel[:6], 0.3, not mult), 2, 1, NO_SET
        )
        s = cfg["dw_min"] * ref_q(cfg, 0.1, True)
        scale = s if mult else cfg["dw_min"]
        dws = w.astype(float) - float(np.float32(0.1))
        assert dws.mean() == pytest.approx(n * s, rel=0.01)
        assert dws.std() == pytest.approx(np.sqrt(n) * 0.3 * scale, rel=0.04)


# -- seeds and threads ----------------------------------------------------------------------------------


def _run_all(seed: int) -> list[np.ndarray]:
    """Pulses, pulsed updates (serial and parallel stages), expected update, zero shift and noisy reads
    (forward and transposed) on a noisy array with spreads."""
    dev = parse_device(SPREAD_CONFIGS["SoftBounds"])
    rng = np.random.default_rng(0)
    x = rng.normal(0, 0.5, (16, 48)).astype(np.float32)
    d = rng.normal(0, 0.05, (16, 40)).astype(np.float32)
    out = []
    a = ConductanceArray(40, 48, dev, seed=seed)
    a.pulse(rng.integers(-5, 6, a.shape))
    out.append(a.w.copy())
    a.update(x, d, 0.1, UpdateConfig(mode="pulsed"))
    out.append(a.w.copy())
    big = np.tile(x, (30, 1)), np.tile(d, (30, 1))  # 480 x 88 train elements: the parallel stages
    assert big[0].shape[0] * 88 > SERIAL_TRAIN_ELEMENTS
    a.update(*big, 0.1, UpdateConfig(mode="pulsed"))
    out.append(a.w.copy())
    a.update(x, d, 0.1, UpdateConfig(mode="expected"))
    out.append(a.w.copy())
    a.zero_shift(n_cycles=50)
    out.append(a.w.copy())
    out.append(a.read(x, PeripheryConfig()))
    out.append(a.read_transposed(d, PeripheryConfig()))
    return out


def test_same_seed_same_result_on_1_and_2_threads():
    """The kernels on 1 and on 2 threads give the same arrays."""
    before = numba.get_num_threads()
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba was started with a single thread")
    runs = []
    try:
        for n in (1, 2):
            numba.set_num_threads(n)
            runs.append(_run_all(seed=17))
    finally:
        numba.set_num_threads(before)
    for one, two in zip(*runs):
        assert np.array_equal(one, two)


@njit
def _thread_count():
    return kernel_thread_count()


def test_kernel_thread_count_is_numbas():
    """The cache-friendly thread count the pulsed update sizes its noise rings by."""
    before = numba.get_num_threads()
    try:
        for n in range(1, numba.config.NUMBA_NUM_THREADS + 1):
            numba.set_num_threads(n)
            assert _thread_count() == numba.get_num_threads() == n
    finally:
        numba.set_num_threads(before)


def test_different_seeds_differ():
    a, b = _run_all(seed=1), _run_all(seed=2)
    for u, v in zip(a, b):
        assert not np.array_equal(u, v)
