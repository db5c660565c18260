"""Trace data type and CSV format: round trip, increments, and errors naming line and column."""

import numpy as np
import pytest

from aimc.calibration import TraceFormatError, from_arrays, measure_cycles, read_csv, write_csv
from aimc.calibration.protocols import cycle_polarity
from aimc.devices import Ideal


def test_csv_round_trip(tmp_path):
    g = np.array([[1.0, 2.0], [1.5, 2.25], [1.25, 2.5]])
    tr = from_arrays(g, [0, 1, -1], unit="nS", labels=["a", "b"], meta={"note": "x y"})
    back = read_csv(write_csv(tr, tmp_path / "t.csv"))
    assert back.devices == ("a", "b") and back.unit == "nS" and back.meta["note"] == "x y"
    np.testing.assert_array_equal(back.conductance, tr.conductance)
    np.testing.assert_array_equal(back.polarity, tr.polarity)
    np.testing.assert_array_equal(back.pulse, tr.pulse)


def test_increments_pair_consecutive_reads():
    g = np.array([[0.0], [1.0], [3.0], [2.0]])
    inc = from_arrays(g, [0, 1, 1, -1]).increments()
    np.testing.assert_array_equal(inc.dg, [1.0, 2.0, -1.0])
    np.testing.assert_array_equal(inc.g, [0.5, 2.0, 2.5])
    np.testing.assert_array_equal(inc.polarity, [1, 1, -1])
    np.testing.assert_array_equal(inc.follows, [False, True, True])


def test_cycle_protocol_shape_and_bounds():
    dev = Ideal(tau=1.0, dw_min=0.1)  # 20 states, constant step
    tr = measure_cycles(dev, n_pulses=30, n_cycles=2, n_devices=3, g_mid=10.0, g_scale=2.0)
    assert tr.n_devices == 3 and len(tr.conductance) == 3 * (1 + 2 * 2 * 30)
    np.testing.assert_array_equal(tr.polarity[:61], cycle_polarity(30, 1))
    p, s, g = tr.trace(0)
    assert g[0] == pytest.approx(10.0 - 2.0, abs=1e-5)  # RESET drives the element to w = -tau
    assert g.max() == pytest.approx(10.0 + 2.0, abs=1e-5)
    np.testing.assert_allclose(np.diff(g[:11]), 0.2, atol=1e-5)  # dw_min * g_scale per pulse


@pytest.mark.parametrize(
    "body, line, needle",
    [
        ("device,pulse,polarity,conductance [uS]\n0,0,0,1.0\n0,1,+1,abc\n", 3, "column 4 (conductance)"),
        ("device,pulse,polarity,conductance [uS]\n0,0,0,1.0\n0,1,2,1.0\n", 3, "column 3 (polarity)"),
        ("device,pulse,polarity,conductance [uS]\n0,0,0,1.0\n0,x,1,1.0\n", 3, "column 2 (pulse)"),
        ("device,pulse,polarity,conductance [uS]\n0,1,0,1.0\n0,1,1,1.0\n", 3, "does not increase"),
        ("device,pulse,polarity,conductance [uS]\n0,0,0\n", 2, "expected 4 columns"),
        ("# c\ndevice,pulse,polarity,conductance [furlong]\n", 2, "unknown unit"),
        ("device,pulse,sign,conductance [uS]\n", 1, "column 3"),
    ],
)
def test_malformed_files_name_line_and_column(tmp_path, body, line, needle):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(TraceFormatError, match=f"line {line}") as err:
        read_csv(path)
    assert needle in str(err.value)


def test_missing_header_and_file(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("# only a comment\n")
    with pytest.raises(TraceFormatError, match="no header"):
        read_csv(path)
    with pytest.raises(FileNotFoundError):
        read_csv(tmp_path / "nope.csv")
