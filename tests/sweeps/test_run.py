"""Running sweeps: real tiny training runs in this process, a local process pool and a Dask LocalCluster on
loopback; failures are recorded without stopping the rest, reruns resume, the summary is numpy's."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

from aimc.commands.cli import main
from aimc.sweeps.executors import InlineExecutor, LocalExecutor, execute_run, make_task
from aimc.sweeps.runner import SweepRunner, run_sweep
from aimc.sweeps.summary import summarize
from aimc.sweeps.sweep_file import load_sweep, parse_sweep
from aimc.toml_writer import to_toml

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples/sweeps/small.toml"
BASE = {
    "name": "tiny",
    "epochs": 1,
    "batch_size": 10,
    "model": {"name": "fcn", "hidden": [8]},
    "data": {"name": "mnist_small", "n_train": 30, "n_test": 30},
    "tile": {"device": "r1_exp_2", "update": {"mode": "expected"}},
    "trainer": {"algorithm": "analog_sgd"},
}
# the second point asks for more images than the shipped subset has: it fails at run time, not validation
FAILING_AXIS = {"field": "data.n_train", "values": [30, 1_000_000]}


def tiny(**kw):
    return parse_sweep({"name": "tiny", "base": BASE, **kw})


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def results(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in (out / "runs").glob("*/result.json")}


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def check_summary(sweep, out: Path) -> None:
    """summary.csv equals numpy's mean and sample std over the seeds of each point's result files."""
    res = results(out)
    rows = read_csv(out / "summary.csv")
    assert len(rows) == len(sweep.points)
    for point, row in enumerate(rows):
        done = [res[r.config_hash]["metrics"] for r in sweep.runs if r.point == point and r.config_hash in res]
        assert int(row["done"]) == len(done)
        for m in ("test_accuracy", "test_loss", "train_loss"):
            vals = np.array([d[m] for d in done], float)
            if len(vals) == 0:
                assert row[f"{m}_mean"] == ""
                continue
            assert float(row[f"{m}_mean"]) == pytest.approx(np.mean(vals), rel=1e-12)
            if len(vals) > 1:
                assert float(row[f"{m}_std"]) == pytest.approx(np.std(vals, ddof=1), rel=1e-12, abs=1e-15)


def test_summary_is_numpys_mean_and_sample_std():
    s = tiny(seeds=3, axes=[{"field": "trainer.lr", "values": [0.01, 0.1]}])
    rng = np.random.default_rng(0)
    res = {
        r.config_hash: {
            "test_accuracy": float(rng.uniform()),
            "pulses": int(rng.integers(100)),
            "latency_model": None,
            "algorithm": "x",
        }
        for r in s.runs
    }
    res.pop(s.runs[5].config_hash)  # a failed run of point 1
    res[s.runs[4].config_hash]["test_accuracy"] = None  # a null value counts as NaN
    metrics, rows = summarize(s, res)
    assert metrics == ["test_accuracy", "pulses"]  # numbers only
    acc = [res[r.config_hash]["test_accuracy"] for r in s.runs[:3]]
    assert rows[0]["test_accuracy_mean"] == pytest.approx(np.mean(acc), rel=1e-15)
    assert rows[0]["test_accuracy_std"] == pytest.approx(np.std(acc, ddof=1), rel=1e-15)
    assert (rows[1]["runs"], rows[1]["done"]) == (3, 2) and math.isnan(rows[1]["test_accuracy_mean"])
    pulses = [res[r.config_hash]["pulses"] for r in s.runs[3:5]]
    assert rows[1]["pulses_mean"] == np.mean(pulses) and rows[1]["pulses_std"] == np.std(pulses, ddof=1)
    assert rows[0]["trainer.lr"] == "0.01"


def test_tasks_are_plain_data_and_a_failure_is_an_outcome(tmp_path):
    run = tiny(axes=[FAILING_AXIS]).runs[1]
    task = make_task(run.config.model_dump(mode="json"), run.config_hash, str(tmp_path / "r"))
    assert json.loads(json.dumps(task)) == task
    out = execute_run(task)
    assert out["status"] == "failed" and "DataError" in out["error"] and "n_train" in out["error"]
    assert "Traceback" in out["traceback"] and out["metrics"] is None
    out = execute_run({**task, "config_hash": "0" * 16})
    assert out["status"] == "failed" and "gives the config hash" in out["error"]


def test_a_failing_run_is_recorded_and_a_rerun_resumes(tmp_path):
    s = tiny(seeds=2, axes=[FAILING_AXIS])
    out = tmp_path / "sweep"
    assert run_sweep(s, out, InlineExecutor(), log=None) == {"pending": 0, "running": 0, "done": 2, "failed": 2}
    m = manifest(out)
    by_point = {(e["point"], e["seed"]): e for e in m["runs"]}
    for seed in (0, 1):
        ok, bad = by_point[(0, seed)], by_point[(1, seed)]
        assert ok["status"] == "done" and ok["error"] is None and ok["duration_s"] > 0
        assert ok["package_version"] and ok["started"] and ok["finished"] and ok["attempts"] == 1
        assert bad["status"] == "failed" and "only 6000 samples" in bad["error"]
        assert "Traceback" in (out / bad["folder"] / "error.txt").read_text()
        for e in (ok, bad):
            cfg = json.loads((out / e["folder"] / "config.json").read_text())
            assert cfg["seed"] == e["seed"] and (out / e["folder"] / "config.toml").is_file()
    assert m["counts"] == {"pending": 0, "running": 0, "done": 2, "failed": 2}
    check_summary(s, out)
    assert (out / "figures" / "test_accuracy_vs_data.n_train.png").is_file()

    # interrupt one finished run (its result is gone and the manifest says running), and give another a
    # result file of another config: both are rerun, with the failed ones; nothing else is
    done0, done1 = by_point[(0, 0)], by_point[(0, 1)]
    (out / done0["folder"] / "result.json").unlink()
    m["runs"][[e["config_hash"] for e in m["runs"]].index(done0["config_hash"])]["status"] = "running"
    (out / "manifest.json").write_text(json.dumps(m))
    wrong = json.loads((out / done1["folder"] / "result.json").read_text())
    (out / done1["folder"] / "result.json").write_text(json.dumps({**wrong, "config_hash": "f" * 16}))
    assert run_sweep(s, out, InlineExecutor(), log=None)["done"] == 2
    m2 = {e["config_hash"]: e for e in manifest(out)["runs"]}
    assert all(e["attempts"] == 2 for e in m2.values())
    assert m2[done0["config_hash"]]["status"] == "done" and m2[done1["config_hash"]]["status"] == "done"

    # a third run skips the finished runs: the trainer is not called again (its own attempts stay)
    stamps = {h: (out / e["folder"] / "result.json").stat().st_mtime_ns for h, e in m2.items() if e["status"] == "done"}
    attempts = {h: json.loads((out / m2[h]["folder"] / "manifest.json").read_text())["attempts"] for h in stamps}
    log: list[str] = []
    assert run_sweep(s, out, InlineExecutor(), log=log.append)["failed"] == 2
    assert "2 finished before, 2 to run" in log[0]
    m3 = {e["config_hash"]: e for e in manifest(out)["runs"]}
    for h in stamps:
        assert (out / m3[h]["folder"] / "result.json").stat().st_mtime_ns == stamps[h]
        assert json.loads((out / m3[h]["folder"] / "manifest.json").read_text())["attempts"] == attempts[h]
        assert m3[h]["attempts"] == 2


@pytest.mark.slow  # spawns a pool whose worker dies (about 13 s on CI's 2 cores)
def test_a_dying_worker_fails_its_run_and_the_pool_goes_on(tmp_path):
    s = tiny(axes=[{"field": "trainer.lr", "values": [0.1, 0.2, 0.05]}])
    counts = run_sweep(s, tmp_path, LocalExecutor(1), runner="sweep_helpers:crash_runner", log=None)
    assert counts["done"] == 2 and counts["failed"] == 1
    status = {e["labels"]["trainer.lr"]: e for e in manifest(tmp_path)["runs"]}
    assert status["0.2"]["status"] == "failed" and "worker process died" in status["0.2"]["error"]
    assert status["0.05"]["status"] == "done" and status["0.1"]["status"] == "done"


@pytest.fixture(scope="module")
def small_local(tmp_path_factory):
    """The small example sweep, run once with `aimc sweep --workers 2` (a spawn process pool)."""
    out = tmp_path_factory.mktemp("small") / "local"
    assert main(["sweep", str(SMALL), "--out", str(out), "--workers", "2"]) == 0
    return load_sweep(SMALL), out


def test_small_sweep_on_the_local_pool(small_local, capsys):
    s, out = small_local
    m = manifest(out)
    assert m["counts"]["done"] == 8 and len(m["runs"]) == 8 and "local pool of 2" in m["executor"]
    assert len({e["pid"] for e in m["runs"]}) == 2  # two worker processes, none of them this one
    assert os.getpid() not in {e["pid"] for e in m["runs"]}
    check_summary(s, out)
    md = (out / "summary.md").read_text()
    assert "| tile.device.gamma | trainer.lr | runs done | test_accuracy (mean ± std) |" in md
    for metric in ("test_accuracy", "test_loss"):
        for name in ("vs_tile.device.gamma", "vs_trainer.lr", "heatmap"):
            assert (out / "figures" / f"{metric}_{name}.png").stat().st_size > 1000
            assert (out / "figures" / f"{metric}_{name}.csv").is_file()
    for e in m["runs"]:  # each run folder: the trainer's run folder plus the sweep's result file
        folder = out / e["folder"]
        assert {"config.toml", "config.json", "manifest.json", "metrics.jsonl", "result.json"} <= {
            p.name for p in folder.iterdir()
        }
    capsys.readouterr()
    assert main(["sweep", str(SMALL), "--out", str(out)]) == 0  # all finished: nothing to run
    assert "8 finished before, 0 to run" in capsys.readouterr().out


def _children(pid: int) -> set[int]:
    """The processes `pid` started (Linux /proc)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.slow  # a second sweep driver, killed, then rerun (about 25 s on CI's 2 cores)
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree from Linux's /proc")
def test_a_killed_driver_takes_its_workers_along_and_the_rerun_matches(small_local, tmp_path):
    """SIGKILL of `aimc sweep` while runs are in flight: its pool workers (and multiprocessing's resource
    tracker) end within seconds, and rerunning the command finishes the sweep with the results of a sweep
    that was never interrupted."""
    _, whole = small_local
    out = tmp_path / "cut"
    driver = subprocess.Popen(
        [sys.executable, "-m", "aimc", "sweep", str(SMALL), "--out", str(out), "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list((out / "runs").glob("*/manifest.json")):
        time.sleep(0.05)  # until a worker has started a run
    children = _children(driver.pid)
    driver.kill()
    driver.wait()
    assert children
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(c) for c in children):
        time.sleep(0.1)
    assert not [c for c in children if _alive(c)]
    assert main(["sweep", str(SMALL), "--out", str(out), "--workers", "0"]) == 0
    cut, ref = results(out), results(whole)
    assert cut.keys() == ref.keys()
    timings = {"train_s", "step_ns", "update_ns"}
    for h in ref:
        assert {k: v for k, v in cut[h]["metrics"].items() if k not in timings} == {
            k: v for k, v in ref[h]["metrics"].items() if k not in timings
        }, h


@pytest.mark.slow  # starts a Dask LocalCluster of 2 workers (about 27 s on CI's 2 cores)
def test_small_sweep_on_a_dask_local_cluster(small_local, tmp_path):
    pytest.importorskip("distributed")
    from aimc.sweeps.executors import DaskExecutor

    _, local_out = small_local
    s = parse_sweep({**tomllib.loads(SMALL.read_text()), "seeds": [0]})  # seed 0 of each point: 4 runs
    with DaskExecutor(workers=2) as ex:
        assert ex.address.startswith("tcp://127.0.0.1:") and ex.slots() == 2
        counts = SweepRunner(s, tmp_path / "dask", log=None).run(ex)
        assert counts["done"] == 4
        # the same configs give the same results, whichever executor ran them
        local, dask = results(local_out), results(tmp_path / "dask")
        assert dask.keys() < local.keys()
        for h in dask:
            for m in ("test_accuracy", "test_loss", "train_loss", "pulses"):
                assert dask[h]["metrics"][m] == pytest.approx(local[h]["metrics"][m], rel=1e-9), (h, m)
        check_summary(s, tmp_path / "dask")

        # `--scheduler ADDRESS`: a sweep on the running cluster, one run failing; exit status 1
        path = tmp_path / "fail.toml"
        path.write_text(
            'name = "fail"\nseeds = 1\n[base]\nepochs = 1\n[base.model]\nname = "fcn"\nhidden = [8]\n'
            '[base.data]\nname = "mnist_small"\nn_train = 30\nn_test = 30\n'
            '[base.trainer]\nalgorithm = "sgd"\n'
            '[[axes]]\nfield = "data.n_train"\nvalues = [30, 1000000]\n'
        )
        assert main(["sweep", str(path), "--out", str(tmp_path / "fail"), "--scheduler", ex.address]) == 1
        m = manifest(tmp_path / "fail")
        assert [e["status"] for e in m["runs"]] == ["done", "failed"] and "Dask cluster at" in m["executor"]


def test_cli_argument_errors(capsys):
    assert main(["sweep", str(SMALL), "--executor", "local", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "--scheduler needs --executor dask" in capsys.readouterr().err
    assert main(["sweep", str(SMALL), "--executor", "dask", "--workers", "0"]) == 2
    assert "--workers 0" in capsys.readouterr().err
    assert main(["sweep", str(ROOT / "missing.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_one_driver_per_sweep_folder(tmp_path):
    from filelock import FileLock

    (tmp_path / ".lock.holder").write_text("sweep driver, pid 4242 on elsewhere, since 2026-12-04T00:00:00+0000\n")
    with FileLock(tmp_path / ".lock"):
        with pytest.raises(ValueError, match="in use by another process .sweep driver, pid 4242 on elsewhere"):
            run_sweep(tiny(), tmp_path, InlineExecutor(), log=None)
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.slow  # starts a Dask LocalCluster
def test_ctrl_c_at_the_terminal_stops_a_dask_sweep_with_the_drivers_line_alone(tmp_path):
    """Ctrl-C reaches every process of the terminal's group: the workers ignore it, the driver stops them."""
    pytest.importorskip("distributed")
    base = {**BASE, "epochs": 50, "data": {**BASE["data"], "n_train": 1000}}
    path = tmp_path / "long.toml"
    path.write_text(to_toml({"name": "long", "base": base, "axes": [{"field": "trainer.lr", "values": [0.1]}]}))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aimc", "sweep", str(path), "--out", str(out), "--executor", "dask", "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as at a terminal, whatever runs pytest
    )
    deadline = time.monotonic() + 240
    while not any(len(p.read_text().splitlines()) >= 2 for p in out.glob("runs/*/metrics.jsonl")):
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep's run recorded no epoch"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    err, _ = proc.communicate(timeout=120)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    after = err[err.index("aimc sweep: interrupted; resume with: the same command") :]
    assert len(after.splitlines()) <= 3, err  # at most the interpreter's warning of a leaked semaphore
