"""Measured data: an extract of CrossSim's measured set/reset ramps (tests/data/crosssim_ramps.csv, BSD-3,
source in its header) is read and fitted, and one injected glitch read is flagged at its line and leaves the
chosen family and the number of states where they were, as do 1% and 5% of the reads moved by 8 steps."""

from pathlib import Path

import numpy as np
import pytest

from aimc.calibration import fit, read_csv

DATA = Path(__file__).parents[1] / "data" / "crosssim_ramps.csv"
KINDS = ["PiecewiseStep", "LinearStep", "tabulated"]


def test_measured_ramps_fit_is_stable_under_one_outlier():
    tr = read_csv(DATA)
    assert tr.unit == "mS" and tr.n_devices == 1 and len(tr.conductance) == 2720
    clean = fit(tr, kinds=KINDS)
    # 8 set and 8 reset ramps: the 16 ramp starts (polarity 0) are no increments, every other pair is used
    assert clean.data.n == 2720 - 16 and clean.data.quality["n_outliers"] == 0
    g = tr.conductance.copy()
    g[1500] += 2.0 * clean.weight_map.g_scale  # +2.0 in weight units, about the whole range
    glitch = type(tr)(tr.devices, tr.device, tr.pulse, tr.polarity, g, tr.unit, tr.meta, tr.line)
    bad = fit(glitch, kinds=KINDS)
    q = bad.data.quality
    assert q["n_outliers"] == 2 and q["outliers"][0]["at"].startswith(f"line {int(tr.line[1500])} ")
    assert bad.best.kind == clean.best.kind
    assert bad.device.n_states == pytest.approx(clean.device.n_states, rel=0.02)


def _contaminated(tr, frac, step, seed=0):
    """`tr` with a fraction `frac` of its reads moved by +-8 typical steps (`step`, in the file's unit)."""
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(tr.conductance), int(round(frac * len(tr.conductance))), replace=False)
    g = tr.conductance.copy()
    g[rows] += rng.choice([-1.0, 1.0], len(rows)) * 8.0 * step
    return type(tr)(tr.devices, tr.device, tr.pulse, tr.polarity, g, tr.unit, tr.meta, tr.line)


@pytest.mark.parametrize("frac", [0.01, 0.05])
def test_measured_ramps_fit_holds_under_contamination(frac):
    kinds = ["PiecewiseStep", "ExpStep", "LinearStep", "tabulated"]
    tr = read_csv(DATA)
    clean = fit(tr, kinds=kinds, spread=False)
    bad = fit(_contaminated(tr, frac, clean.data.dw0 * clean.weight_map.g_scale), kinds=kinds, spread=False)
    assert clean.best.kind == "PiecewiseStep" and bad.best.kind == clean.best.kind
    assert bad.device.n_states == pytest.approx(clean.device.n_states, rel=0.15)
    assert bad.noise["read_noise"] == pytest.approx(clean.noise["read_noise"], rel=0.5)
