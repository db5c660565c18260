"""Input layouts besides the trace format: potentiation/depression run files and a matrix of reads, read
back to the reads they were written from, fitted, and malformed files named by line and column."""

import numpy as np
import pytest

from aimc.calibration import TraceFormatError, fit, measure_cycles, read_matrix, read_runs
from aimc.commands.cli import main
from aimc.devices import SoftBounds

NO_SPREAD = dict(dw_min_dtod=0.0, up_down_dtod=0.0, w_max_dtod=0.0, w_min_dtod=0.0)
TRUTH = SoftBounds(dw_min=0.02, up_down=0.1, w_max=0.7, w_min=-0.5, dw_min_std=0.2, **NO_SPREAD)


def _cycles(n_devices=4):
    return measure_cycles(TRUTH, n_pulses=80, n_cycles=1, n_devices=n_devices, read_noise=0.004, seed=3)


def _write_runs(tr, folder, step_down=1):
    """Per device: D<k>_up.csv (reads 0..80, pulse numbers 0..80) and D<k>_down.csv (reads after the up run,
    every `step_down`-th, pulse numbers from 1)."""
    paths = []
    for d in range(tr.n_devices):
        g = tr.trace(d)[2]
        up = "pulse,conductance [uS]\n" + "".join(f"{k},{float(v)!r}\n" for k, v in enumerate(g[:81]))
        down_idx = np.arange(80, 161, step_down)
        down = "# polarity: down\npulse,conductance [uS]\n" + "".join(f"{k - 80},{float(g[k])!r}\n" for k in down_idx)
        for name, text in (("up", up), ("down", down)):
            path = folder / f"D{d}_{name}.csv"
            path.write_text(text)
            paths.append(path)
    return paths


def test_runs_read_back_and_fit(tmp_path):
    tr = _cycles()
    back = read_runs(_write_runs(tr, tmp_path, step_down=2))
    assert back.devices == ("D0", "D1", "D2", "D3") and back.unit == "uS"
    inc = back.increments()
    # per device: 80 single-pulse up increments, 40 two-pulse down increments, none across the two runs
    assert len(inc.dg) == 4 * 120 and np.sum(inc.n_pulses == 2) == 4 * 40
    assert inc.skipped == {"reads k > 1 pulses apart after pulses of different polarity": 4}
    np.testing.assert_array_equal(back.trace(2)[2][:81], tr.trace(2)[2][:81])
    res = fit(back, kinds=["SoftBounds"], spread=False, g_mid=20.0, g_scale=10.0)
    f = res.best
    for p in ("dw_min", "up_down", "w_max", "w_min"):
        assert abs(f.params[p] - getattr(TRUTH, p)) < 4 * f.stderr[p] + 0.01, p


def test_matrix_reads_back(tmp_path):
    tr = _cycles(3)
    g = tr.conductance.reshape(3, -1).T
    pol = tr.polarity.reshape(3, -1)[0]
    text = "# unit: uS\npulse,polarity,A,B,C\n" + "".join(
        f"{k},{int(s)},{float(row[0])!r},{float(row[1])!r},{float(row[2])!r}\n"
        for k, (s, row) in enumerate(zip(pol, g))
    )
    path = tmp_path / "m.csv"
    path.write_text(text)
    back = read_matrix(path)
    assert back.devices == ("A", "B", "C") and back.unit == "uS"
    np.testing.assert_array_equal(back.conductance, tr.conductance)
    np.testing.assert_array_equal(back.polarity, tr.polarity)
    assert back.where(1) == "line 4 (device A, pulse 1)"


@pytest.mark.parametrize(
    "body, needle",
    [
        ("pulse,polarity,A,B\n0,0,1.0,2.0\n1,+1,1.5,x\n", "line 3, column 4 (B): 'x' is not a number"),
        ("pulse,polarity,A\n0,0,1.0\n1,2,1.5\n", "line 3, column 2 (polarity)"),
        ("pulse,polarity,A\n1,0,1.0\n1,1,1.5\n", "line 3, column 1 (pulse): 1 does not increase"),
        ("pulse,A\n0,1.0\n", "line 1: header must be"),
    ],
)
def test_matrix_errors_name_line_and_column(tmp_path, body, needle):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(TraceFormatError, match="bad.csv: ") as err:
        read_matrix(path)
    assert needle in str(err.value)


def test_cli_format_runs(tmp_path):
    paths = _write_runs(_cycles(3), tmp_path)
    out = tmp_path / "fit"
    assert (
        main(
            [
                "fit",
                *map(str, paths),
                "--format",
                "runs",
                "--out",
                str(out),
                "--families",
                "SoftBounds",
                "--quiet",
                "--elements",
                "4",
                "--no-spread",
            ]
        )
        == 0
    )
    assert (out / "device.json").is_file()
    bad = tmp_path / "bad_up.csv"
    bad.write_text("pulse,conductance [uS]\n0,1.0\n1,abc\n")
    assert main(["fit", str(bad), "--format", "runs", "--out", str(tmp_path / "x"), "--quiet"]) == 2


def test_every_run_after_one_of_its_direction_starts_unpulsed(tmp_path):
    paths = []
    for k in range(3):  # three one-read runs up: no read follows a known pulse
        paths.append(tmp_path / f"D1_{k}.csv")
        paths[-1].write_text("# polarity: +1\npulse,conductance [uS]\n0,1.0\n")
    t = read_runs(paths)
    assert t.polarity.tolist() == [1, 0, 0] and t.pulse.tolist() == [0, 2, 4]
