"""The increment model under cycle noise: the mean and variance of a Gaussian step clipped to the room left to
the bounds (closed form against numpy sampling), and the mean step of a noisy pulse near a hard bound against
numpy samples of aihwkit 1.1.0's rule (draw the noisy step, then clip the weight to [w_min, w_max])."""

import json

import numpy as np
import pytest

from aimc.calibration import fit, measure_cycles, write_csv
from aimc.calibration.censored import clipped_normal_moments
from aimc.calibration.pulse_data import compose, predict
from aimc.commands.cli import main
from aimc.devices import ConstantStep, SoftBounds

NO_SPREAD = dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0)
N = 400_000


@pytest.mark.parametrize(
    "mu, sd, a, b",
    [
        (1.0, 0.3, -0.5, 1.1),
        (0.002, 0.01, -0.003, 0.001),
        (0.5, 2.0, -0.1, 0.2),
        (1e-3, 3e-4, -1.0, 2e-3),
        (-0.2, 0.1, -0.25, 0.0),
    ],
)
def test_clipped_normal_moments_match_sampling(mu, sd, a, b):
    x = np.clip(np.random.default_rng(1).normal(mu, sd, N), a, b)
    mean, var = clipped_normal_moments(mu, sd, a, b)
    assert abs(mean - x.mean()) < 5 * x.std() / np.sqrt(N)
    # std error of a sample variance: sqrt((m4 - var^2) / N)
    assert abs(var - x.var()) < 5 * np.sqrt(np.mean((x - x.mean()) ** 4) - x.var() ** 2) / np.sqrt(N)


def test_clipped_normal_without_noise_is_the_clip():
    mean, var = clipped_normal_moments([0.3, 0.3, -2.0], 0.0, [-1.0, -1.0, -1.0], [0.2, 1.0, 1.0])
    np.testing.assert_array_equal(mean, [0.2, 0.3, -1.0])
    np.testing.assert_array_equal(var, 0.0)


def _sampled_step(w0, step, sd, lo, hi, up):
    """Mean change of one pulse by aihwkit 1.1.0's rule, sampled: w0 +- (step + sd xi), clipped to [lo, hi]."""
    xi = np.random.default_rng(2).standard_normal((N, 1))
    sign = np.where(up, 1.0, -1.0)
    return (np.clip(w0 + sign * (step + sd * xi), lo, hi) - w0).mean(0)


def test_noisy_pulse_near_a_bound_multiplicative():
    dev = ConstantStep(dw_min=0.01, up_down=0.0, w_max=0.5, w_min=-0.5, dw_min_std=0.8, **NO_SPREAD)
    w0 = np.array([0.5, 0.498, 0.49, 0.45, -0.497, -0.5])
    up = np.array([True, True, True, True, False, True])
    want = _sampled_step(w0, 0.01, 0.8 * 0.01, -0.5, 0.5, up)  # step dw_min (1 + sigma xi)
    got = compose(dev, w0, up, np.ones(len(w0), int))
    np.testing.assert_allclose(got, want, atol=5 * 0.008 / np.sqrt(N))
    assert got[0] < 0  # at the upper bound only the steps that the noise turns back move the weight


def test_noisy_pulse_near_a_bound_additive():
    # SoftBounds with mult_noise False: step dw (1 - w / w_max) + sigma dw xi (aihwkit 1.1.0)
    dev = SoftBounds(dw_min=0.02, up_down=0.0, w_max=0.6, w_min=-0.6, mult_noise=False, dw_min_std=0.5, **NO_SPREAD)
    w0 = np.array([0.6, 0.595, 0.55, -0.59, 0.0])
    up = np.array([True, True, True, False, False])
    step = np.where(up, 0.02 * (1 - w0 / 0.6), 0.02 * (1 - w0 / -0.6))
    want = _sampled_step(w0, step, 0.5 * 0.02, -0.6, 0.6, up)
    np.testing.assert_allclose(compose(dev, w0, up, np.ones(len(w0), int)), want, atol=5 * 0.01 / np.sqrt(N))


def test_noise_lowers_the_predicted_increment_only_near_the_bound():
    noisy = ConstantStep(dw_min=0.01, up_down=0.0, w_max=0.5, w_min=-0.5, dw_min_std=0.8, **NO_SPREAD)
    plain = noisy.model_copy(update={"dw_min_std": 0.0})
    m = np.array([0.0, 0.49, 0.497])
    up = np.ones(3, bool)
    a, b = predict(noisy, m, up), predict(plain, m, up)
    assert a[0] == pytest.approx(b[0], rel=1e-12) and b[1] == pytest.approx(0.01) and b[2] == pytest.approx(0.006)
    # seen from the midpoint the room ahead is 2 (w_max - m): E[min(X, 2 (0.5 - m))], X ~ N(0.01, 0.008^2)
    x = np.random.default_rng(3).normal(0.01, 0.008, N)
    for got, mk in zip(a[1:], m[1:]):
        y = np.minimum(x, 2 * (0.5 - mk))
        assert got == pytest.approx(y.mean(), abs=5 * y.std() / np.sqrt(N))


def test_fit_with_cycle_noise_holds_the_measured_noise():
    truth = ConstantStep(dw_min=0.01, up_down=0.0, w_max=0.5, w_min=-0.5, dw_min_std=0.8, **NO_SPREAD)
    tr = measure_cycles(truth, n_cycles=2, n_devices=8, read_noise=0.0025, seed=2)
    res = fit(tr, kinds=["ConstantStep"], spread=False, cycle_noise=True)
    f = res.fits["ConstantStep"]
    assert f.device.dw_min_std == pytest.approx(0.8, rel=0.15)  # measured on the tables, held in the fit
    assert abs(f.params["dw_min"] - 0.01) < 4 * f.stderr["dw_min"] + 5e-4
    for p, true in (("w_max", 0.5), ("w_min", -0.5)):
        assert abs(f.params[p] - true) < 4 * f.stderr[p] + 2 * 0.0025, p


def test_cli_cycle_noise_flag_holds_the_measured_noise(tmp_path):
    """`aimc fit --cycle-noise`: the fitted family's config carries the measured cycle noise (truth 0.8 of a
    step; without the flag the fitted family's increment model is noise-free, dw_min_std 0)."""
    truth = ConstantStep(dw_min=0.01, up_down=0.0, w_max=0.5, w_min=-0.5, dw_min_std=0.8, **NO_SPREAD)
    csv = write_csv(measure_cycles(truth, n_cycles=2, n_devices=8, read_noise=0.0025, seed=2), tmp_path / "t.csv")
    out = tmp_path / "fit"
    assert (
        main(
            [
                "fit",
                str(csv),
                "--out",
                str(out),
                "--families",
                "ConstantStep",
                "--no-spread",
                "--elements",
                "2",
                "--quiet",
                "--cycle-noise",
            ]
        )
        == 0
    )
    fitted = json.loads((out / "fit.json").read_text())["families"]["ConstantStep"]["device"]
    assert fitted["dw_min_std"] == pytest.approx(0.8, rel=0.15)
