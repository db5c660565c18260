"""Robust fitting: a glitch read is flagged with its file line and does not move the fit; reads k pulses
apart are used, predicted by composing k steps (closed forms for constant and soft-bounds steps)."""

import numpy as np
import pytest

from aimc.calibration import fit, measure_cycles, predict, read_csv, write_csv
from aimc.calibration.traces import from_arrays
from aimc.devices import ConstantStep, SoftBounds

NO_SPREAD = dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0)
TRUTH = SoftBounds(dw_min=0.02, up_down=0.1, w_max=0.7, w_min=-0.5, dw_min_std=0.3, **NO_SPREAD)
READ_NOISE = 0.005


def test_k_pulse_increment_composes_constant_steps():
    dev = ConstantStep(dw_min=0.01, up_down=0.0, w_max=1.0, w_min=-1.0, **NO_SPREAD, dw_min_std=0.0)
    m = np.array([0.0, 0.1, -0.2])
    up = np.array([True, False, True])
    k = np.array([5, 3, 1])
    np.testing.assert_allclose(predict(dev, m, up, k), [0.05, -0.03, 0.01], rtol=1e-12)


@pytest.mark.parametrize("k", [2, 5, 12])
def test_k_pulse_increment_matches_soft_bounds_closed_form(k):
    # soft bounds: k up pulses from w0 give w_max - (w_max - w0) (1 - dw/w_max)^k (aihwkit 1.1.0 SoftBounds)
    dev = SoftBounds(dw_min=0.01, up_down=0.0, w_max=0.6, w_min=-0.6, **NO_SPREAD, dw_min_std=0.0)
    w0 = np.array([-0.4, 0.0, 0.3])
    d = (0.6 - w0) * (1 - (1 - 0.01 / 0.6) ** k)
    got = predict(dev, w0 + d / 2, np.ones(3, bool), np.full(3, k))
    np.testing.assert_allclose(got, d, rtol=2e-3)


def _with_glitch(tmp_path):
    tr = measure_cycles(TRUTH, n_cycles=2, n_devices=8, read_noise=READ_NOISE, seed=4)
    g = tr.conductance.copy()
    rows = np.flatnonzero((tr.device == 3) & (tr.polarity == -1))
    row = int(rows[len(rows) // 2])
    g[row] += 2.0 * 10.0  # +2.0 in weight (g_scale 10 uS per unit weight) on a down pulse
    bad = type(tr)(tr.devices, tr.device, tr.pulse, tr.polarity, g, tr.unit, tr.meta)
    path = write_csv(bad, tmp_path / "glitch.csv")
    line = 1 + next(n for n, text in enumerate(path.read_text().splitlines()) if text.endswith(repr(float(g[row]))))
    return tr, read_csv(path), line


def test_glitch_read_is_flagged_and_does_not_move_the_fit(tmp_path):
    clean, glitch, line = _with_glitch(tmp_path)
    kinds = ["SoftBounds", "LinearStep", "ExpStep", "tabulated"]
    a = fit(clean, kinds=kinds, spread=False)
    b = fit(glitch, kinds=kinds, spread=False)
    q = b.data.quality
    assert a.data.quality["n_outliers"] == 0
    # the glitch read makes two increments (into it, +2 on a down pulse, and out of it, -2): both flagged
    assert q["n_outliers"] == 2 and f"line {line} " in q["outliers"][0]["at"]
    assert q["outliers"][0]["increment"] == pytest.approx(2.0, abs=0.1)
    assert b.best.kind == a.best.kind == "SoftBounds"
    fa, fb = a.best, b.best
    for p in ("dw_min", "up_down", "w_max", "w_min"):
        assert abs(fb.params[p] - getattr(TRUTH, p)) < 4 * fb.stderr[p] + 2 * READ_NOISE, p
    assert b.noise["sigma_multiplicative"] == pytest.approx(0.3, rel=0.15)
    assert fb.device.n_states == pytest.approx(fa.device.n_states, rel=0.02)


def test_reads_k_pulses_apart_are_used():
    # keep every third read in the middle of each run: reads 3 pulses apart, all used, same parameters
    tr = measure_cycles(TRUTH, n_cycles=2, n_devices=8, read_noise=READ_NOISE, seed=2)
    n_reads = len(tr.conductance) // 8
    keep = np.ones(n_reads, bool)
    keep[np.arange(n_reads) % 3 != 0] = False
    keep[0] = True
    g = tr.conductance.reshape(8, n_reads)[:, keep].T
    pol = tr.polarity.reshape(8, n_reads)[0, keep]
    sparse = from_arrays(g, pol, meta=tr.meta)
    sparse = type(sparse)(
        sparse.devices,
        sparse.device,
        np.tile(np.flatnonzero(keep), 8),
        sparse.polarity,
        sparse.conductance,
        sparse.unit,
        sparse.meta,
    )
    res = fit(sparse, kinds=["SoftBounds"], spread=False)
    assert res.data.k.max() == 3 and res.data.quality["n_multi_pulse"] > 0.9 * res.data.n
    skipped = sum(res.data.quality["skipped"].values())
    assert res.data.n + skipped == 8 * (keep.sum() - 1)  # every pair of reads is used or counted
    f = res.best
    for p in ("dw_min", "up_down", "w_max", "w_min"):
        assert abs(f.params[p] - getattr(TRUTH, p)) < 4 * f.stderr[p] + 2 * READ_NOISE, p


@pytest.mark.parametrize("form", ["additive", "multiplicative"])
def test_noise_form_chosen_by_the_data(form):
    # a power device whose step varies 8-fold over the range: the two forms differ where the step is small
    # (16 devices, 4 cycles: with 8 devices and 2 cycles the form chosen depended on the seed)
    from aimc.devices import Power

    truth = Power(tau=0.6, c=0.0, gamma=3.0, dw_min=0.02, dw_min_std=0.4, noise=form)
    res = fit(measure_cycles(truth, n_cycles=4, n_devices=16, read_noise=0.002, seed=6), kinds=["power"], spread=False)
    assert res.noise["form"] == form
    assert res.noise[f"sigma_{form}"] == pytest.approx(0.4, rel=0.15)
