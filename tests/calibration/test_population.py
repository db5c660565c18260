"""Per-device fits, then the population: on a population of 16 simulated soft-bounds devices with
device-to-device spread the family chosen by the summed per-device criterion is the true one, and the true
nominal parameters lie inside the 95% intervals over devices; devices without spread share one parameter set.
Truths are the simulated configs."""

import numpy as np
import pytest

from aimc.calibration import fit, measure_cycles
from aimc.calibration.population import median_interval
from aimc.devices import SoftBounds

SPREAD = dict(dw_min_dtod=0.1, up_down_dtod=0.01, w_max_dtod=0.05, w_min_dtod=0.05, dw_min_std=0.3)
TRUTHS = {
    "SoftBounds": SoftBounds(dw_min=0.02, up_down=0.1, w_max=0.7, w_min=-0.5, **SPREAD),
}
CANDIDATES = ["SoftBounds", "LinearStep", "PowStep", "ExpStep", "ConstantStep", "tabulated"]


def _fit(truth, seed):
    mid = 0.5 * float(truth.q_plus(0.0) + truth.q_minus(0.0)) * truth.dw_min  # mean step at w = 0
    tr = measure_cycles(truth, n_cycles=2, n_devices=16, read_noise=0.25 * mid, seed=seed)
    return fit(tr, kinds=CANDIDATES, spread=False, method="per-device")


@pytest.mark.slow
def test_population_intervals_of_soft_bounds():
    res = _fit(TRUTHS["SoftBounds"], 0)
    f = res.fits["SoftBounds"]
    assert len(f.parts) == 16 and f.k == 4
    # the criterion sums the devices' own fits: each device charged its own k = 4 parameters
    assert f.bic == pytest.approx(sum(n * np.log(rss / n) + k * np.log(n) for rss, n, k in f.parts))
    for p, (lo, hi) in f.ci95.items():
        assert lo <= getattr(TRUTHS["SoftBounds"], p) <= hi, (p, lo, hi)
    assert res.best.kind == "SoftBounds"


def test_cli_per_device_method_is_the_default(tmp_path, capsys):
    import json

    from aimc.calibration import write_csv
    from aimc.commands.cli import main

    spread = TRUTHS["SoftBounds"].model_copy(update={"dw_min_dtod": 0.3})  # 4 devices, 1 cycle: a spread they show
    tr = measure_cycles(spread, n_cycles=1, n_devices=4, read_noise=0.002, seed=1)
    csv = write_csv(tr, tmp_path / "sb.csv")
    out = tmp_path / "fit"
    assert (
        main(
            [
                "fit",
                str(csv),
                "--out",
                str(out),
                "--families",
                "SoftBounds,ConstantStep",
                "--intervals",
                "bootstrap",
                "--bootstrap",
                "500",
                "--quiet",
                "--elements",
                "4",
            ]
        )
        == 0
    )
    summary = json.loads((out / "fit.json").read_text())
    sb = summary["families"]["SoftBounds"]
    assert summary["method"] == "per-device"
    assert "SoftBounds     k=4   dBIC=       0.0  median of the per-device fits" in capsys.readouterr().out
    assert sb["interval"].startswith("bootstrap over 4 devices (per-device estimates resampled), 500")
    report = (out / "report.html").read_text()
    assert sb["n_devices_fitted"] == 4 and "identified" in report and "bootstrap over 4 devices" in report


def test_one_parameter_set_unless_the_devices_reject_it():
    """Devices drawn without spread keep the shared model, the least-squares fit of all their increments, with
    its k parameters charged once; a 30% spread of dw_min over 8 devices rejects it (likelihood-ratio test)."""
    same = TRUTHS["SoftBounds"].model_copy(
        update=dict.fromkeys(("dw_min_dtod", "up_down_dtod", "w_max_dtod", "w_min_dtod"), 0.0)
    )
    tr = measure_cycles(same, n_cycles=1, n_devices=8, read_noise=0.005, seed=2)  # a quarter of a step
    f = fit(tr, kinds=["SoftBounds"], spread=False).fits["SoftBounds"]
    pooled = fit(tr, kinds=["SoftBounds"], spread=False, method="pooled").fits["SoftBounds"]
    assert f.shared and len(f.parts) == 8 and f.params == pytest.approx(pooled.params)
    assert sum(rss for rss, _, _ in f.parts) == pytest.approx(pooled.rss)
    n = np.array([n for _, n, _ in f.parts])
    assert f.bic == pytest.approx(sum(k * np.log(rss / k) for rss, k, _ in f.parts) + 4 * np.log(n.sum()))
    assert f.shared.startswith("one parameter set for all 8 devices") and f.interval == "Jacobian sandwich, normal"
    assert f.summary()["interval"] == f.interval_text == f"{f.shared}; Jacobian sandwich, normal"
    spread = TRUTHS["SoftBounds"].model_copy(update={"dw_min_dtod": 0.3})
    f = fit(
        measure_cycles(spread, n_cycles=1, n_devices=8, read_noise=0.005, seed=2), kinds=["SoftBounds"], spread=False
    ).fits["SoftBounds"]
    assert not f.shared and f.interval.startswith("over 8 devices")


def test_shared_sets_from_a_subsample_start_are_refitted_on_all_increments(monkeypatch):
    """Above START_SAMPLE increments the fit that starts the per-device fits is of a subsample: a shared
    family's residuals and criterion still cover every increment, and the best one is refitted on all of them:
    the pooled method's residual sum of squares (to 0.1%: both stop at scipy's ftol on a flat optimum) and
    standard errors (a fit of the 1000 would give them about 1.6 times larger)."""
    import importlib

    monkeypatch.setattr(importlib.import_module("aimc.calibration.fit"), "START_SAMPLE", 1000)
    same = TRUTHS["SoftBounds"].model_copy(
        update=dict.fromkeys(("dw_min_dtod", "up_down_dtod", "w_max_dtod", "w_min_dtod"), 0.0)
    )
    tr = measure_cycles(same, n_cycles=1, n_devices=8, read_noise=0.005, seed=2)
    res = fit(tr, kinds=["SoftBounds", "LinearStep"], spread=False)
    pooled = fit(tr, kinds=["SoftBounds"], spread=False, method="pooled").fits["SoftBounds"]
    assert res.data.n > 1000 and res.best.kind == "SoftBounds"
    for f in res.fits.values():
        assert f.shared and f.n == res.data.n == len(f.residuals)
        assert sum(rss for rss, _, _ in f.parts) == pytest.approx(f.rss)
    assert res.best.rss == pytest.approx(pooled.rss, rel=1e-3)
    for p, se in pooled.stderr.items():  # its intervals are of all increments, not of the 1000 of the start
        assert res.best.stderr[p] == pytest.approx(se, rel=0.3), p


@pytest.mark.parametrize(
    "n, rank, coverage", [(16, 4, 0.978729), (9, 2, 0.960938), (5, 1, 0.9375), (3, 1, 0.75), (1, 1, 0.0)]
)
def test_median_interval_is_distribution_free(n, rank, coverage):
    # ranks and coverage: 1 - 2 P(Binomial(n, 1/2) < rank), the largest rank at >= 95%, else (min, max)
    (lo, hi), c, cov = median_interval(np.arange(n, 0, -1.0)[:, None] * [1.0, -2.0])
    assert c == rank and cov == pytest.approx(coverage, abs=1e-6)
    assert lo.tolist() == [rank, -2.0 * (n + 1 - rank)] and hi.tolist() == [n + 1 - rank, -2.0 * rank]
    # the coverage holds for any continuous population: skewed estimates around a median of 0
    draws = np.random.default_rng(1).lognormal(0.0, 1.0, size=(20000, n)) - 1.0
    (lo, hi), _, _ = median_interval(draws.T)
    assert np.mean((lo <= 0.0) & (0.0 <= hi)) == pytest.approx(coverage, abs=0.01)
