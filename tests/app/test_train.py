"""The training loop: run folder contents, bit-exact resume after an interruption, the divergence guard,
comparisons, and the `aimc train` command."""

import json
import os
import subprocess
import sys

import pytest
import torch
from state_helpers import same_state

import aimc.runs.training
from aimc.commands.cli import main
from aimc.config import validate_config
from aimc.runs.experiment import run_experiment
from aimc.runs.run_folder import RunFolder, read_jsonl
from aimc.runs.training import TrainingDiverged, train_run

TINY = {
    "name": "t",
    "epochs": 3,
    "batch_size": 10,
    "model": {"hidden": [16]},
    "data": {"n_train": 200, "n_test": 100},
    "tile": {"device": "r1_power_1"},
}


def _cfg(trainer: dict, **more) -> "aimc.config.ExperimentConfig":
    return validate_config({**TINY, "trainer": trainer, **more})


def _without_time(records):
    return [{k: v for k, v in r.items() if k != "time_s"} for r in records]


def test_run_folder_contents(tmp_path):
    cfg = _cfg({"algorithm": "analog_sgd", "lr": 0.05}, epochs=2)
    final = run_experiment(cfg, tmp_path / "run")
    run = RunFolder(tmp_path / "run")
    manifest = run.read_manifest()
    assert manifest["status"] == "finished" and manifest["config_hash"] == cfg.hash()
    assert manifest["seed"] == 0 and manifest["timings"]["wall_s"] > 0 and "aimc_version" in manifest
    assert manifest["latency"]["algorithm"] == "analog_sgd"
    records = read_jsonl(run.metrics_path)
    assert [r["epoch"] for r in records] == [0, 1, 2]
    for key in (
        "train_loss",
        "test_loss",
        "test_accuracy",
        "saturated_fraction",
        "pulses_per_weight",
        "pulses",
        "reads",
        "transfers",
        "steps",
        "update_ns",
        "step_ns",
    ):
        assert key in records[-1], key
    assert records[-1]["steps"] == 40 and records[-1]["pulses"] > 0 and 0 <= records[-1]["saturated_fraction"] <= 1
    assert final["test_accuracy"] == records[-1]["test_accuracy"]
    assert [p.name for p in run.checkpoints()] == ["epoch-0002.pt"]
    assert validate_config(json.loads((run.root / "config.json").read_text())) == cfg
    assert (run.root / "config.toml").is_file() and (run.root / "curves.png").stat().st_size > 1000
    assert not list(run.root.rglob("*.tmp*"))
    # a finished run is not rerun; another config in the same folder is refused
    assert run_experiment(cfg, tmp_path / "run") == manifest["final"]
    with pytest.raises(ValueError, match="holds a run of another config"):
        run_experiment(_cfg({"algorithm": "analog_sgd", "lr": 0.04}), tmp_path / "run")


@pytest.mark.parametrize(
    "trainer",
    [
        {"algorithm": "sgd", "lr": 0.5},
        {"algorithm": "residual", "lr": 0.05, "transfer_lr": 0.01},
        {"algorithm": "multi_tile", "n_tiles": 3, "lr": 0.05, "zero_shift": False, "warm_start": True},
    ],
)
def test_resume_after_interruption_is_bit_exact(tmp_path, monkeypatch, trainer):
    """The optimizer state compared includes the multi-tile warm start's epoch losses and target."""
    cfg = _cfg(trainer, tile={"device": "r1_power_1", "update": {"mode": "pulsed"}})
    train_run(cfg, tmp_path / "whole")

    evaluate, calls = aimc.runs.training.evaluate, []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == 3:  # after the training steps of epoch 2, before its checkpoint
            raise KeyboardInterrupt
        return evaluate(*args)

    monkeypatch.setattr(aimc.runs.training, "evaluate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_run(cfg, tmp_path / "cut")
    cut = RunFolder(tmp_path / "cut")
    assert cut.read_manifest()["status"] == "interrupted"
    assert [p.name for p in cut.checkpoints()] == ["epoch-0001.pt"]
    monkeypatch.setattr(aimc.runs.training, "evaluate", evaluate)
    train_run(cfg, tmp_path / "cut")

    whole = RunFolder(tmp_path / "whole")
    assert cut.read_manifest()["status"] == "finished" and cut.read_manifest()["attempts"] == 2
    a, b = cut.load_checkpoint(), whole.load_checkpoint()
    assert all(same_state(a[k], b[k]) for k in ("model", "optimizer", "rng"))
    assert _without_time(a["history"]) == _without_time(b["history"])  # only the timings differ
    assert _without_time(cut.read_metrics()) == _without_time(whole.read_metrics())


def test_divergence_guard_keeps_last_good_checkpoint(tmp_path):
    cfg = _cfg({"algorithm": "sgd", "lr": 1e4})
    with pytest.raises(
        TrainingDiverged,
        match=r"diverged at epoch 1, step \d+ of 20: mini-batch loss .*"
        r"last good checkpoint is .*epoch-0000\.pt",
    ):
        train_run(cfg, tmp_path / "run")
    run = RunFolder(tmp_path / "run")
    manifest = run.read_manifest()
    assert manifest["status"] == "diverged" and "epoch 1" in manifest["error"]
    state = run.load_checkpoint()
    assert state["epoch"] == 0 and all(torch.isfinite(v).all() for v in state["model"].values())


def test_comparison_reports_every_trainer(tmp_path):
    cfg = validate_config(
        {
            **TINY,
            "epochs": 1,
            "compare": [{"algorithm": "sgd", "lr": 0.5}, {"algorithm": "sgd", "lr": 1e4}, {"algorithm": "analog_sgd"}],
        }
    )
    flat = run_experiment(cfg, tmp_path / "cmp")
    assert flat["sgd.status"] == "finished" and flat["sgd-2.status"] == "diverged"
    assert "analog_sgd.test_accuracy" in flat
    root = tmp_path / "cmp"
    for name in (
        "comparison.json",
        "comparison.csv",
        "comparison.md",
        "curves.png",
        "curves.csv",
        "sgd/manifest.json",
        "analog_sgd/metrics.jsonl",
    ):
        assert (root / name).is_file(), name
    assert "| sgd-2 " in (root / "comparison.md").read_text()


def test_cli_train_smoke(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    tiny = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.toml"
    monkeypatch.chdir(tmp_path)
    assert main(["train", str(tiny), "--quiet", "--set", "epochs=1"]) == 0
    out = capsys.readouterr().out
    assert "| analog_sgd " in out and "test acc %" in out
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("tiny-") and (run / "manifest.json").is_file()
    assert main(["train", "--resume", str(run), "--quiet"]) == 0  # finished: reported, not rerun
    assert main(["train", str(tiny), "--set", "trainer.lr=-1"]) == 2
    assert "trainer.lr: Input should be greater than 0" in capsys.readouterr().err


def test_bad_data_path_fails_before_the_run_folder_exists(tmp_path):
    from aimc.datasets import DataError

    cfg = validate_config({**TINY, "data": {"name": "mnist", "path": str(tmp_path / "nowhere")}})
    with pytest.raises(DataError, match="nowhere' is not a directory"):
        run_experiment(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("trainer", [{"algorithm": "sgd", "lr": 0.5}, {"algorithm": "analog_sgd", "lr": 0.05}])
def test_lr_decay_steps_the_rate_each_epoch(tmp_path, trainer):
    """StepLR's schedule: lr factor^floor((epoch - 1) / every); the optimizer of epoch 3 runs at lr / 2."""
    cfg = _cfg(trainer, lr_decay={"every": 2, "factor": 0.5})
    assert [cfg.lr_decay.rate(0.05, e) for e in (1, 2, 3, 5)] == [0.05, 0.05, 0.025, 0.0125]
    train_run(cfg, tmp_path / "run")
    state = torch.load(RunFolder(tmp_path / "run").checkpoints()[-1], weights_only=False)
    assert [g["lr"] for g in state["optimizer"]["param_groups"]] == [trainer["lr"] / 2]
    # without a decay the field stays out of the config's hash: runs made before it keep theirs
    assert "lr_decay" not in aimc.config.canonical_json(_cfg(trainer))
    assert _cfg(trainer).hash() != cfg.hash()


def test_more_threads_than_numba_started_with_is_refused_before_any_write(tmp_path):
    """NUMBA_NUM_THREADS=1 and `threads = 2`: one line naming the field and the variable, exit 2, no folder."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "aimc", "train", "--set", "threads=2", "--set", "epochs=1", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env=dict(os.environ, NUMBA_NUM_THREADS="1"),
    )
    assert proc.returncode == 2
    assert "error: threads = 2 exceeds the 1 threads Numba was started with (NUMBA_NUM_THREADS)" in proc.stderr
    assert not out.exists()


def test_an_empty_config_file_says_it_runs_the_defaults(tmp_path, capsys, monkeypatch):
    empty = tmp_path / "empty.toml"
    empty.write_text("# nothing set\n")
    monkeypatch.setattr(aimc.runs.training, "train_run", lambda cfg, out, progress: {"test_accuracy": 0.5})
    assert main(["train", str(empty), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    assert f"config file {str(empty)!r} is empty: every field takes its default" in capsys.readouterr().err


def test_a_comparison_with_a_diverged_trainer_exits_1_after_its_table(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "d"\nepochs = 1\nbatch_size = 10\n[model]\nhidden = [8]\n[data]\nn_train = 20\nn_test = 20\n'
        '[[compare]]\nalgorithm = "sgd"\nlr = 0.5\n[[compare]]\nalgorithm = "sgd"\nlr = 1e4\n'
    )
    assert main(["train", str(path), "--out", str(tmp_path / "run"), "--quiet"]) == 1  # docs/usage.md: status 1
    out, err = capsys.readouterr()
    assert "| sgd-2 " in out and "diverged" in out
    assert err.strip().splitlines()[-1] == "aimc train: diverged: sgd-2 (the table gives the last good epoch)"


@pytest.mark.parametrize("command", ["train", "sweep", "retention", "devices"])
def test_every_command_has_a_description_in_its_help(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    paragraph = out.split("\n\n")[1]  # after the usage: the description, not the list of arguments
    assert not paragraph.startswith(("options", "positional")) and len(paragraph.split()) >= 8, out


def test_no_progress_bar_escape_codes_in_a_redirected_log(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('name = "p"\nepochs = 1\n[data]\nn_train = 20\nn_test = 20\n[trainer]\nalgorithm = "sgd"\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(
        [sys.executable, "-m", "aimc", "train", str(path), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "\r" not in run.stderr and "\x1b" not in run.stderr
    assert "p/sgd epoch 1: train loss " in run.stderr  # plain lines instead
