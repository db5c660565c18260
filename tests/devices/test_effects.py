"""aihwkit's device effects (write noise, decay, diffusion, reset, corrupt devices) against their closed forms
(aihwkit 1.1.0's binary: devices/effects.py, docs/devices.md)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import NO_SPREAD

from aimc.devices import AnalogTile, ConductanceArray, parse_device

WIDE = dict(NO_SPREAD, w_max=10.0, w_min=-10.0)  # bounds far away: nothing clips


def _array(shape=(200, 200), seed=1, **fields) -> ConductanceArray:
    return ConductanceArray(*shape, parse_device(dict(kind="SoftBounds", **fields)), seed=seed)


# -- write noise ------------------------------------------------------------------------------------------


def test_write_noise_on_set_has_std_write_noise_std_times_dw_min():
    """apparent = hidden + write_noise_std dw_min xi (aihwkit: std 0.050 for write_noise_std 5, dw_min 0.01)."""
    arr = _array(write_noise_std=5.0, dw_min=0.01, **WIDE)
    arr.set_weights(np.full(arr.shape, 0.2))
    assert np.all(arr.hidden == np.float32(0.2))
    noise = (arr.w - arr.hidden).astype(float)
    assert noise.std() == pytest.approx(0.05, rel=0.02) and abs(noise.mean()) < 5 * 0.05 / 200
    quiet = _array(write_noise_std=5.0, dw_min=0.01, apply_write_noise_on_set=False, **WIDE)
    quiet.set_weights(np.full(quiet.shape, 0.2))
    assert np.array_equal(quiet.w, quiet.hidden)


def test_write_noise_pulses_move_the_hidden_weight_and_redraw_only_pulsed_elements():
    """Pulses change the hidden weight exactly as without write noise; the apparent weight of a pulsed
    element is redrawn around it, an element without pulses keeps its apparent value."""
    fields = dict(NO_SPREAD, dw_min=0.01)
    noisy, plain = _array((20, 30), write_noise_std=3.0, **fields), _array((20, 30), **fields)
    for a in (noisy, plain):
        a.set_weights(np.full(a.shape, 0.1))
    before = noisy.w.copy()
    counts = np.random.default_rng(0).integers(-5, 6, noisy.shape)
    counts[:5] = 0  # rows without pulses
    noisy.pulse(counts)
    plain.pulse(counts)
    assert np.array_equal(noisy.hidden, plain.w)
    idle = counts == 0
    assert np.array_equal(noisy.w[idle], before[idle])
    assert not np.any(noisy.w[~idle] == before[~idle])
    assert (noisy.w - noisy.hidden)[~idle].std() == pytest.approx(0.03, rel=0.1)


def test_write_noise_after_a_pulsed_update_marks_exactly_the_pulsed_elements():
    arr = _array((40, 50), write_noise_std=3.0, dw_min=0.01, **NO_SPREAD)
    arr.set_weights(np.zeros(arr.shape))
    before_w, before_h = arr.w.copy(), arr.hidden.copy()
    rng = np.random.default_rng(2)
    x, d = rng.normal(0, 0.5, (2, 50)), rng.normal(0, 0.01, (2, 40))
    d[:, :10] = 0.0  # rows 0..9 fire nothing
    arr.update(x, d, 1.0)
    moved = arr.hidden != before_h
    assert moved[10:].mean() > 0.3 and not moved[:10].any()
    assert np.array_equal(arr.w[:10], before_w[:10])
    assert np.all(arr.w[moved] != before_w[moved])


@pytest.mark.parametrize("d_std", [5e-4, 0.05])  # the kernel's serial branch (< 1000 pulses) and its parallel one
def test_write_noise_redraws_the_pulsed_elements_of_every_row_and_no_other(d_std):
    """One sample: an element is pulsed in one direction only, so it is pulsed exactly where its hidden
    weight moved (from 0, far from the bounds); every such apparent weight is redrawn, no other."""
    arr = _array((64, 64), write_noise_std=3.0, dw_min=0.001, **NO_SPREAD)
    arr.set_weights(np.zeros(arr.shape))
    rng = np.random.default_rng(3)
    for _ in range(3):
        before_w, before_h = arr.w.copy(), arr.hidden.copy()
        n = arr.update(rng.normal(0, 0.5, (1, 64)), rng.normal(0, d_std, (1, 64)), 1.0)
        moved = arr.hidden != before_h
        assert (n < 1000) == (d_std < 0.01) and 0.05 < moved.mean() < 1
        assert np.all(arr.w[moved] != before_w[moved]) and np.array_equal(arr.w[~moved], before_w[~moved])


def test_write_noise_redraws_the_pulsed_elements_of_a_batch_beyond_64_samples():
    """70 samples (two words of the rows' sample bits), x and d positive: every pulse is a down pulse, so an
    element is pulsed exactly where its hidden weight moved; those apparent weights are redrawn with std
    write_noise_std dw_min, no other."""
    arr = _array((48, 40), write_noise_std=3.0, dw_min=0.001, **NO_SPREAD)
    arr.set_weights(np.zeros(arr.shape))
    rng = np.random.default_rng(4)
    x, d = np.abs(rng.normal(0, 0.5, (70, 40))), np.abs(rng.normal(0, 3e-5, (70, 48)))
    d[:64, :24] = 0.0  # rows 0..23 fire only in samples 64..69 (the second word)
    d[64:, :24] *= 10.0
    before_w, before_h = arr.w.copy(), arr.hidden.copy()
    arr.update(x, d, 1.0)
    moved = arr.hidden != before_h
    assert 0.05 < moved[:24].mean() < 1 and 0.05 < moved[24:].mean() < 1
    assert np.all(arr.w[moved] != before_w[moved]) and np.array_equal(arr.w[~moved], before_w[~moved])
    assert (arr.w - arr.hidden)[moved].std() == pytest.approx(0.003, rel=0.1)


# -- decay, diffusion -------------------------------------------------------------------------------------


def test_decay_is_geometric_toward_the_reset_value():
    """One call (alpha 1): w <- b + (w - b)(1 - 1/lifetime), b = reset; after n calls (1 - 1/L)^n."""
    arr = _array((10, 10), lifetime=20.0, reset=0.1, **WIDE)
    arr.set_weights(np.full(arr.shape, 0.9))
    for _ in range(7):
        assert arr.post_update_step()
    np.testing.assert_allclose(arr.w, 0.1 + 0.8 * 0.95**7, rtol=1e-5)


def test_decay_lifetime_spread_varies_the_lifetime_and_short_lives_reset_in_one_call():
    """lifetime_dtod varies L = lifetime (1 + dtod xi) (not the rate); an element with L <= 1 jumps to b."""
    arr = _array(lifetime=10.0, lifetime_dtod=0.3, **WIDE)
    scale = arr.effects.decay_scale.astype(float)
    life = 1 / (1 - scale[scale > 0])
    assert life.mean() == pytest.approx(10.0 * (1 + 0.0), rel=0.01)
    assert life.std() == pytest.approx(3.0, rel=0.03)
    short = _array((20, 20), lifetime=1.5, lifetime_dtod=1.0, reset=0.2, **WIDE)  # lifetime <= 1 is refused
    dead = short.effects.decay_scale == 0  # L <= 1: P(1.5 (1 + xi) <= 1) = Phi(-1/3) = 37%
    assert dead.mean() == pytest.approx(0.37, abs=0.08)
    short.set_weights(np.full(short.shape, -0.4))
    short.post_update_step()
    np.testing.assert_allclose(short.w[dead], 0.2, rtol=1e-6)
    assert (short.w[~dead] < 0.2).all()


def test_diffusion_std_grows_as_sqrt_of_calls():
    """w <- w + rate xi per call, rate = |diffusion (1 + dtod xi)|: std after n calls sqrt(n E[rate^2])."""
    arr = _array(diffusion=0.01, diffusion_dtod=0.5, **WIDE)
    w0 = arr.w.astype(float).copy()
    for _ in range(16):
        arr.post_update_step()
    change = arr.w.astype(float) - w0
    assert change.std() == pytest.approx(np.sqrt(16 * 0.01**2 * (1 + 0.5**2)), rel=0.03)
    assert abs(change.mean()) < 5 * change.std() / 200


def test_effects_off_apply_nothing():
    arr = _array((8, 8))
    assert arr.effects.decay_scale is None and arr.effects.diffusion_rate is None and arr.hidden is None
    w0 = arr.w.copy()
    assert not arr.post_update_step()
    assert np.array_equal(arr.w, w0)


def test_tile_applies_the_step_effects_once_per_call():
    tile = AnalogTile(6, 4, parse_device(dict(kind="SoftBounds", lifetime=4.0, **WIDE)))
    tile.set_weight(np.ones((6, 4)))
    tile.post_update_step()
    np.testing.assert_allclose(tile.forward_weight(), 0.75, rtol=1e-6)


# -- reset, corrupt devices --------------------------------------------------------------------------------


def test_reset_value_is_additive_and_reset_std_per_reset():
    """b = reset + reset_dtod xi (additive: std 0.05 for reset 0.1, dtod 0.05); a reset draws
    w = b + reset_std xi, so w has mean reset and std sqrt(reset_dtod^2 + reset_std^2)."""
    arr = _array(reset=0.1, reset_dtod=0.05, reset_std=0.02, **WIDE)
    b = arr.effects.reset_bias.astype(float)
    assert b.mean() == pytest.approx(0.1, abs=5 * 0.05 / 200) and b.std() == pytest.approx(0.05, rel=0.03)
    arr.reset()
    assert arr.w.mean() == pytest.approx(0.1, abs=5 * 0.054 / 200)
    assert arr.w.std() == pytest.approx(np.hypot(0.05, 0.02), rel=0.03)
    assert (arr.w - b).std() == pytest.approx(0.02, rel=0.03)


def test_reset_of_columns_with_probability():
    arr = _array(reset=0.3, reset_std=0.0, **WIDE)
    arr.set_weights(np.full(arr.shape, -1.0))
    arr.reset(columns=np.arange(50), prob=0.4)
    hit = arr.w == np.float32(0.3)
    assert not hit[:, 50:].any()
    assert hit[:, :50].mean() == pytest.approx(0.4, abs=5 * np.sqrt(0.24 / 10000))


def test_corrupt_devices_are_stuck_within_the_range():
    """With probability p an element is stuck at a value uniform in [-range, range] (inside its bounds):
    zero steps, b_max = b_min = value."""
    arr = _array(corrupt_devices_prob=0.2, corrupt_devices_range=0.1, dw_min=0.01, **NO_SPREAD)
    lo, hi = arr.bounds
    stuck = lo == hi
    assert stuck.mean() == pytest.approx(0.2, abs=5 * np.sqrt(0.16 / 40000))
    v = lo[stuck].astype(float)
    assert np.abs(v).max() <= 0.1 and v.std() == pytest.approx(0.1 / np.sqrt(3), rel=0.03)
    before = arr.w.copy()
    arr.pulse(np.full(arr.shape, 7))
    assert np.array_equal(arr.w[stuck], before[stuck]) and np.all(arr.w[~stuck] > before[~stuck])


@pytest.mark.parametrize("alpha, want", [(1.0, 0.48), (0.5, 0.49), (2.0, 0.46), (30.0, -0.1)])
def test_decay_weights_alpha_is_aihwkit_s(alpha, want):
    """AnalogTile.decay_weights(alpha): w <- b + (w - b)(1 + alpha (s - 1)), s = 1 - 1/lifetime, clipped;
    aihwkit 1.1.0's tile.decay_weights(alpha) from 0.5 with lifetime 20 and reset 0.1 (measured: 0.48, 0.49,
    0.46, -0.1)."""
    dev = parse_device(dict(kind="ConstantStep", lifetime=20.0, reset=0.1, reset_std=0.0, **NO_SPREAD))
    tile = AnalogTile(3, 4, dev)
    tile.set_weight(np.full((3, 4), 0.5, np.float32))
    tile.decay_weights(alpha)
    np.testing.assert_allclose(tile.weight(), want, atol=1e-6)
    with pytest.raises(ValueError, match="decay_weights: alpha must be finite"):
        tile.decay_weights(float("nan"))
