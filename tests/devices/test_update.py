"""Pulsed and expected updates: train_plan, pulse counts, the Analog Update (R1 Theorem 4), mode agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import FAMILY_CONFIGS, NO_SPREAD, ref_q

from aimc.devices import ConductanceArray, UpdateConfig, parse_device
from aimc.devices.update import train_plan

PULSED = UpdateConfig(mode="pulsed")
EXPECTED = UpdateConfig(mode="expected")


def _signed_uniform(rng, shape, lo=0.2, hi=1.0):
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


# -- train_plan (aihwkit 1.1.0's pulsed update) ---------------------------------------------------------


@pytest.mark.parametrize("bl_management", [True, False])
def test_train_plan_closed_form(bl_management):
    """aihwkit 1.1.0's PulsedUpdateMetaParameter::performUpdateManagement: A B BL dw_min = lr, balanced so that
    A max|d| = B max|x|, except where k = lr max|x| max|d| / dw_min exceeds desired_bl: then only the balance
    scale max|d| shrinks by desired_bl / k, so the largest x fires in every slot (B max|x| = 1) and
    A max|d| = k / desired_bl (the large d clip at probability 1, the small keep their share)."""
    rng = np.random.default_rng(0)
    x = rng.normal(0, 0.25, (6, 40)).astype(np.float32)  # the arrays hand float32 to train_plan
    d = (rng.normal(0, 1e-3, (6, 30)) * np.array([1, 3, 10, 30, 100, 300])[:, None]).astype(np.float32)
    lr, dw_min, bl_max = 0.1, 1e-3, 31
    cfg = UpdateConfig(desired_bl=bl_max, update_bl_management=bl_management)
    bl, xs, ds = train_plan(x, d, lr, dw_min, cfg)
    xm, dm = np.abs(x).max(1).astype(float), np.abs(d).max(1).astype(float)
    k = lr * xm * dm / dw_min
    assert (k < bl_max).any() and (k > bl_max).any()  # both regimes present
    want_bl = np.minimum(np.ceil(k), bl_max) if bl_management else np.full(6, bl_max)
    np.testing.assert_array_equal(bl, want_bl)
    # one coincidence per slot with probability p_x p_d (before clipping at 1): mean count lr |x||d| / dw_min
    np.testing.assert_allclose(xs * ds * bl * dw_min, lr, rtol=1e-12)
    sat = k > bl_max
    np.testing.assert_allclose((xs * xm)[sat], 1.0, rtol=1e-12)
    np.testing.assert_allclose((ds * dm)[sat], k[sat] / bl_max, rtol=1e-12)
    np.testing.assert_allclose((xs * xm)[~sat], (ds * dm)[~sat], rtol=1e-12)
    assert np.all(xs * xm <= 1 + 1e-12)


def test_train_plan_without_management_is_fixed():
    """Both managements off: BL = desired_bl and A = B = sqrt(lr / (dw_min BL)) whatever x and d (aihwkit
    1.1.0's calculateBlAB with fixed_BL); probabilities above 1 clip, no other saturation factor."""
    rng = np.random.default_rng(1)
    x, d = rng.normal(0, 1, (4, 8)), rng.normal(0, 1, (4, 5))
    cfg = UpdateConfig(desired_bl=7, update_management=False, update_bl_management=False)
    bl, xs, ds = train_plan(x, d, 0.3, 1e-3, cfg)
    np.testing.assert_array_equal(bl, 7)
    np.testing.assert_allclose(xs, np.sqrt(0.3 / (1e-3 * 7)), rtol=1e-12)
    np.testing.assert_allclose(ds, xs, rtol=1e-12)


def test_train_plan_bl_management_turns_update_management_on():
    """aihwkit 1.1.0 (PulsedUpdateMetaParameter::initialize) balances the trains whenever BL management is on."""
    rng = np.random.default_rng(2)
    x, d = rng.normal(0, 1, (4, 8)).astype(np.float32), rng.normal(0, 1e-3, (4, 5)).astype(np.float32)
    on = train_plan(x, d, 0.1, 1e-3, UpdateConfig())
    off = train_plan(x, d, 0.1, 1e-3, UpdateConfig(update_management=False))
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)


def test_train_plan_inactive_samples_fire_nothing():
    x = np.ones((3, 4))
    x[1] = 0.0
    d = np.ones((3, 5)) * 1e-2
    d[2] = 0.0
    bl, _, _ = train_plan(x, d, 0.1, 1e-3, PULSED)
    assert bl[0] > 0 and bl[1] == 0 and bl[2] == 0


@pytest.mark.parametrize("mode", ["pulsed", "expected"])
@pytest.mark.parametrize("where", ["x", "d"])
@pytest.mark.parametrize("bad", [math.nan, -math.inf])
def test_update_with_a_non_finite_input_raises_and_leaves_the_weights(mode, where, bad):
    rng = np.random.default_rng(3)
    arr = _ideal_array()
    x, d = rng.normal(0, 0.25, (4, 40)), rng.normal(0, 1e-2, (4, 48))
    (x if where == "x" else d)[2, 7] = bad
    w = arr.w.copy()
    with pytest.raises(ValueError, match="NaN or an infinity"):
        arr.update(x, d, 0.1, UpdateConfig(mode=mode))
    np.testing.assert_array_equal(arr.w, w)


# -- pulse counts -----------------------------------------------------------------------------------------


def _ideal_array(shape=(48, 40), seed=0):
    # wide bounds so no pulse is lost to clipping; the count is what is tested
    dev = parse_device(dict(kind="ideal", tau=100.0, dw_min=1e-3))
    return ConductanceArray(*shape, dev, seed=seed)


@pytest.mark.parametrize("lr,d_std", [(0.01, 2e-4), (0.1, 3.75e-3), (0.5, 2e-2)])
def test_mean_pulse_count_is_lr_sum_x_sum_d_over_dw_min(lr, d_std):
    """Expected pulses per sample lr * sum|x| * sum|d| / dw_min when the trains do not saturate."""
    rng = np.random.default_rng(1)
    arr = _ideal_array()
    x = rng.normal(0, 0.25, (8, 40))
    d = rng.normal(0, d_std, (8, 48))
    k = lr * np.abs(x).max(1) * np.abs(d).max(1) / 1e-3
    assert k.max() < 31
    want = lr * (np.abs(x).sum(1) * np.abs(d).sum(1)).sum() / 1e-3
    reps = 60
    fired = np.array([arr.update(x, d, lr, PULSED) for _ in range(reps)], float)
    # elements sharing a train are correlated: use the empirical spread of the totals
    assert abs(fired.mean() - want) < 5 * fired.std() / math.sqrt(reps) + 1e-9, (fired.mean(), want)
    if want > 500:
        assert fired.mean() == pytest.approx(want, rel=0.05)
    assert arr.pulses == fired.sum()


def test_saturated_trains_clip_the_large_d_only():
    """k = lr max|x| max|d| / dw_min > BL (aihwkit 1.1.0): x keeps its full scale, p_x = |x_j| / max|x|, and
    each d_i fires with p_d = min(1, (k / BL) |d_i| / max|d|): the mean pulse count of element (i, j) is
    BL p_x p_d per sample, so only the large d_i are clipped."""
    rng = np.random.default_rng(2)
    arr = _ideal_array()
    x = rng.normal(0, 0.25, (4, 40))
    d = rng.normal(0, 0.05, (4, 48))
    lr = 1.0
    xm, dm = np.abs(x).max(1), np.abs(d).max(1)
    k = lr * xm * dm / 1e-3
    assert k.min() > 31
    p_x = np.abs(x) / xm[:, None]
    p_d = np.minimum(1.0, (k / 31)[:, None] * np.abs(d) / dm[:, None])
    assert (p_d < 1).mean() > 0.3 and (p_d == 1).any()  # both the clipped and the kept share present
    want = (31 * p_x.sum(1) * p_d.sum(1)).sum()
    fired = np.array([arr.update(x, d, lr, PULSED) for _ in range(40)], float)
    assert fired.mean() == pytest.approx(want, rel=0.01)
    # no element receives more than BL pulses from one sample
    one = ConductanceArray(48, 40, parse_device(dict(kind="ideal", tau=100.0, dw_min=1e-3)), seed=3)
    one.update(x[:1], d[:1], lr, PULSED)
    assert np.abs(one.w).max() <= 31 * 1e-3 + 1e-6
    # the expected mode applies the same mean: dw_min BL sign(d_i x_j) p_d p_x per sample, down for d x > 0
    exp = _ideal_array(seed=4)
    exp.update(x, d, lr, EXPECTED)
    want_dw = -1e-3 * 31 * (np.sign(d) * p_d).T @ (np.sign(x) * p_x)
    np.testing.assert_allclose(exp.w, want_dw, atol=1e-3 + 1e-6)


def test_without_management_a_probability_above_one_fires_every_slot():
    """Managements off, BL 1, lr 1, x = d = 1 (aihwkit 1.1.0): A = B = sqrt(lr / dw_min) > 1 clips to
    probability 1, so every update fires exactly one down pulse, no other saturation factor."""
    arr = _ideal_array(shape=(1, 1))
    cfg = UpdateConfig(desired_bl=1, update_management=False, update_bl_management=False)
    fired = [arr.update(np.ones((1, 1)), np.ones((1, 1)), 1.0, cfg) for _ in range(50)]
    assert fired == [1] * 50
    assert arr.w[0, 0] == pytest.approx(-50e-3, rel=1e-5)


# -- Analog Update (R1 eq. 5, Theorem 4) ---------------------------------------------------------------


def _analog_update(cfg, w0, dW):
    """W + dW F(W) - |dW| G(W): dW q_plus(W) for dW >= 0, dW q_minus(W) for dW < 0, with the responses taken
    relative to the granularity a pulse counts for (dw_min, or aihwkit's value for PowStep and ExpStep)."""
    dev = parse_device(cfg)
    scale = dev.dw_min / dev.granularity
    qp, qm = scale * ref_q(cfg, w0, True), scale * ref_q(cfg, w0, False)
    F, G = (qm + qp) / 2, (qm - qp) / 2
    return w0 + dW * F - np.abs(dW) * G


UPDATE_KINDS = ["linear", "power", "exponential", "SoftBounds", "ExpStep", "PowStep", "tabulated"]


def _repeat_updates(cfg, w0, x, d, lr, mode, reps, seed=7, copies=3):
    """Changes of every element after one update from the same start, shape (calls, copies^2, out, in).

    The array holds copies x copies replicas of the (out, in) block (x and d tiled), each with its own pulse
    trains and noise, so one call gives copies^2 samples per element; replicas of one call share trains, so
    standard errors come from the spread of the per-call means (`_stats`)."""
    rows, cols = d.shape[1], x.shape[1]
    xt, dt = np.tile(x, (1, copies)), np.tile(d, (1, copies))
    arr = ConductanceArray(rows * copies, cols * copies, parse_device(cfg), seed=seed)
    calls = -(-reps // copies**2)
    out = np.empty((calls, copies, rows, copies, cols))
    for r in range(calls):
        arr.w[...] = np.float32(w0)
        arr.update(xt, dt, lr, mode)
        out[r] = (arr.w.astype(float) - float(np.float32(w0))).reshape(copies, rows, copies, cols)
    return out.transpose(0, 1, 3, 2, 4).reshape(calls, copies**2, rows, cols)


def _stats(dws):
    """(mean, standard error of the mean, variance) per element of `_repeat_updates` samples."""
    block = dws.mean(1)
    return dws.mean((0, 1)), block.std(0, ddof=1) / math.sqrt(len(block)), dws.reshape(-1, *dws.shape[2:]).var(0)


def _pooled(dws, sel):
    """Mean and standard error of the sum of the changes over the elements `sel`."""
    per_call = dws.mean(1)[:, sel].sum(1)
    return per_call.mean(), per_call.std(ddof=1) / math.sqrt(len(per_call))


@pytest.mark.parametrize("kind", UPDATE_KINDS)
def test_mean_pulsed_update_is_the_analog_update(kind):
    cfg = dict(FAMILY_CONFIGS[kind], dw_min_std=0.3)
    rng = np.random.default_rng(3)
    x = _signed_uniform(rng, (1, 48))
    d = _signed_uniform(rng, (1, 40))
    lr = 3e-3  # at most 3 pulses per element: small steps
    w0 = 0.1
    dW = -lr * d.T @ x
    want = _analog_update(cfg, w0, dW) - w0
    dws = _repeat_updates(cfg, w0, x, d, lr, PULSED, reps=300)
    mean, se, _ = _stats(dws)
    assert np.abs((mean - want) / se).max() < 6
    # pooled per direction (the net sum cancels)
    for sel in (dW > 0, dW < 0):
        total, total_se = _pooled(dws, sel)
        assert abs(total - want[sel].sum()) < 5 * total_se
        assert total == pytest.approx(want[sel].sum(), rel=0.03)


def test_pulsed_applies_samples_one_after_another():
    """For a batch, the pulsed mean is the sum of per-sample Analog Updates (signs per sample), while the
    expected mode applies the Analog Update to the batch-summed dW."""
    cfg = dict(FAMILY_CONFIGS["SoftBounds"], up_down=0.3)
    rng = np.random.default_rng(4)
    x = _signed_uniform(rng, (2, 32))
    d = _signed_uniform(rng, (2, 24))
    lr, w0, reps = 3e-3, 0.3, 1000
    per_sample = sum(_analog_update(cfg, w0, -lr * np.outer(d[b], x[b])) - w0 for b in range(2))
    summed = _analog_update(cfg, w0, -lr * d.T @ x) - w0
    mixed = np.sign(np.outer(d[0], x[0])) != np.sign(np.outer(d[1], x[1]))
    gap = np.abs(per_sample - summed)[mixed].mean()
    results = {}
    for mode in (PULSED, EXPECTED):
        mean, se, _ = _stats(_repeat_updates(cfg, w0, x, d, lr, mode, reps))
        results[mode.mode] = (mean, se)
    (pulsed, se_p), (expected, se_e) = results["pulsed"], results["expected"]
    assert gap > 5 * max(se_p.max(), se_e.max())  # the two models are told apart by this test
    assert np.abs((pulsed - per_sample) / se_p).max() < 6
    assert np.abs((expected - summed) / se_e).max() < 6
    assert np.abs(pulsed - summed)[mixed].mean() > 0.5 * gap


@pytest.mark.parametrize("multiplicative", [True, False])
def test_pulsed_and_expected_same_mean_and_noise_spread(multiplicative):
    """Both modes: mean = Analog Update; variance = count variance s^2 + cycle noise. The count variance is
    Binomial(BL, q/BL) for pulse trains and f(1 - f) for stochastic rounding (f = frac(q)); the cycle noise
    part, s^2 sigma^2 q (multiplicative) or dw^2 sigma^2 q (additive), is the same in both modes."""
    sigma = 0.5
    cfg = dict(FAMILY_CONFIGS["SoftBounds"], dw_min_std=sigma, mult_noise=multiplicative)
    rng = np.random.default_rng(5)
    x = _signed_uniform(rng, (1, 40))
    d = _signed_uniform(rng, (1, 32))
    lr, w0, reps, dw_min = 4e-3, 0.1, 400, cfg["dw_min"]
    dW = -lr * d.T @ x
    q = np.abs(dW) / dw_min  # mean number of pulses per element
    up = dW > 0
    s = np.where(up, ref_q(cfg, w0, True), ref_q(cfg, w0, False)) * dw_min  # mean step at w0
    bl = math.ceil(lr * np.abs(x).max() * np.abs(d).max() / dw_min)
    scale = s if multiplicative else np.where(up, 1.0, 1 - cfg["up_down"]) * dw_min
    noise_var = sigma**2 * scale**2 * q
    frac = q - np.floor(q)
    var_pulsed = s**2 * q * (1 - q / bl) + noise_var
    var_expected = s**2 * frac * (1 - frac) + noise_var
    want_mean = _analog_update(cfg, w0, dW) - w0
    for mode, var in ((PULSED, var_pulsed), (EXPECTED, var_expected)):
        mean, se, emp_var = _stats(_repeat_updates(cfg, w0, x, d, lr, mode, reps))
        assert np.abs((mean - want_mean) / se).max() < 6, mode.mode
        # pooled over elements: the empirical variance matches the closed form
        assert emp_var.sum() == pytest.approx(var.sum(), rel=0.05), mode.mode
        noise_part = emp_var.sum() - (var - noise_var).sum()
        assert noise_part == pytest.approx(noise_var.sum(), rel=0.1), mode.mode


def test_expected_update_rounds_stochastically_to_whole_pulses():
    """sigma = 0, constant step: every element moves by a whole number of steps, floor or ceil of
    |dW| / dw_min, with the mean |dW|."""
    dw_min = 2.0**-10
    dev = parse_device(dict(kind="ideal", tau=10.0, dw_min=dw_min))
    arr = ConductanceArray(32, 32, dev, seed=0)
    rng = np.random.default_rng(6)
    x = rng.uniform(0.1, 1.0, (1, 32))
    d = -rng.uniform(0.1, 1.0, (1, 32))
    lr = 2.7 * dw_min
    dW = -lr * d.T @ x
    reps = 60
    total = np.zeros(arr.shape)
    for _ in range(reps):
        arr.w[...] = 0
        arr.update(x, d, lr, EXPECTED)
        n = arr.w / dw_min
        assert np.allclose(n, np.rint(n), atol=1e-4)
        assert np.all((n >= np.floor(dW / dw_min) - 1e-4) & (n <= np.ceil(dW / dw_min) + 1e-4))
        total += arr.w
    assert (total / reps).mean() == pytest.approx(dW.mean(), rel=0.01)


@pytest.mark.parametrize("mode", [PULSED, EXPECTED])
def test_negative_lr_is_the_update_with_d_negated(mode):
    """W -= lr d^T x is symmetric in the signs of lr and d: the same seed gives the same array."""
    dev = parse_device(dict(FAMILY_CONFIGS["SoftBounds"], dw_min_std=0.3))
    rng = np.random.default_rng(8)
    x = rng.normal(0, 0.5, (4, 20)).astype(np.float32)
    d = rng.normal(0, 0.05, (4, 16)).astype(np.float32)
    a, b = ConductanceArray(16, 20, dev, seed=1), ConductanceArray(16, 20, dev, seed=1)
    na, nb = a.update(x, d, -0.1, mode), b.update(x, -d, 0.1, mode)
    assert na == nb > 0
    assert np.array_equal(a.w, b.w)
    c = ConductanceArray(16, 20, dev, seed=1)
    c.update(x, d, 0.1, mode)
    assert np.mean(np.sign(c.w) == -np.sign(a.w)) > 0.9  # opposite directions


def test_zero_inputs_or_lr_fire_nothing():
    arr = _ideal_array()
    x = np.ones((2, 40), np.float32)
    d = np.ones((2, 48), np.float32) * 1e-2
    assert arr.update(np.zeros_like(x), d, 0.1) == 0
    assert arr.update(x, np.zeros_like(d), 0.1) == 0
    assert arr.update(x, d, 0.0) == 0
    assert arr.update(x, d, 0.0, EXPECTED) == 0
    assert np.all(arr.w == 0)


# -- the granularity a pulse counts for (aihwkit 1.1.0's calcWeightGranularity) ------------------------

PIECEWISE = dict(piecewise_up=[1.2, 0.8, 0.5, 0.3, 0.2], piecewise_down=[0.2, 0.3, 0.6, 0.9, 1.1])


def test_granularity_is_aihwkits():
    """Values of aihwkit 1.1.0's calcWeightGranularity (rpu_powstep_device.h, rpu_expstep_device.h,
    rpu_piecewisestep_device.h); dw_min for the other families."""
    g = lambda **c: parse_device(c).granularity  # noqa: E731
    assert g(kind="PowStep", dw_min=0.002, pow_gamma=1.5) == pytest.approx(0.002 * 0.5**1.5)
    down0 = 1 - 0.36833 * math.exp(-12.78785 * 0.2425)  # aihwkit's default ExpStep down step at w = 0
    assert g(kind="ExpStep", dw_min=0.002) == pytest.approx(0.002 * down0)
    assert g(kind="ExpStep", dw_min=0.002, up_down=0.2) == pytest.approx(0.002 * 0.8 * down0)
    assert g(kind="ExpStep", dw_min=0.002, A_down=2.0, gamma_down=0.0) == 0.002  # no down step at 0: dw_min
    assert g(kind="PiecewiseStep", dw_min=0.002, **PIECEWISE) == pytest.approx(0.002 * 0.5)
    assert g(kind="PiecewiseStep", dw_min=0.002, piecewise_up=[1, 0, 1], piecewise_down=[1, 1, 1]) == 0.002
    for kind in ("ConstantStep", "LinearStep", "SoftBounds", "linear", "power", "exponential", "ideal"):
        assert g(kind=kind, dw_min=0.002) == 0.002


@pytest.mark.parametrize(
    "kind, extra, slopes",
    [
        ("PowStep", dict(pow_gamma=2.0, pow_gamma_dtod=0.0), (1.0, 1.0)),
        ("ExpStep", dict(gamma_up=0.5, gamma_down=0.5), (None, 1.0)),
        ("PiecewiseStep", PIECEWISE, (1.0, None)),
    ],
)
def test_pulses_are_counted_in_the_midpoint_step(kind, extra, slopes):
    """At w = 0, the midpoint of symmetric bounds, the mean pulsed update of one sample by a family whose
    granularity is its midpoint step (PowStep both ways, ExpStep down, PiecewiseStep up) is -lr d x^T
    (one sample: every pulse of an element goes one way)."""
    rng = np.random.default_rng(5)
    x = _signed_uniform(rng, (1, 256))
    d = _signed_uniform(rng, (1, 256))
    lr = 1e-4  # under one pulse per element: w stays at 0
    arr = ConductanceArray(256, 256, parse_device(dict(kind=kind, dw_min=0.001, **NO_SPREAD, **extra)), seed=1)
    want = -lr * d.T @ x
    mean = np.zeros_like(want)
    for _ in range(1000):  # a row (column) shares its d (x) train: 512 independent trains per update
        arr.w[...] = 0.0
        arr.update(x, d, lr, PULSED)
        mean += arr.w / 1000
    for slope, sel in zip(slopes, (want > 0, want < 0)):
        if slope is not None:
            assert (mean[sel] @ want[sel]) / (want[sel] @ want[sel]) == pytest.approx(slope, rel=0.02)


def test_steep_exp_step_without_amplitude_pulses_like_a_constant_step():
    """ExpStep with A_up = A_down = 0 has the constant step dw_min wherever gamma z lies: the pulsed update
    (float32 pulse arithmetic) equals ConstantStep's on the same trains, also where gamma z is beyond
    float32's exp range (e^88), which the step's exponential is kept clear of."""
    bounds = dict(w_max=0.6, w_min=-0.6, dw_min=0.01, **NO_SPREAD)
    steep = parse_device(dict(kind="ExpStep", A_up=0.0, A_down=0.0, gamma_up=300.0, gamma_down=300.0, **bounds))
    flat = parse_device(dict(kind="ConstantStep", **bounds))
    rng = np.random.default_rng(4)
    x = rng.normal(0, 0.5, (8, 12)).astype(np.float32)
    d = rng.normal(0, 0.5, (8, 6)).astype(np.float32)
    a, b = ConductanceArray(6, 12, steep, seed=2), ConductanceArray(6, 12, flat, seed=2)
    a.w[...] = b.w[...] = rng.uniform(-0.55, 0.55, (6, 12)).astype(np.float32)
    assert a.update(x, d, 0.5, UpdateConfig()) == b.update(x, d, 0.5, UpdateConfig()) > 0
    np.testing.assert_array_equal(a.w, b.w)
