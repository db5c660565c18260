"""Pulse trains longer than one 32-slot mask (desired_bl > 32): the chunk split, the binomial pulse counts of
an ideal device against their closed form, BL management up to desired_bl, the order of a batch's pulses, the
saturated and expected modes, a one-sided refresh that rewrites with BL 100, and the config's limit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import FAMILY_CONFIGS, NO_SPREAD
from scipy import stats

from aimc.devices import ConductanceArray, ConstantStep, PeripheryConfig, UpdateConfig, parse_device
from aimc.devices.one_sided import OneSided
from aimc.devices.one_sided_array import OneSidedArray
from aimc.devices.pulse_trains import MAX_BL, SLOTS, split_long_trains
from aimc.devices.update import mean_update, train_plan

DW = 1e-3
IDEAL = parse_device(dict(kind="ideal", tau=100.0, dw_min=DW))  # bounds +-100: no pulse clips


def _fixed(bl: int) -> UpdateConfig:
    """Trains of exactly bl slots with A = B = sqrt(lr / (dw_min bl)) (both managements off)."""
    return UpdateConfig(desired_bl=bl, update_management=False, update_bl_management=False)


def test_split_long_trains_cuts_each_train_into_32_slot_chunks_in_order():
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    d = -np.arange(15, dtype=np.float32).reshape(5, 3)
    bl = np.array([0, 5, 32, 33, 100], np.int32)
    xs, ds = np.linspace(0.1, 0.5, 5), np.linspace(1.0, 5.0, 5)
    cx, cd, cbl, cxs, cds = split_long_trains(x, d, bl, xs, ds)
    rows = [0, 1, 2, 3, 3, 4, 4, 4, 4]
    assert cbl.tolist() == [0, 5, 32, 32, 1, 32, 32, 32, 4]
    assert np.array_equal(cx, x[rows]) and np.array_equal(cd, d[rows])
    assert np.array_equal(cxs, xs[rows]) and np.array_equal(cds, ds[rows])


def _counts(bl: int, n: int, reps: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Pulses per element of `reps` updates of one sample with x, d > 0 (every pulse down) on an n x n ideal
    array, trains of exactly bl slots and p_x p_d = x_j d_i (lr = bl dw_min). Returns (counts (reps, n, n),
    p (n, n))."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.2, 1.0, (1, n)).astype(np.float32)
    d = rng.uniform(0.2, 1.0, (1, n)).astype(np.float32)
    arr = ConductanceArray(n, n, IDEAL, seed=seed)
    out = np.empty((reps, n, n))
    for r in range(reps):
        arr.w[...] = 0.0
        arr.update(x, d, bl * DW, _fixed(bl))
        out[r] = np.rint(-arr.w / np.float32(DW))
    return out, d.T.astype(float) * x.astype(float)


@pytest.mark.parametrize("bl", [33, 64, 100])
def test_pulse_counts_are_binomial_with_the_closed_form_mean(bl):
    """Each element gets Binomial(BL, p_x p_d) pulses (independent slots): the mean change -lr d x^T within its
    sampling error (pooled within 1%), the variance BL p (1 - p) within 6%, and the histograms of the diagonal
    elements (no train shared between them) pass a chi-square test against the binomial law."""
    n, reps = 10, 400
    counts, p = _counts(bl, n, reps)
    mean, var = counts.mean(0), counts.var(0, ddof=1)
    want, want_var = bl * p, bl * p * (1 - p)
    z = (mean - want) / np.sqrt(want_var / reps)
    assert np.abs(z).max() < 5
    assert mean.sum() == pytest.approx(want.sum(), rel=0.01)  # dw = -lr d x^T in units of dw_min
    assert var.sum() == pytest.approx(want_var.sum(), rel=0.06)
    chi2, dof = 0.0, 0
    for i in range(n):
        pmf = stats.binom.pmf(np.arange(bl + 1), bl, p[i, i])
        lo, hi = np.flatnonzero(pmf * reps >= 5)[[0, -1]]  # the bins of the bulk, each tail in its edge bin
        seen = np.bincount(counts[:, i, i].astype(int), minlength=bl + 1)
        expected, observed = (np.array([v[: lo + 1].sum(), *v[lo + 1 : hi], v[hi:].sum()]) for v in (pmf * reps, seen))
        chi2 += (((observed - expected) ** 2) / expected).sum()
        dof += len(expected) - 1
    assert stats.chi2.sf(chi2, dof) > 1e-4


def test_bl_management_takes_ceil_k_up_to_desired_bl():
    """BL = min(ceil(k), desired_bl) with k = lr max|x| max|d| / dw_min, past 32 as below, and A B BL dw_min =
    lr (aihwkit 1.1.0's performUpdateManagement)."""
    k = np.array([0.4, 31.5, 40.3, 500.5, 999.9, 1000.0, 2500.0])
    x = np.ones((k.size, 3), np.float32)
    x[:, 0] = 0.5
    d = (k * DW / 0.1).astype(np.float32)[:, None] * np.array([[1.0, -0.25]], np.float32)
    k = 0.1 * 1.0 * d[:, 0].astype(float) / DW  # k of the float32 values
    bl, xs, ds = train_plan(x, d, 0.1, DW, UpdateConfig(desired_bl=1000))
    assert bl.tolist() == [1, 32, 41, 501, 1000, 1000, 1000]
    assert bl.tolist() == np.minimum(np.ceil(k), 1000).astype(int).tolist()
    np.testing.assert_allclose(xs * ds * bl * DW, 0.1, rtol=1e-12)


def test_saturated_and_expected_updates_with_bl_100_follow_the_clipped_mean():
    """k about 150 and 60 with desired_bl 100 and both managements: the pulsed mean change over 200 updates is
    devices.update.mean_update (the clipped closed form) within its sampling error, and so is the expected
    mode's change."""
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (2, 12)).astype(np.float32)
    d = rng.uniform(-1, 1, (2, 8)).astype(np.float32)
    lr = 0.05
    d *= np.array([[150.0], [60.0]], np.float32) * np.float32(DW / lr) / (np.abs(x).max(1) * np.abs(d).max(1))[:, None]
    cfg = UpdateConfig(desired_bl=100)
    bl, _, _ = train_plan(x, d, lr, DW, cfg)
    assert bl.tolist() == [100, 60]
    want = mean_update(x, d, lr, DW, cfg)
    assert not np.allclose(want, -lr * d.T @ x, rtol=0.05)  # saturated: the large d lose pulses
    arr = ConductanceArray(8, 12, IDEAL, seed=2)
    reps = 200
    dws = np.empty((reps, 8, 12))
    for r in range(reps):
        arr.w[...] = 0.0
        arr.update(x, d, lr, cfg)
        dws[r] = arr.w
    z = (dws.mean(0) - want) / (dws.std(0, ddof=1) / math.sqrt(reps) + 1e-9)
    assert np.abs(z).max() < 5
    assert np.abs(dws.mean(0)).sum() == pytest.approx(np.abs(want).sum(), rel=0.01)
    exp = ConductanceArray(8, 12, IDEAL, seed=2)
    exp.update(x, d, lr, UpdateConfig(desired_bl=100, mode="expected"))
    np.testing.assert_allclose(exp.w, want, atol=DW)


def test_a_batch_fires_its_samples_one_after_another():
    """Two samples of 40 pulses each (probability 1), up then down, on a noiseless SoftBounds device: the
    weights equal 40 single up pulses followed by 40 down pulses, not the chunks interleaved."""
    dev = parse_device(FAMILY_CONFIGS["SoftBounds"])
    arr = ConductanceArray(1, 1, dev, seed=0)
    ref = ConductanceArray(1, 1, dev, seed=0)
    x = np.ones((2, 1), np.float32)
    d = np.array([[-1.0], [1.0]], np.float32)  # W -= lr d x: up, then down
    assert arr.update(x, d, 40 * dev.granularity, _fixed(40)) == 80
    w = []
    for s in (1, -1):
        ref.pulse(np.full((1, 1), 40 * s))
        w.append(float(ref.w[0, 0]))
    assert float(arr.w[0, 0]) == pytest.approx(w[1], abs=1e-6)
    chunked = ConductanceArray(1, 1, dev, seed=0)  # the chunks interleaved: 32 up, 32 down, 8 up, 8 down
    for s in (32, -32, 8, -8):
        chunked.pulse(np.full((1, 1), s))
    assert abs(float(chunked.w[0, 0]) - w[1]) > 1e-5


def test_one_sided_refresh_rewrites_with_bl_100():
    """A one-sided cell whose refresh rewrites with desired_bl 100: steps of 1/128, rewrites of |g+ - g-| =
    0.5 and 0.5625 fire 64 and 72 pulses (probability 1 in every slot) and land exactly; with BL 31 they
    would stop at 31 pulses."""
    dw = 1.0 / 128
    step = ConstantStep(dw_min=dw, w_max=1.0, w_min=0.0, reset=0.0, reset_std=0.0, **NO_SPREAD)
    cell = OneSided(device=step, refresh_forward=PeripheryConfig.perfect(), refresh_update=UpdateConfig(desired_bl=100))
    arr = OneSidedArray(2, 2, cell, seed=0)
    gp = np.array([[0.8125, 0.8125], [0.3125, 0.5]], np.float32)
    gm = np.array([[0.3125, 0.25], [0.875, 0.5]], np.float32)
    arr.plus.set_weights(gp)
    arr.minus.set_weights(gm)
    assert arr.refresh() == 2
    assert np.array_equal(arr.plus.w, [[0.5, 0.8125], [0, 0.5]])
    assert np.array_equal(arr.minus.w, [[0, 0.25], [0.5625, 0.5]])
    assert arr.pulses == 64 + 72 + 4  # the rewrites and four resets


def test_desired_bl_is_limited_to_max_bl():
    assert MAX_BL >= 1000 and MAX_BL % SLOTS == 0
    assert UpdateConfig(desired_bl=MAX_BL).desired_bl == MAX_BL
    with pytest.raises(ValueError, match="desired_bl"):
        UpdateConfig(desired_bl=MAX_BL + 1)
