"""Report numbers a reader checks the data against: pulses to cross the range and non-linearity (closed forms
for soft bounds), the aihwkit snippet, the warnings of degenerate and noise-dominated fits, the report's
names and its data-quality section."""

import json
import math

import pytest

from aimc.calibration import fit, measure_cycles, write_csv, write_report
from aimc.calibration.fit import fit_warnings
from aimc.calibration.report import aihwkit_snippet, fit_flags
from aimc.calibration.response_numbers import crossing
from aimc.devices import ConstantStep, Linear, LinearStep, SoftBounds

NO_SPREAD = dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0, dw_min_std=0.0)


def test_pulses_to_cross_and_non_linearity_closed_forms():
    # constant step: (range - dw/2) / dw pulses, a straight line (NL 0)
    c = crossing(ConstantStep(dw_min=0.01, up_down=0.0, w_max=1.0, w_min=-1.0, **NO_SPREAD))
    assert c["pulses_up"] == pytest.approx(1.995 / 0.01, rel=1e-6) and c["NL_LTP"] < 1e-9
    # soft bounds on [-1, 1]: step dw (1 - w), so P = ln(2 / h) / dw to within h = dw/2 of the bound; the
    # normalised curve 1 - 400^-x against the line 0.9975 x is furthest at 400^-x = 0.9975 / ln 400
    s = crossing(SoftBounds(dw_min=0.01, up_down=0.0, w_max=1.0, w_min=-1.0, **NO_SPREAD))
    assert s["pulses_up"] == pytest.approx(math.log(400) / 0.01, rel=1e-3)
    u = 0.9975 / math.log(400)
    x = -math.log(u) / math.log(400)
    assert s["NL_LTP"] == pytest.approx(1 - u - 0.9975 * x, rel=1e-3)
    assert s["NL_LTD"] == pytest.approx(s["NL_LTP"], rel=1e-6)


def test_aihwkit_snippet_names_its_class_and_fields():
    dev = LinearStep(dw_min=0.02, up_down=-0.1, w_max=0.6, w_min=-0.5, gamma_up=0.3, gamma_down=0.6)
    text = aihwkit_snippet(dev.model_dump(mode="json"))
    assert "import LinearStepDevice" in text and "gamma_up=0.3" in text and "kind=" not in text
    r1 = aihwkit_snippet(Linear(tau=0.6).model_dump(mode="json"))
    assert "has no 'linear' family" in r1 and "import PiecewiseStepDevice" in r1 and "piecewise_up=[" in r1


def test_fit_flags_degenerate_and_noise_dominated():
    fitd = {"best": "x", "families": {"x": {"diagnostics": {"r2": 0.01}, "flags": {"w_max": "extrapolated"}}}}
    flags = fit_flags(fitd, {"n_states": 1.5})
    assert any("degenerate" in f for f in flags) and any("noise-dominated" in f for f in flags)
    assert "w_max: extrapolated" in flags
    assert fit_flags({"best": "x", "families": {"x": {"diagnostics": {"r2": 0.9}}}}, {"n_states": 50}) == []
    # the threshold is a tenth of the increment variance (explained beyond a constant step)
    for r2, flagged in ((0.095, True), (0.105, False)):
        best = {"diagnostics": {"r2": r2}}
        assert any(w.startswith("noise-dominated") for w in fit_warnings(best, {}, {})) is flagged


def test_fit_result_carries_its_warnings(tmp_path):
    """A fit whose model explains little of its increments (steps 10x smaller than their cycle noise) says so
    itself, in its device file and on the command line, not only in the report."""
    truth = ConstantStep(dw_min=0.01, up_down=0.0, w_max=0.5, w_min=-0.5, **{**NO_SPREAD, "dw_min_std": 3.0})
    res = fit(measure_cycles(truth, n_devices=3, read_noise=0.0, seed=1), kinds=["LinearStep"], spread=False)
    assert res.best.diagnostics["r2"] < 0.1
    assert any(w.startswith("noise-dominated fit") for w in res.warnings)
    res.save(tmp_path)
    saved = json.loads((tmp_path / "device.json").read_text())["fit"]["warnings"]
    assert saved == res.warnings


def test_fit_report_named_after_the_trace_file(tmp_path):
    truth = Linear(tau=0.6, c=0.1, dw_min=0.03, dw_min_std=0.2)
    csv = write_csv(measure_cycles(truth, n_devices=3, read_noise=0.003, seed=5), tmp_path / "cycles.csv")
    from aimc.calibration import read_csv

    res = fit(read_csv(csv), kinds=["linear"], spread=False, source=str(csv))
    page = write_report([res], tmp_path / "rep", n_elements=4)
    nums = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert list(nums) == ["cycles (linear)"]
    text = page.read_text()
    assert "Data quality" in text and "pulses to cross the range" in text and "aihwkit" in text


def test_model_trace_follows_the_pulses_and_restarts():
    from aimc.calibration import WeightMap, from_arrays
    from aimc.calibration.pulse_data import model_trace

    dev = ConstantStep(dw_min=0.1, up_down=0.0, w_max=1.0, w_min=-1.0, **NO_SPREAD)
    g = [[0.0], [0.13], [0.18], [0.5], [0.42], [0.0]]
    tr = from_arrays(g, [0, 1, 1, 0, -1, -1])
    tr = type(tr)(
        tr.devices, tr.device, tr.pulse * [1, 1, 1, 1, 1, 1] + [0, 0, 0, 0, 0, 3], tr.polarity, tr.conductance, tr.unit
    )
    out = model_trace(dev, tr, WeightMap(0.0, 1.0, "a.u."), 0)
    # 2 up steps of 0.1 from 0, a restart at the read after no pulse (0.5), 1 down step, then 4 down steps
    assert out["model"] == pytest.approx([0.0, 0.1, 0.2, 0.5, 0.4, 0.0])


def test_a_one_sided_cell_is_reported_by_its_device():
    """aihwkit_pcm is two devices of one kind (G+, G-): its report shows that device's response."""
    from aimc.calibration.report import resolve
    from aimc.devices import get_preset

    subject = resolve("aihwkit_pcm")
    assert subject.device == get_preset("aihwkit_pcm").device and subject.device.kind == "ExpStep"
    assert subject.name == "aihwkit_pcm (one device of the cell)"
