"""Failures as a user meets them: one line and an exit status from the CLI, one process per output folder,
and a run killed at any point resumes to the result of the run that was never interrupted."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from state_helpers import same_state

from aimc.commands.cli import EXIT_BAD_INPUT, EXIT_FAILED, main
from aimc.runs.run_folder import RunFolder

TINY = ["--set", "epochs=1", "--set", "data.n_train=20", "--set", "data.n_test=20", "--quiet"]
RESIDUAL = """name = "k"
epochs = 4
batch_size = 10
[model]
hidden = [16]
[data]
n_train = 1000
n_test = 100
[tile]
device = "r1_power_1"
[trainer]
algorithm = "residual"
lr = 0.05
transfer_lr = 0.01
"""


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_unwritable_outputs_are_one_line_naming_the_path(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["train", "--out", str(tmp_path / "file" / "run"), *TINY]) == EXIT_FAILED
    assert _error_line(capsys) == f"aimc train: error: {tmp_path / 'file' / 'run'}: Not a directory"
    assert main(["train", "--out", "/dev/null", *TINY]) == EXIT_BAD_INPUT
    assert _error_line(capsys) == "aimc train: error: output folder '/dev/null' exists and is not a folder"


def test_a_full_disk_is_named_with_the_file(tmp_path, capsys, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    assert main(["train", "--out", str(tmp_path / "run"), *TINY]) == EXIT_FAILED
    line = _error_line(capsys)
    assert line.startswith(f"aimc train: error: {tmp_path / 'run'}/") and line.endswith(
        ": no space left on the device (the disk is full)"
    )
    assert not list((tmp_path / "run").rglob("*.tmp"))  # no half-written file stays behind


def test_one_process_per_run_folder_and_a_dead_holders_lock_is_taken_over(tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom aimc.runs.folder_lock import folder_lock\n"
            "with folder_lock(sys.argv[1], 'training run'):\n    print('held', flush=True)\n    time.sleep(120)",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["train", "--out", str(out), *TINY]) == EXIT_BAD_INPUT
        assert f"is in use by another process (training run, pid {holder.pid} on " in _error_line(capsys)
    finally:
        holder.kill()
        holder.wait()
    assert main(["train", "--out", str(out), *TINY]) == 0  # the killed holder's lock is free


def _terminal_signal_actions() -> None:
    """The default action of SIGINT, SIGTERM and SIGHUP, as at a terminal, whatever runs pytest (a background
    job of a non-interactive shell ignores SIGINT, nohup ignores SIGHUP, and a run leaves ignored signals so)."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def _stop_mid_training(config: Path, out: Path, sig: int, epochs_done: int, seed: int) -> tuple[int, str]:
    """Start `aimc train` in a process and send it `sig` once `epochs_done` epochs are recorded (metrics.jsonl
    holds epoch 0 and one line per epoch), after a seeded delay of up to half that epoch's time: inside the next
    epoch, whatever the machine's speed. Its exit status and standard error."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "aimc", "train", str(config), "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_terminal_signal_actions,
    )
    deadline = time.monotonic() + 300
    while len(RunFolder(out).read_metrics()) < 1 + epochs_done and proc.poll() is None:
        assert time.monotonic() < deadline, "the run recorded no progress in 300 s"
        time.sleep(0.01)
    last = RunFolder(out).read_metrics()[-1]["time_s"]  # seconds of the epoch just recorded
    time.sleep(random.Random(seed).uniform(0.0, 0.5) * last)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole")
    (folder / "k.toml").write_text(RESIDUAL)
    assert main(["train", str(folder / "k.toml"), "--out", str(folder / "run"), "--quiet"]) == 0
    return folder


@pytest.mark.parametrize(
    "sig,epochs_done,seed",
    [
        (signal.SIGINT, 1, 0),
        (signal.SIGKILL, 2, 1),
        (signal.SIGTERM, 3, 5),
        pytest.param(signal.SIGKILL, 1, 2, marks=pytest.mark.slow),
        pytest.param(signal.SIGKILL, 3, 3, marks=pytest.mark.slow),
        pytest.param(signal.SIGINT, 2, 4, marks=pytest.mark.slow),
        pytest.param(signal.SIGHUP, 1, 6, marks=pytest.mark.slow),
    ],
)
def test_a_run_stopped_mid_training_resumes_to_the_uninterrupted_result(
    uninterrupted, tmp_path, sig, epochs_done, seed
):
    """SIGTERM and SIGHUP are taken as Ctrl-C is (recorded, the message, the process ended by SIGINT)."""
    out = tmp_path / "cut"
    code, err = _stop_mid_training(uninterrupted / "k.toml", out, sig, epochs_done, seed)
    manifest, recorded = RunFolder(out).read_manifest(), len(RunFolder(out).read_metrics()) - 1
    assert epochs_done <= recorded < 4, f"the signal landed after epoch {recorded} of 4, not inside epoch 2 to 4"
    if sig == signal.SIGKILL:
        assert code == -signal.SIGKILL and manifest["status"] == "running", err
    else:  # taken between two steps: recorded, the message and no traceback; the process ends by SIGINT
        assert code == -signal.SIGINT and manifest["status"] == "interrupted", err
        by = "" if sig == signal.SIGINT else f" by {signal.Signals(sig).name}"
        assert err.strip().splitlines()[-1] == f"aimc train: interrupted{by}; resume with: aimc train --resume {out}"
        assert "Traceback" not in err and "Error" not in err, err
    assert main(["train", "--resume", str(out), "--quiet"]) == 0
    cut, whole = RunFolder(out), RunFolder(uninterrupted / "run")
    assert cut.read_manifest()["status"] == "finished"
    a, b = cut.load_checkpoint(), whole.load_checkpoint()
    assert all(same_state(a[k], b[k]) for k in ("model", "optimizer", "rng"))
    untimed = [{k: v for k, v in r.items() if k != "time_s"} for r in cut.read_metrics()]
    assert untimed == [{k: v for k, v in r.items() if k != "time_s"} for r in whole.read_metrics()]
    assert not list(cut.root.rglob("*.tmp"))
