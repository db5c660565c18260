"""A digitised LTP/LTD pair of DNN+NeuroSim's model, G(P) = B (1 - e^(-P/A)) + G_min per direction with
B = (G_max - G_min) / (1 - e^(-P_max/A)), LTP far less non-linear than LTD (A / P_max 0.54 up, 0.22 down:
NL 0.22 and 0.46), read after every pulse with noise 0.2% of the range and written as two `--format runs`
files: the criterion chooses a family with its own bound per direction over the one-shape families, and the
fitted curves between the ends of the measured range give each direction's NL and A / P_max back within 15%.
Truths: the closed-form curves."""

import math

import numpy as np
import pytest

from aimc.calibration import fit, read_runs
from aimc.calibration.response_numbers import crossing, neurosim_a, neurosim_label

P_MAX, G_MIN, G_MAX = 100, 1.0, 5.0
A_NORM = {"up": 0.5433, "down": 0.2165}  # A / P_max


def _curve(r: float) -> np.ndarray:
    """NeuroSim's normalised curve at pulses 0 .. P_MAX: (1 - e^(-P/A)) / (1 - e^(-P_max/A)), A = r P_max."""
    return np.expm1(-np.arange(P_MAX + 1) / (r * P_MAX)) / math.expm1(-1 / r)


def _true_nl(r: float) -> float:
    x = np.linspace(0, 1, 100001)
    return float(np.max(np.expm1(-x / r) / math.expm1(-1 / r) - x))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("neurosim")
    rng = np.random.default_rng(0)
    paths = []
    for name, g in (
        ("up", G_MIN + (G_MAX - G_MIN) * _curve(A_NORM["up"])),
        ("down", G_MAX - (G_MAX - G_MIN) * _curve(A_NORM["down"])),
    ):
        g = g + rng.normal(0.0, 0.002 * (G_MAX - G_MIN), g.shape)
        path = folder / f"D1_{name}.csv"
        path.write_text("pulse,conductance [uS]\n" + "".join(f"{p},{v:.6f}\n" for p, v in enumerate(g)))
        paths.append(path)
    return fit(read_runs(paths), spread=False)


def test_truth_is_what_the_pair_shows():
    assert _true_nl(A_NORM["up"]) == pytest.approx(0.22, abs=0.005)
    assert _true_nl(A_NORM["down"]) == pytest.approx(0.46, abs=0.005)
    x = np.arange(P_MAX + 1) / P_MAX
    assert neurosim_a(x, _curve(A_NORM["up"])) == pytest.approx(A_NORM["up"], rel=1e-6)


def test_neurosim_label_reads_its_table():
    """Rows of MLP_NeuroSim V3.0's Nonlinearity-NormA table come back exactly, values between rows in between,
    and the table's ends are its limits."""
    for label, a in ((0.01, 126.269), (1.51, 0.8195), (2.4, 0.4992), (3.01, 0.3853), (7.51, 0.0702), (9.0, 0.0228)):
        assert neurosim_label(a) == pytest.approx(label, abs=1e-9)
    assert 3.01 < neurosim_label(0.3845) < 3.02  # between the rows 3.01 (0.3853) and 3.02 (0.3838)
    assert neurosim_label(500.0) == 0.0 and math.isnan(neurosim_label(0.01))


def test_up_down_bounds_win_and_give_each_direction_back(pair):
    assert pair.best.kind == "SoftBounds", pair.ranking_table()
    for one_shape in ("linear", "power", "exponential"):
        assert pair.fits[one_shape].bic - pair.best.bic > 10, one_shape
    c = crossing(pair.device, measured=(pair.data.lo, pair.data.hi))
    for label, name in (("LTP", "up"), ("LTD", "down")):
        assert c[f"NL_{label}"] == pytest.approx(_true_nl(A_NORM[name]), rel=0.15), label
        assert c[f"A_over_Pmax_{label}"] == pytest.approx(A_NORM[name], rel=0.15), label
        assert c[f"pulses_{name}"] == pytest.approx(P_MAX, rel=0.15), label
        # the label NeuroSim's table gives the true A / P_max (2.22 up, 4.65 down), within a tenth
        assert c[f"neurosim_label_{label}"] == pytest.approx(neurosim_label(A_NORM[name]), abs=0.1), label


def test_report_numbers_carry_the_measured_range(pair):
    from aimc.calibration import device_numbers

    num = device_numbers(pair.device, n_elements=4, measured=(pair.data.lo, pair.data.hi))
    assert num["crossing_measured"] == crossing(pair.device, measured=(pair.data.lo, pair.data.hi))
    assert "crossing_measured" not in device_numbers(pair.device, n_elements=4)
