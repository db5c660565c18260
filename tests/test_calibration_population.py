"""Per-device fits, then the population: on a population of 16 simulated soft-bounds devices with
device-to-device spread the family chosen by the summed per-device criterion is the true one, and the true
nominal parameters lie inside the 95% intervals over devices. Truths are the simulated configs."""

import numpy as np
import pytest

from aimc.calibration import fit, measure_cycles
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


def test_cli_per_device_method(tmp_path):
    import json

    from aimc.calibration import write_csv
    from aimc.cli import main
    tr = measure_cycles(TRUTHS["SoftBounds"], n_cycles=1, n_devices=4, read_noise=0.002, seed=1)
    csv = write_csv(tr, tmp_path / "sb.csv")
    out = tmp_path / "fit"
    assert main(["fit", str(csv), "--out", str(out), "--method", "per-device", "--families", "SoftBounds,ConstantStep",
                 "--intervals", "bootstrap", "--bootstrap", "500", "--quiet", "--elements", "4"]) == 0
    summary = json.loads((out / "fit.json").read_text())
    sb = summary["families"]["SoftBounds"]
    assert summary["method"] == "per-device"
    assert sb["interval"].startswith("bootstrap over 4 devices (per-device estimates resampled), 500")
    report = (out / "report.html").read_text()
    assert sb["n_devices_fitted"] == 4 and "identified" in report and "bootstrap over 4 devices" in report
