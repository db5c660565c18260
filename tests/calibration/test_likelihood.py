"""The exact likelihood of an increment under cycle and read noise (calibration.likelihood): its density
integrates to 1 and its mean is the censored mean of `censored` (closed forms), and a per-device fit refined
by it recovers the simulated cycle noise and read noise."""

import json

import numpy as np
import pytest

from aimc.calibration import fit, measure_cycles, write_csv
from aimc.calibration.censored import clipped_normal_mean
from aimc.calibration.likelihood import (
    STRAY,
    DeviceLikelihood,
    increment_cost_grads,
    increment_costs,
    increment_nll,
    outlying,
    total_nll,
)
from aimc.commands.cli import main
from aimc.devices import ConstantStep

NO_SPREAD = dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0)


@pytest.mark.parametrize(
    "s, sd, a, b, read_sd",
    [
        (0.01, 0.05, -0.2, 0.3, 0.002),  # noise of five steps, far from the bounds
        (0.01, 0.05, -0.2, 0.0, 0.002),  # at the bound ahead: half the pulses clipped
        (0.01, 0.05, 0.0, 0.004, 0.001),  # both rooms small
        (0.02, 0.004, -0.5, 0.5, 0.003),  # read noise of the order of the cycle noise
    ],
)
def test_density_integrates_to_one_and_has_the_censored_mean(s, sd, a, b, read_sd):
    lo, hi = min(a, s - 8 * sd) - 10 * read_sd, max(b, s + 8 * sd) + 10 * read_sd
    y = np.linspace(lo, hi, 400_001)
    f = np.exp(
        -increment_nll(np.full_like(y, s), np.full_like(y, sd), np.full_like(y, a), np.full_like(y, b), y, read_sd)
    )
    assert np.trapezoid(f, y) == pytest.approx(1.0, abs=1e-6)
    assert np.trapezoid(y * f, y) == pytest.approx(float(clipped_normal_mean(s, sd, a, b)), abs=1e-6 * (hi - lo))


@pytest.mark.parametrize(
    "s, sd, a, b, read_sd",
    [
        (0.01, 0.05, -0.2, 0.3, 0.002),  # as in the density test above
        (0.01, 0.05, -0.2, 0.0, 0.002),
        (0.01, 0.05, 0.0, 0.004, 0.001),
        (0.02, 0.004, -0.5, 0.5, 0.003),
    ],
)
def test_gradient_equals_central_differences(s, sd, a, b, read_sd):
    """The derivatives of each increment's cost with respect to (s, sd, a, b, log read_sd) against central
    differences of the cost, at increments in the clipped, unclipped and impossible ranges."""
    y = np.array([a - 0.001, a, 0.5 * (a + s), s, s + sd, b, b + 0.002, b + 0.2])
    p0 = np.array([s, sd, a, b, np.log(read_sd)])
    log_stray = np.log(STRAY / 2.0)

    def costs(p):
        return increment_costs(
            np.full(y.size, p[0]),
            np.full(y.size, p[1]),
            1.0,
            np.full(y.size, p[2]),
            np.full(y.size, p[3]),
            y,
            float(np.exp(p[4])),
            log_stray,
        )

    c, g = increment_cost_grads(
        np.full(y.size, s), np.full(y.size, sd), 1.0, np.full(y.size, a), np.full(y.size, b), y, read_sd, log_stray
    )
    np.testing.assert_allclose(c, costs(p0), rtol=1e-12)
    for k in range(5):
        h = 1e-6 * max(abs(p0[k]), 1e-3)
        e = np.eye(5)[k] * h
        numeric = (costs(p0 + e) - costs(p0 - e)) / (2 * h)
        np.testing.assert_allclose(g[:, k], numeric, rtol=1e-5, atol=1e-4 * (1 + np.abs(numeric).max()))


def test_an_impossible_increment_costs_at_most_the_stray_floor():
    """A decrease of 40 read-noise std on an up pulse with no room behind cannot happen under the model: its cost
    is -log(STRAY / span), not the tail of the density; a possible one costs what the density says."""
    one = np.ones(1)
    log_stray = np.log(STRAY / 2.0)
    impossible = total_nll(0.01 * one, 0.05 * one, 1.0, 0.0 * one, 0.3 * one, -0.08 * one, 0.002, log_stray)
    assert impossible == pytest.approx(-log_stray, rel=1e-6)
    y = np.array([0.02])
    possible = total_nll(0.01 * one, 0.05 * one, 1.0, -0.2 * one, 0.3 * one, y, 0.002, log_stray)
    f = np.exp(-increment_nll(0.01 * one, 0.05 * one, -0.2 * one, 0.3 * one, y, 0.002)[0])
    assert possible == pytest.approx(-np.log((1 - STRAY) * f + STRAY / 2.0), rel=1e-12)


def test_outlying_devices_are_those_far_from_the_median():
    theta = np.array([[1.0, -5.0], [1.1, -5.2], [0.9, -4.8], [1.05, -5.1], [0.95, -30.0]])
    ml = {d: DeviceLikelihood(t, 5.0 + 0.1 * d, 3e-4, 0.0, 100, np.eye(2), "") for d, t in enumerate(theta)}
    assert outlying(ml) == [4]  # exponents: MAD 0.2, device 4 is 84 robust sd (1.4826 MAD) away, the rest within 1


def test_likelihood_recovers_the_cycle_and_read_noise():
    truth = ConstantStep(dw_min=0.01, up_down=0.0, w_max=0.5, w_min=-0.5, dw_min_std=3.0, **NO_SPREAD)
    tr = measure_cycles(truth, n_cycles=2, n_devices=8, read_noise=0.002, seed=4)
    res = fit(tr, kinds=["ConstantStep"], spread=False, method="per-device", likelihood=True)
    ml = res.noise["likelihood"]
    for key, true in (("sigma", 3.0), ("read_noise", 0.002)):  # within 3 standard errors over the 8 devices
        per = np.array(ml[f"{key}_per_device"])
        assert abs(per.mean() - true) < 3 * per.std(ddof=1) / np.sqrt(len(per)), (key, per)
    assert res.device.dw_min_std == pytest.approx(ml["sigma"])
    f = res.best
    for p, true in (("dw_min", 0.01), ("w_max", 0.5), ("w_min", -0.5)):
        lo, hi = f.ci95[p]
        assert lo <= true <= hi, (p, f.ci95[p])
    assert f.interval.startswith("maximum likelihood per device")


@pytest.mark.parametrize(
    "kw, n_devices, match",
    [
        (dict(method="pooled"), 4, "per-device"),
        (dict(method="per-device", cycle_noise=False), 4, "cycle_noise"),
        (dict(method="per-device"), 2, "at least 3 devices with enough increments, and the traces have 2"),
    ],
)
def test_likelihood_refuses_what_it_cannot_model(kw, n_devices, match):
    tr = measure_cycles(ConstantStep(dw_min=0.01, w_max=0.5, w_min=-0.5, **NO_SPREAD), n_devices=n_devices, seed=1)
    with pytest.raises(ValueError, match=match):
        fit(tr, kinds=["ConstantStep"], spread=False, likelihood=True, **kw)


def test_likelihood_not_applied_is_said_in_the_report_and_on_the_terminal(tmp_path, capsys):
    """The tabulated family has no per-device parameters: the fit runs, and the quality record, the report's
    warnings and the command's stderr say the likelihood was not applied."""
    truth = ConstantStep(dw_min=0.01, up_down=0.0, w_max=0.5, w_min=-0.5, dw_min_std=3.0, **NO_SPREAD)
    tr = measure_cycles(truth, n_cycles=2, n_devices=4, read_noise=0.002, seed=4)
    res = fit(tr, kinds=["tabulated"], spread=False, method="per-device", likelihood=True)
    assert res.data.quality["likelihood"].startswith("not applied: the best family, tabulated")
    applied = fit(tr, kinds=["ConstantStep"], spread=False, method="per-device", likelihood=True)
    assert applied.data.quality["likelihood"].startswith("applied")
    csv = write_csv(tr, tmp_path / "t.csv")
    out = tmp_path / "fit"
    assert (
        main(
            [
                "fit",
                str(csv),
                "--out",
                str(out),
                "--families",
                "tabulated",
                "--no-spread",
                "--elements",
                "2",
                "--quiet",
                "--likelihood",
                "--method",
                "per-device",
            ]
        )
        == 0
    )
    assert "warning: likelihood not applied" in capsys.readouterr().err
    assert "<b>Warning:</b> likelihood not applied" in (out / "report.html").read_text()


def test_cli_likelihood_writes_the_noise_per_device(tmp_path, capsys):
    truth = ConstantStep(dw_min=0.01, up_down=0.0, w_max=0.5, w_min=-0.5, dw_min_std=3.0, **NO_SPREAD)
    csv = write_csv(measure_cycles(truth, n_cycles=2, n_devices=4, read_noise=0.002, seed=4), tmp_path / "t.csv")
    out = tmp_path / "fit"
    base = [
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
        "--likelihood",
    ]
    assert main(base + ["--method", "pooled"]) == 2  # the likelihood refines per-device fits
    assert "per-device" in capsys.readouterr().err and not out.exists()
    assert main(base) == 0  # per-device is the default method
    noise = json.loads((out / "fit.json").read_text())["noise"]
    assert len(noise["likelihood"]["sigma_per_device"]) == 4
    assert noise["sigma_multiplicative"] == pytest.approx(noise["likelihood"]["sigma"])
