"""Properties of the readers of user input: the matrix and runs trace layouts (calibration/formats.py) read
back exactly what was written, and fail only with an error naming the file and line; the retention
options (times, --drift) give the seconds of their units or a one-line error naming the option."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aimc.calibration.formats import read_matrix, read_runs
from aimc.calibration.traces import TraceFormatError
from aimc.commands.retention import drift_option
from aimc.common.errors import ConfigError
from aimc.config import TIME_UNITS, parse_time

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
reads = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
labels = st.lists(st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,5}", fullmatch=True), min_size=1, max_size=4, unique=True)
gaps = st.lists(st.integers(1, 5), min_size=1, max_size=12)


def _pulses(steps: list[int], start: int = 0) -> list[int]:
    return list(np.cumsum([start, *steps[1:]]))


@SETTINGS
@given(labels=labels, steps=gaps, pols=st.data(), data=st.data())
def test_a_matrix_reads_back_what_was_written(tmp_path_factory, labels, steps, pols, data):
    pulses = _pulses(steps)
    polarity = [pols.draw(st.sampled_from(["+1", "-1", "0", "up", "down"])) for _ in pulses]
    g = [[data.draw(reads) for _ in labels] for _ in pulses]
    path = tmp_path_factory.mktemp("m") / "m.csv"
    lines = ["# unit: uS", ",".join(["pulse", "polarity", *labels])]
    lines += [",".join([str(p), s, *map(repr, row)]) for p, s, row in zip(pulses, polarity, g)]
    path.write_text("\n".join(lines) + "\n")
    t = read_matrix(path)
    sign = {"+1": 1, "up": 1, "-1": -1, "down": -1, "0": 0}
    assert t.devices == tuple(labels) and t.unit == "uS"
    assert t.conductance.tolist() == np.asarray(g, float).T.ravel().tolist()  # repr: every float exactly
    assert t.pulse.tolist() == pulses * len(labels)
    assert t.polarity.tolist() == [sign[s] for s in polarity] * len(labels)
    assert t.line.tolist() == list(range(3, 3 + len(pulses))) * len(labels)


@SETTINGS
@given(
    runs=st.lists(st.tuples(gaps, st.sampled_from([1, -1]), st.integers(0, 100)), min_size=1, max_size=4),
    data=st.data(),
)
def test_runs_join_per_device_two_pulses_apart_and_a_run_after_one_of_its_direction_starts_unpulsed(
    tmp_path_factory, runs, data
):
    folder = tmp_path_factory.mktemp("r")
    paths, want_p, want_s, want_g = [], [], [], []
    for k, (steps, sign, start) in enumerate(runs):
        pulses = _pulses(steps, start)
        g = [data.draw(reads) for _ in pulses]
        path = folder / f"D1_{k}.csv"
        body = "\n".join(f"{p},{v!r}" for p, v in zip(pulses, g))
        path.write_text(f"# polarity: {'+1' if sign == 1 else '-1'}\npulse,conductance [uS]\n{body}\n")
        paths.append(path)
        offset = want_p[-1] + 2 if want_p else 0
        want_p += [offset + p - pulses[0] for p in pulses]
        after_same = k > 0 and runs[k - 1][1] == sign  # its first read follows no pulse of this run
        want_s += [0 if after_same else sign] + [sign] * (len(pulses) - 1)
        want_g += g
    t = read_runs(paths)
    assert t.devices == ("D1",) and t.pulse.tolist() == want_p
    assert t.polarity.tolist() == want_s and t.conductance.tolist() == want_g


@SETTINGS
@given(cell=st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters=',\n\r"\x00'), max_size=8))
def test_a_bad_cell_is_an_error_naming_the_file_and_line(tmp_path_factory, cell):
    path = tmp_path_factory.mktemp("b") / "bad.csv"
    path.write_text(f"pulse,polarity,A\n0,+1,1.0\n1,+1,{cell}\n")
    try:
        t = read_matrix(path)
    except TraceFormatError as err:
        assert str(err).startswith(f"{path}: line 3")
    else:
        assert t.conductance[1] == float(cell)  # a cell read is a number Python reads


@given(value=st.floats(1e-6, 1e6), unit=st.sampled_from(sorted(TIME_UNITS)), space=st.sampled_from(["", " "]))
def test_a_time_is_its_value_times_its_unit(value, unit, space):
    assert parse_time(f"{value!r}{space}{unit}") == value * TIME_UNITS[unit]


@given(text=st.text(max_size=10))
def test_a_time_is_seconds_or_a_one_line_error_naming_it(text):
    try:
        seconds = parse_time(text)
    except ConfigError as err:
        assert str(err).startswith(f"time {text!r}: expected a positive number") and "\n" not in str(err)
    else:
        assert seconds > 0 and np.isfinite(seconds)


@given(
    key=st.sampled_from(["nu", "nu_dtod", "mu", "", "nu "]),
    raw=st.one_of(st.floats(allow_nan=True).map(repr), st.text(max_size=6)),
)
def test_a_drift_option_is_a_drift_or_a_one_line_error_naming_the_option(key, raw):
    try:
        drift = drift_option([f"{key}={raw}"])
    except ConfigError as err:
        assert str(err).startswith("--drift") and "\n" not in str(err), str(err)
    else:
        assert getattr(drift, key.strip()) == pytest.approx(float(raw))


def test_the_unit_table():
    assert (TIME_UNITS["s"], TIME_UNITS["min"], TIME_UNITS["h"], TIME_UNITS["d"]) == (1, 60, 3600, 86400)
    assert TIME_UNITS["y"] == 365.25 * 86400
