"""Sparse data: a digitised potentiation/depression pair (one device, reads a few pulses apart, pulse numbers
rounded) fits and reports with the sections it cannot compute saying why; reads every 4 pulses give a table and
the cycle noise of the truth (a k-pulse increment carries the variance of k steps)."""

import json

import numpy as np
import pytest

from aimc.calibration import fit, measure_cycles
from aimc.calibration.traces import TraceSet
from aimc.commands.cli import main
from aimc.devices import SoftBounds

NO_SPREAD = dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0)
TRUTH = SoftBounds(dw_min=0.02, up_down=0.1, w_max=0.7, w_min=-0.5, dw_min_std=0.3, **NO_SPREAD)


def _digitised(folder):
    """D1_up.csv and D1_down.csv: one noisy cycle of TRUTH read after pulses 0, 3, 5, 9, ... (gaps of 1 to 4)."""
    tr = measure_cycles(TRUTH, n_pulses=90, n_cycles=1, n_devices=1, read_noise=0.004, seed=5)
    g = tr.trace(0)[2]
    gaps = np.random.default_rng(1).integers(1, 5, size=60)
    at = np.concatenate([[0], np.cumsum(gaps)])
    at = at[at <= 90]
    paths = []
    for name, start, sign in (("up", 0, "up"), ("down", 90, "down")):
        body = "".join(f"{p},{float(g[start + p]):.4g}\n" for p in at)
        path = folder / f"D1_{name}.csv"
        path.write_text(f"# polarity: {sign}\npulse,conductance [uS]\n{body}")
        paths.append(str(path))
    return paths


def test_digitised_pair_reports_with_reasons(tmp_path):
    out = tmp_path / "fit"
    args = ["fit", *_digitised(tmp_path), "--format", "runs", "--out", str(out), "--quiet", "--elements", "4"]
    assert main([*args, "--families", "SoftBounds,LinearStep,tabulated"]) == 0
    page = (out / "report.html").read_text()
    # fewer than 50 triples of consecutive single-pulse increments: the anchor section says so
    assert "not estimated: 50 triples of consecutive single-pulse increments" in page
    assert json.loads((out / "fit.json").read_text())["quality"]["n_multi_pulse"] > 0


def _every(k):
    tr = measure_cycles(TRUTH, n_cycles=2, n_devices=8, read_noise=0.005, seed=2)
    keep = (tr.pulse % k == 0) | (tr.polarity == 0)
    rows = (tr.device[keep], tr.pulse[keep], tr.polarity[keep], tr.conductance[keep])
    return TraceSet(tr.devices, *rows, tr.unit, tr.meta)


def test_reads_every_four_pulses_give_the_table_and_the_noise():
    res = fit(_every(4), kinds=["SoftBounds", "tabulated"], spread=False)
    assert res.data.k.min() == 4 and "tabulated" in res.fits
    n = res.noise
    # the cycle noise of the truth (0.3) within the 95% interval of the estimate, and exported
    assert abs(n["sigma_multiplicative"] - 0.3) < 1.96 * n["sigma_multiplicative_se"]
    assert n["form"] == "multiplicative" and res.device.dw_min_std == pytest.approx(n["sigma_multiplicative"])
    assert abs(n["read_noise"] - 0.005) < 1.96 * n["read_noise_se"]
