"""Trace files as people have them: a byte-order mark, another encoding, values that would overflow the fit,
any text at all (property-based), and `aimc fit` leaving no partial output folder when it fails."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aimc.calibration import TraceFormatError, read_csv
from aimc.commands.cli import main
from aimc.common.errors import ConfigError

HEAD = "device,pulse,polarity,conductance [uS]\n"
ROWS = "".join(f"d,{k},{'+1' if k else '0'},{1.0 + 0.1 * k}\n" for k in range(5))


def test_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (HEAD + ROWS).encode())
    tr = read_csv(path)
    assert tr.devices == ("d",) and tr.unit == "uS"
    np.testing.assert_allclose(tr.conductance, [1.0, 1.1, 1.2, 1.3, 1.4])
    np.testing.assert_array_equal(tr.line, [2, 3, 4, 5, 6])


def test_non_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes((HEAD + ROWS).encode() + "d\xe9v,5,+1,1.5\n".encode("latin-1"))
    with pytest.raises(TraceFormatError, match=r"latin1\.csv: line 7: byte 0xe9 at offset \d+ is not UTF-8"):
        read_csv(path)


@pytest.mark.parametrize("value", ["1e308", "-2e200", "1e151"])
def test_values_that_would_overflow_the_fit_are_refused(tmp_path, value):
    path = tmp_path / "big.csv"
    path.write_text(HEAD + ROWS + f"d,5,+1,{value}\n")
    with pytest.raises(TraceFormatError, match=r"line 7, column 4 \(conductance\)"):
        read_csv(path)


_LINE = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda *c: ",".join(c),
        st.text(max_size=6),
        st.integers(-3, 2**64).map(str),
        st.sampled_from(["+1", "-1", "0", "up", "x", ""]),
        st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=8)),
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    head=st.sampled_from([HEAD, "\ufeff" + HEAD, "# g_mid: 1\n" + HEAD, "", "device,pulse\n"]),
    lines=st.lists(_LINE, max_size=8),
    tail=st.binary(max_size=6),
)
def test_any_input_loads_or_names_a_line(tmp_path, head, lines, tail):
    path = tmp_path / "gen.csv"
    path.write_bytes((head + "\n".join(lines)).encode("utf-8", "surrogatepass") + tail)
    try:
        tr = read_csv(path)
    except ConfigError as err:
        assert "line " in str(err), str(err)
        return
    assert np.all(np.isfinite(tr.conductance)) and np.all(np.abs(tr.conductance) <= 1e150)
    assert len(tr.line) == len(tr.conductance)


def _traces(tmp_path):
    from aimc.calibration import measure_cycles, write_csv
    from aimc.devices import Linear

    return write_csv(measure_cycles(Linear(tau=0.6, dw_min=0.05), n_devices=2, seed=1), tmp_path / "t.csv")


def test_failed_fit_leaves_no_output_folder(tmp_path, monkeypatch):
    import aimc.calibration

    def broken(*args, **kwargs):
        raise ValueError("report failed")

    csv = _traces(tmp_path)
    monkeypatch.setattr(aimc.calibration, "write_report", broken)
    out = tmp_path / "out"
    assert main(["fit", str(csv), "--out", str(out), "--families", "linear", "--quiet"]) == 2
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]  # no temporary folder left either
    out.mkdir()
    (out / "keep.txt").write_text("previous")
    assert main(["fit", str(csv), "--out", str(out), "--families", "linear", "--quiet"]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]  # the previous folder is untouched
