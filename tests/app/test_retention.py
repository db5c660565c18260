"""`aimc retention`: idle times on a finished run folder, with and without global drift compensation."""

from __future__ import annotations

import csv
import errno
import json

import numpy as np
import pytest

from aimc.commands.cli import main
from aimc.common.errors import ConfigError
from aimc.config import validate_config
from aimc.devices.drift import DriftParameter
from aimc.runs.experiment import run_experiment
from aimc.runs.retention import COLUMNS, parse_time, retention

NU = 0.1
DEVICE = {
    "kind": "SoftBounds",
    "w_max_dtod": 0.0,
    "w_min_dtod": 0.0,  # no element with both bounds > 0
    "drift": {"nu": NU},
}  # one nu for every element: a uniform drift
TINY = {
    "name": "r",
    "epochs": 1,
    "batch_size": 10,
    "model": {"hidden": [8]},
    "data": {"n_train": 50, "n_test": 50},
    "tile": {"device": DEVICE, "forward": {"ideal": True}},  # exact reads: the compensation is exact too
    "compare": [{"algorithm": "sgd", "lr": 0.5}, {"algorithm": "analog_sgd", "lr": 0.1}],
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("retention") / "run"
    run_experiment(validate_config(TINY), root)
    return root


def _rows(root):
    with open(root / "retention.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_parse_time_units_and_bad_times():
    assert parse_time("90") == 90.0 and parse_time("1h") == 3600.0 and parse_time("2.5d") == 2.5 * 86400
    assert parse_time("1mo") == 30 * 86400 and parse_time("10y") == 10 * 365.25 * 86400
    for bad in ("0", "-1", "1 week", "h", "inf", "nan", "1e999"):
        with pytest.raises(ConfigError, match="expected a positive number"):
            parse_time(bad)


def test_cli_retention_writes_the_table_and_figure(run_dir, capsys):
    assert main(["retention", str(run_dir), "--times", "1", "100", "1h", "--quiet"]) == 0
    assert "retention" in capsys.readouterr().out
    rows = _rows(run_dir)
    assert tuple(rows[0]) == COLUMNS
    assert [(r["algorithm"], r["time"]) for r in rows] == [
        (a, t) for a in ("sgd", "analog_sgd") for t in ("0", "1", "100", "1h")
    ]
    digital = {r["test_accuracy"] for r in rows if r["algorithm"] == "sgd"}
    assert len(digital) == 1  # no tiles: nothing drifts
    analog = [r for r in rows if r["algorithm"] == "analog_sgd"]
    for r in analog:  # a uniform drift scales every weight by (t / t_0)^-nu; the probe ratio undoes it
        t = float(r["time_s"])
        assert float(r["compensation_scale"]) == pytest.approx(max(t, 1.0) ** NU, rel=1e-4)
        assert r["test_accuracy_compensated"] == analog[0]["test_accuracy"]
    for name in ("retention.png", "retention.pdf"):
        assert (run_dir / name).stat().st_size > 1000
    assert not list(run_dir.glob(".*.tmp"))


def test_cli_retention_write_is_atomic(run_dir, monkeypatch):
    import aimc.common.files

    (run_dir / "retention.csv").write_text("old\n")

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(aimc.common.files.os, "fsync", full_disk)
    assert main(["retention", str(run_dir), "--times", "1h", "--quiet"]) == 1
    assert (run_dir / "retention.csv").read_text() == "old\n"
    assert not list(run_dir.glob(".*.tmp"))


def test_cli_retention_bad_input(run_dir, tmp_path, capsys):
    cases = [
        ([str(tmp_path / "nowhere")], "no such run folder"),
        ([str(tmp_path)], "not a run folder"),
        ([str(run_dir), "--times", "1", "-5"], "time '-5'"),
        ([str(run_dir), "--drift", "nu=-1"], "--drift.nu"),
        ([str(run_dir), "--drift", "mu=0.1"], "--drift.mu"),
        ([str(run_dir), "--step-time", "0"], "--step-time"),
    ]
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    for name in ("config.json", "manifest.json"):
        (unfinished / name).write_text((run_dir / name).read_text())
    manifest = json.loads((unfinished / "manifest.json").read_text())
    (unfinished / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    cases.append(([str(unfinished)], "not finished"))
    for args, what in cases:
        assert main(["retention", *args, "--quiet"]) == 2, args
        err = capsys.readouterr().err.strip()
        assert what in err and len(err.splitlines()) == 1, err


def test_drift_off_keeps_the_trained_weights(run_dir):
    rows = retention(run_dir, ["10y"], drift=DriftParameter())  # nu = 0 for every tile instead of the device's
    analog = [r for r in rows if r["algorithm"] == "analog_sgd"]
    assert analog[0]["test_accuracy"] == analog[1]["test_accuracy"] and analog[1]["compensation_scale"] == 1.0


def test_retention_table_runs_after_training_and_leaves_the_hash(tmp_path, capsys):
    table = {"times": ["1h"], "drift": {"nu": 0.0}, "seed": 3}
    cfg = validate_config({**TINY, "retention": table})
    assert cfg.hash() == validate_config(TINY).hash()  # evaluated after training: no training result changes
    root = tmp_path / "run"
    run_experiment(cfg, root)
    rows = _rows(root)
    assert [(r["algorithm"], r["time"]) for r in rows] == [(a, t) for a in ("sgd", "analog_sgd") for t in ("0", "1h")]
    analog = [r for r in rows if r["algorithm"] == "analog_sgd"]
    assert analog[0]["test_accuracy"] == analog[1]["test_accuracy"]  # nu = 0 instead of the device's 0.1
    (root / "retention.csv").unlink()
    assert main(["retention", str(root), "--quiet"]) == 0  # the run's own table gives the defaults
    assert [r["time"] for r in _rows(root)] == ["0", "1h", "0", "1h"]
    with pytest.raises(ConfigError, match=r"retention\.times.*'2 weeks'"):
        validate_config({**TINY, "retention": {"times": ["2 weeks"]}})


def test_repeats_over_idle_draws_and_the_reference_lines(run_dir, monkeypatch):
    import aimc.runs.retention as R

    figs = []
    monkeypatch.setattr(R, "save_figure", lambda fig, path: figs.append(fig))
    drift = DriftParameter(nu=0.05, nu_dtod=0.5)  # element-to-element exponents: each seed draws its own
    rows = retention(run_dir, ["1d"], seed=3, drift=drift, repeats=3)
    analog = [r for r in rows if r["algorithm"] == "analog_sgd"]
    assert [(r["seed"], r["time"]) for r in analog] == [(s, t) for s in (3, 4, 5) for t in ("0", "1d")]
    ax = figs[0].axes[0]
    start = 100 * analog[0]["test_accuracy"]
    refs = {line.get_label(): line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"}
    assert refs["analog_sgd right after training"] == pytest.approx(start)
    assert "sgd (digital)" in refs
    day = [100 * r["test_accuracy"] for r in analog if r["time"] == "1d"]
    bars = ax.containers[0]  # analog_sgd as read: mean and sample std over the 3 seeds
    assert bars.lines[0].get_ydata()[0] == pytest.approx(np.mean(day))
    assert "mean \u00b1 1 sample std over 3 seeds" in ax.get_title()
    with pytest.raises(ConfigError, match="--repeats"):
        retention(run_dir, ["1d"], repeats=0)
