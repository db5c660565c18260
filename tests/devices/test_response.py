"""Response families: single-pulse statistics, symmetric points, states and bounds, against closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    FAMILY_CONFIGS,
    NO_SPREAD,
    SPREAD_CONFIGS,
    ref_bounds,
    ref_multiplicative,
    ref_q,
    ref_step_scale,
)
from scipy import stats
from scipy.optimize import brentq

from aimc.devices import DEVICE_KINDS, ConductanceArray, parse_device, soft_bounds_pmax
from aimc.devices.response_step import DW_DOWN, DW_UP, GAMMA_DOWN, GAMMA_UP, W_MAX, W_MIN


def test_every_kind_has_a_reference_config():
    assert set(FAMILY_CONFIGS) == set(DEVICE_KINDS) == set(SPREAD_CONFIGS)


def _probe_weights(cfg):
    lo, hi = ref_bounds(cfg)
    return lo + np.array([0.2, 0.5, 0.75]) * (hi - lo)


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_q_F_G_match_the_family_formula(kind):
    cfg = FAMILY_CONFIGS[kind]
    dev = parse_device(cfg)
    lo, hi = ref_bounds(cfg)
    w = np.linspace(lo, hi, 41)
    qp, qm = ref_q(cfg, w, True), ref_q(cfg, w, False)
    np.testing.assert_allclose(dev.q_plus(w), qp, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dev.q_minus(w), qm, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dev.F(w), (qm + qp) / 2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dev.G(w), (qm - qp) / 2, rtol=1e-10, atol=1e-12)
    assert dev.bounds == pytest.approx((lo, hi))
    assert dev.n_states == pytest.approx((hi - lo) / cfg["dw_min"])


def _noisy(cfg: dict, sigma: float, multiplicative: bool | None) -> dict:
    """cfg with cycle noise sigma, in the requested form where the family lets one choose."""
    out = dict(cfg, dw_min_std=sigma)
    if multiplicative is None:
        return out
    if cfg["kind"] in ("ideal", "linear", "power", "exponential", "tabulated"):
        out["noise"] = "multiplicative" if multiplicative else "additive"
    elif cfg["kind"] in ("LinearStep", "SoftBounds"):
        out["mult_noise"] = multiplicative
    return out


NOISE_CASES = [(k, None) for k in DEVICE_KINDS] + [
    (k, m)
    for k in ("ideal", "linear", "power", "exponential", "tabulated", "LinearStep", "SoftBounds")
    for m in (True, False)
]


@pytest.mark.parametrize("kind,multiplicative", NOISE_CASES)
@pytest.mark.parametrize("up", [True, False])
def test_single_pulse_mean_and_variance(kind, multiplicative, up):
    """Many elements at the same w, one pulse each: mean dw_min q(w), variance from the noise form."""
    sigma = 0.3
    cfg = _noisy(FAMILY_CONFIGS[kind], sigma, multiplicative)
    arr = ConductanceArray(200, 200, parse_device(cfg), seed=11)
    n = arr.w.size
    for w0 in _probe_weights(cfg):
        w0 = np.float32(w0)
        arr.w[...] = w0
        arr.pulse(np.full(arr.shape, 1 if up else -1, np.int64))
        step = (arr.w.astype(np.float64) - float(w0)) * (1 if up else -1)
        mean = cfg["dw_min"] * float(ref_q(cfg, float(w0), up))
        if ref_multiplicative(cfg):
            std = sigma * mean
        else:
            std = sigma * ref_step_scale(cfg, up)
        assert abs(step.mean() - mean) < 5 * std / np.sqrt(n) + 1e-7, (w0, step.mean(), mean)
        assert step.std() == pytest.approx(std, rel=0.04, abs=2e-8), (w0, step.std(), std)


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_noise_free_pulse_is_exactly_the_element_step(kind):
    cfg = FAMILY_CONFIGS[kind]
    arr = ConductanceArray(3, len(_probe_weights(cfg)), parse_device(cfg), seed=0)
    w0 = _probe_weights(cfg).astype(np.float32)
    for up in (True, False):
        arr.w[...] = w0
        arr.pulse(np.full(arr.shape, 1 if up else -1, np.int64))
        want = w0 + (1 if up else -1) * cfg["dw_min"] * ref_q(cfg, w0.astype(float), up)
        np.testing.assert_allclose(arr.w[0], want, atol=1e-7)


# -- symmetric point ------------------------------------------------------------------------------------


def _ref_symmetric_point(cfg: dict) -> float:
    """Closed form where the family has one, else a root of the reference q_plus - q_minus."""
    kind = cfg["kind"]
    if kind == "linear":
        return cfg["c"] * cfg["tau"]
    if kind == "power":
        # (1 + c)(1 - u)^g = (1 - c)(1 + u)^g, u = w / tau  =>  u = (r - 1) / (r + 1), r = ((1+c)/(1-c))^(1/g)
        c, g, tau = cfg["c"], cfg["gamma"], cfg["tau"]
        r = ((1 + c) / (1 - c)) ** (1 / g)
        return tau * (r - 1) / (r + 1)
    if kind == "SoftBounds":
        ud = cfg["up_down"]
        up, dn = 1 + min(ud, 0), 1 - max(ud, 0)
        return (up - dn) / (up / cfg["w_max"] - dn / cfg["w_min"])
    lo, hi = ref_bounds(cfg)
    return brentq(lambda w: ref_q(cfg, w, True) - ref_q(cfg, w, False), lo, hi, xtol=1e-14)


SYM_KINDS = [k for k in DEVICE_KINDS if k not in ("ideal", "ConstantStep")]


@pytest.mark.parametrize("kind", SYM_KINDS)
def test_symmetric_point_matches_closed_form_or_root(kind):
    cfg = FAMILY_CONFIGS[kind]
    want = _ref_symmetric_point(cfg)
    dev = parse_device(cfg)
    assert dev.symmetric_point() == pytest.approx(want, abs=1e-9)
    arr = ConductanceArray(2, 3, dev, seed=0)
    np.testing.assert_allclose(arr.symmetric_points(), want, atol=1e-7)  # float32 element parameters


@pytest.mark.parametrize("kind", SYM_KINDS)
def test_alternating_pulses_settle_at_the_symmetric_point(kind):
    cfg = FAMILY_CONFIGS[kind]
    dev = parse_device(cfg)
    arr = ConductanceArray(2, 2, dev, seed=0)
    arr.zero_shift(n_cycles=int(8 * dev.n_states))
    assert np.abs(arr.reference - _ref_symmetric_point(cfg)).max() <= cfg["dw_min"]
    assert np.all(arr.weights == 0)


def test_soft_bounds_symmetric_point_per_drawn_element():
    """With spreads on, each element settles at (dw_up - dw_down) / (dw_up/b_max - dw_down/b_min)."""
    cfg = dict(kind="SoftBounds", up_down=0.05, up_down_dtod=0.05, dw_min=1e-3, dw_min_std=0.0)
    arr = ConductanceArray(6, 8, parse_device(cfg), seed=3)
    ep = arr.params.ep
    up, dn, hi, lo = ep[..., DW_UP], ep[..., DW_DOWN], ep[..., W_MAX], ep[..., W_MIN]
    want = (up - dn) / (up / hi - dn / lo)
    assert np.ptp(want) > 10 * cfg["dw_min"]  # the spread matters
    np.testing.assert_allclose(arr.symmetric_points(), want, atol=1e-9)
    arr.zero_shift(n_cycles=20_000)
    assert np.abs(arr.reference - want).max() <= cfg["dw_min"]


@pytest.mark.parametrize("kind", ["linear", "power", "exponential"])
def test_paper_family_symmetric_point_zero_without_asymmetry(kind):
    cfg = dict(FAMILY_CONFIGS[kind], c=0.0)
    assert parse_device(cfg).symmetric_point() == pytest.approx(0.0, abs=1e-12)


def test_constant_step_has_no_symmetric_point_or_drifts_to_a_bound():
    assert np.isnan(parse_device(dict(kind="ideal", c=0.0)).symmetric_point())
    cfg = FAMILY_CONFIGS["ideal"]  # c = 0.2: up steps win everywhere
    arr = ConductanceArray(2, 2, parse_device(cfg), seed=0)
    np.testing.assert_allclose(arr.symmetric_points(), cfg["tau"])
    arr.zero_shift(n_cycles=2000)  # ends on a down pulse: one down step below the bound
    np.testing.assert_allclose(arr.w, cfg["tau"] - cfg["dw_min"] * (1 - cfg["c"]), atol=1e-6)


def test_zero_shift_default_cycles_reach_the_symmetric_point():
    cfg = dict(kind="linear", tau=0.6, c=0.2, dw_min=1e-3)  # w_sym = 0.12 = 120 dw_min from the start
    arr = ConductanceArray(2, 2, parse_device(cfg), seed=0)
    arr.zero_shift()
    assert np.abs(arr.reference - 0.12).max() <= cfg["dw_min"]


def test_zero_shift_default_brings_every_element_to_its_symmetric_point():
    """aihwkit's default spreads (dw_min_dtod 0.3): every element within one of its own steps of
    (dw_up - dw_down) / (dw_up/b_max - dw_down/b_min)."""
    cfg = dict(kind="SoftBounds", up_down=0.1, up_down_dtod=0.1, dw_min=1e-3, dw_min_std=0.0)
    arr = ConductanceArray(32, 32, parse_device(cfg), seed=3)
    ep = arr.params.ep
    up, dn, hi, lo = ep[..., DW_UP], ep[..., DW_DOWN], ep[..., W_MAX], ep[..., W_MIN]
    want = (up - dn) / (up / hi - dn / lo)
    ok = (lo < 0) & (hi > 0)  # the closed form needs bounds around 0 (else one step vanishes: a bound wins)
    assert ok.sum() > 1000
    arr.zero_shift()
    assert np.all(np.abs(arr.reference - want)[ok] <= np.maximum(up, dn)[ok] + 1e-7)


# -- states and bounds ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        dict(kind="ideal", tau=1.0, dw_min=2.0 / 1200),
        dict(kind="ideal", tau=0.5, dw_min=0.1),
        dict(
            kind="ConstantStep",
            w_max=1.0,
            w_min=-1.0,
            dw_min=0.0016,
            dw_min_std=0.0,
            dw_min_dtod=0.0,
            w_max_dtod=0.0,
            w_min_dtod=0.0,
            up_down_dtod=0.0,
        ),
    ],
)
def test_constant_step_counts_its_states(cfg):
    """From w_min, n_states = (w_max - w_min) / dw_min up pulses reach w_max, and one fewer do not."""
    lo, hi = ref_bounds(cfg)
    n_states = round((hi - lo) / cfg["dw_min"])
    assert parse_device(cfg).n_states == pytest.approx(n_states)
    # element k receives k up pulses (one call, pulses applied one at a time) after being driven to w_min
    ks = np.arange(n_states - 3, n_states + 4)
    arr = ConductanceArray(1, len(ks), parse_device(cfg), seed=0)
    arr.pulse(np.full(arr.shape, -(n_states + 5), np.int64))
    assert np.all(arr.w == np.float32(lo))
    arr.pulse(ks[None, :])
    reached = arr.w[0] >= np.float32(hi) - 1e-6 * (hi - lo)
    # round-off may leave the n-th pulse a hair short of the bound, hence n or n + 1
    assert ks[reached].min() in (n_states, n_states + 1)
    assert np.all(reached[ks >= n_states + 1]) and not np.any(reached[ks < n_states])
    # float32 pulses (as aihwkit): each addition rounds by at most half an ulp, 6e-8 for |w| <= 1
    np.testing.assert_allclose(
        arr.w[0, ks < n_states], lo + ks[ks < n_states] * cfg["dw_min"], atol=6e-8 * n_states + 1e-7
    )
    # single pulses, one call each, from w_min: the same count in float32 storage
    one = ConductanceArray(1, 1, parse_device(cfg), seed=0)
    one.pulse(np.full((1, 1), -(n_states + 5), np.int64))
    count = 0
    step = np.ones((1, 1), np.int64)
    while one.w[0, 0] < np.float32(hi) - 1e-6 and count < n_states + 5:
        one.pulse(step)
        count += 1
    assert count in (n_states, n_states + 1)


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_bounds_never_broken_under_random_pulses(kind):
    arr = ConductanceArray(16, 16, parse_device(SPREAD_CONFIGS[kind]), seed=5)
    lo, hi = arr.bounds
    lo32, hi32 = lo.astype(np.float32), hi.astype(np.float32)
    rng = np.random.default_rng(0)
    near_lo = near_hi = False
    for phase in range(60):
        drive = rng.integers(-40, 41, size=arr.shape)
        if phase < 40:  # push against the upper, then the lower bound
            drive = (1 if phase < 20 else -1) * rng.integers(0, 400, size=arr.shape)
        arr.pulse(drive)
        assert np.all(arr.w >= lo32) and np.all(arr.w <= hi32)
        near_hi |= bool(np.any(hi - arr.w < 0.02 * (hi - lo)))
        near_lo |= bool(np.any(arr.w - lo < 0.02 * (hi - lo)))
    assert np.isfinite(arr.w).all()
    assert near_lo and near_hi  # the pulses did reach both bounds


def test_spreads_are_drawn_per_element():
    cfg = SPREAD_CONFIGS["SoftBounds"]
    a = ConductanceArray(16, 16, parse_device(cfg), seed=1)
    ep = a.params.ep
    gain = (ep[..., DW_UP] + ep[..., DW_DOWN]) / (2 * cfg["dw_min"])  # up_down bias cancels in the mean
    assert np.std(gain) == pytest.approx(0.3, rel=0.2)  # aihwkit default dw_min_dtod
    assert np.std(ep[..., W_MAX] / 0.6) == pytest.approx(0.3, rel=0.2)
    b = ConductanceArray(16, 16, parse_device(cfg), seed=1)
    c = ConductanceArray(16, 16, parse_device(cfg), seed=2)
    assert np.array_equal(a.params.ep, b.params.ep)
    assert not np.array_equal(a.params.ep, c.params.ep)


def test_bound_spread_follows_enforce_consistency():
    """aihwkit 1.1.0's binary (checked on 250,000 elements of its SoftBoundsDevice): with enforce_consistency
    the drawn bounds are b_max = |w_max (1 + d xi)| and b_min = -|w_min (1 + d xi')| (swapped first where
    they cross); without it crossed bounds stick the element at their midpoint, a fraction
    P(xi + xi' < -2/d) = Phi(-sqrt(2)/d) of them for symmetric bounds."""
    d, tau, n = 3.0, 0.1, 64
    cfg = dict(kind="SoftBounds", w_max=tau, w_min=-tau, w_max_dtod=d, w_min_dtod=d, dw_min=1e-2)
    lo, hi = ConductanceArray(n, n, parse_device(cfg), seed=0).bounds
    assert (hi >= 0).all() and (lo <= 0).all()
    mean_abs = tau * (d * np.sqrt(2 / np.pi) * np.exp(-1 / (2 * d * d)) + 1 - 2 * stats.norm.cdf(-1 / d))
    assert abs(hi.mean() - mean_abs) < 5 * hi.std() / n and abs(-lo.mean() - mean_abs) < 5 * lo.std() / n

    arr = ConductanceArray(n, n, parse_device(dict(cfg, enforce_consistency=False)), seed=0)
    lo, hi = arr.bounds
    stuck = lo == hi
    p = stats.norm.cdf(-np.sqrt(2) / d)
    assert abs(stuck.mean() - p) < 5 * np.sqrt(p * (1 - p) / n**2)
    before = arr.w.copy()
    rng = np.random.default_rng(1)
    for _ in range(5):
        arr.pulse(rng.integers(-20, 21, size=arr.shape))
    assert np.array_equal(arr.w[stuck], before[stuck])
    assert not np.array_equal(arr.w[~stuck], before[~stuck])


def test_aihwkit_up_down_shrinks_one_direction_only():
    """SoftBounds(up_down=c) on +-tau: dw_up = dw_min, dw_down = (1 - c) dw_min, so w_sym = c tau / (2 - c),
    unlike R1's linear family (c tau)."""
    c, tau = 0.2, 0.6
    sb = parse_device(dict(FAMILY_CONFIGS["SoftBounds"], up_down=c, w_max=tau, w_min=-tau))
    assert sb.symmetric_point() == pytest.approx(c * tau / (2 - c), abs=1e-12)
    assert sb.q_plus(0.0) == pytest.approx(1.0) and sb.q_minus(0.0) == pytest.approx(1 - c)
    assert parse_device(dict(kind="linear", c=c, tau=tau)).symmetric_point() == pytest.approx(c * tau)


def test_powstep_exponents_split_one_sidedly_with_additive_gain():
    """aihwkit 1.1.0's binary: gamma_up = pow_gamma (min(ud, 0) + g + s), gamma_down = pow_gamma (-max(ud, 0)
    + g - s), g = 1 + pow_gamma_dtod xi, s = pow_up_down_dtod xi: pow_gamma 2, pow_up_down 0.2 give means 2.0
    and 1.6 (not 2.4 / 1.6), each with std pow_gamma sqrt(pow_gamma_dtod^2 + pow_up_down_dtod^2)."""
    dev = parse_device(dict(kind="PowStep", pow_gamma=2.0, pow_up_down=0.2, pow_gamma_dtod=0.1, pow_up_down_dtod=0.05))
    ep = ConductanceArray(200, 200, dev, seed=1).params.ep.astype(float)
    g_up, g_dn = ep[..., GAMMA_UP], ep[..., GAMMA_DOWN]
    se = 2.0 * np.hypot(0.1, 0.05) / 200
    assert abs(g_up.mean() - 2.0) < 5 * se and abs(g_dn.mean() - 1.6) < 5 * se
    assert g_up.std() == pytest.approx(2.0 * np.hypot(0.1, 0.05), rel=0.03)
    assert np.corrcoef(g_up.ravel(), g_dn.ravel())[0, 1] == pytest.approx(
        (0.1**2 - 0.05**2) / (0.1**2 + 0.05**2), abs=0.02
    )
    neg = parse_device(dict(kind="PowStep", pow_gamma=2.0, pow_up_down=-0.2, pow_gamma_dtod=0.0)).nominal().ep
    assert (neg[0, 0, GAMMA_UP], neg[0, 0, GAMMA_DOWN]) == pytest.approx((1.6, 2.0))


def test_soft_bounds_pmax_is_aihwkit_s_conversion():
    """aihwkit 1.1.0's SoftBoundsPmaxDevice at its defaults (p_max 1000, alpha 5e-4, range -1..1):
    B = 2 / (1 - e^-0.5) = 5.083, b_max = 4.083, dw_up = B alpha = 2.54e-3, dw_down = 2 alpha = 1e-3; 1000
    noiseless up pulses from -1 reach b_max - (b_max + 1)(1 - dw_up / b_max)^1000 = 1.356 (not the
    documented 1.0)."""
    dev = soft_bounds_pmax(**NO_SPREAD)
    ep = dev.nominal().ep[0, 0]
    span = 2 / (1 - np.exp(-0.5))
    assert (ep[W_MAX], ep[W_MIN], ep[DW_UP], ep[DW_DOWN]) == pytest.approx((span - 1, -1, span * 5e-4, 1e-3))
    arr = ConductanceArray(1, 1, dev)
    arr.set_weights(np.full((1, 1), -1.0))
    arr.pulse(np.full((1, 1), 1000))
    b_max = span - 1
    assert arr.w[0, 0] == pytest.approx(b_max - (b_max + 1) * (1 - span * 5e-4 / b_max) ** 1000, abs=1e-4)
    assert arr.w[0, 0] == pytest.approx(1.356, abs=1e-3)
