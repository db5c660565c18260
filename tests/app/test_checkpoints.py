"""Checkpoints that cannot be loaded as they are: of another device, truncated or empty, or gone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from state_helpers import same_state
from torch import nn

from aimc import trainers as T
from aimc.commands.cli import EXIT_BAD_INPUT, main
from aimc.config import validate_config
from aimc.runs.experiment import run_experiment


def _model(device) -> nn.Module:
    return T.convert(nn.Sequential(nn.Linear(4, 3)), T.TileConfig(device=device), seed=0)


def test_a_checkpoint_of_another_device_is_refused_naming_both():
    saved = _model("reram_sb").state_dict()
    with pytest.raises(ValueError) as err:
        _model("ecram").load_state_dict(saved)
    msg = str(err.value)
    assert msg.startswith("AnalogLinear(4, 3): the checkpoint's tiles have device 'reram_sb' (SoftBounds)")
    assert "this layer's device 'ecram' (LinearStep)" in msg
    with pytest.raises(ValueError, match=r"device 'SoftBounds', parameters [0-9a-f]{12}"):  # one field changed
        _model({"preset": "reram_sb", "dw_min": 0.005}).load_state_dict(saved)
    same = _model("reram_sb")
    same.load_state_dict(saved)  # the same device loads
    old = {k: v for k, v in saved.items()}
    old["0._extra_state"] = {k: v for k, v in old["0._extra_state"].items() if k != "device"}
    _model("ecram").load_state_dict(old)  # a checkpoint that names no device is taken as it is


TINY = {
    "name": "c",
    "epochs": 2,
    "batch_size": 10,
    "model": {"hidden": [8]},
    "data": {"n_train": 20, "n_test": 20},
    "trainer": {"algorithm": "analog_sgd", "lr": 0.1},
    "checkpoint": {"keep": 3},
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints") / "run"
    run_experiment(validate_config(TINY), root)
    return root


@pytest.fixture
def run(finished, tmp_path):
    root = tmp_path / "run"
    shutil.copytree(finished, root)
    return root


def _reopen(root: Path) -> None:
    """Mark the finished run in `root` interrupted, so that `aimc train --resume` trains its last epoch."""
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("size", [0, 1000])
def test_a_cut_checkpoint_resumes_from_the_one_before_and_ends_as_the_uninterrupted_run(run, finished, capsys, size):
    newest = run / "checkpoints" / "epoch-0002.pt"
    newest.write_bytes(newest.read_bytes()[:size])
    _reopen(run)
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"warning: checkpoint {newest} cannot be read (" in err
    assert f"resuming from {run}/checkpoints/epoch-0001.pt" in err
    redone, straight = (torch.load(r / "checkpoints" / newest.name, weights_only=False) for r in (run, finished))
    assert same_state(redone["model"], straight["model"])


def test_a_run_without_an_intact_checkpoint_names_the_file_and_what_to_do(run, capsys):
    for path in (run / "checkpoints").glob("*.pt"):
        path.write_bytes(b"")
    _reopen(run)
    assert main(["train", "--resume", str(run), "--quiet"]) == EXIT_BAD_INPUT
    assert _one_line(capsys) == (
        f"aimc train: error: checkpoint {run}/checkpoints/epoch-0002.pt cannot be read (Ran out of input; 0 bytes): "
        "it is truncated or corrupt, and no earlier checkpoint is intact: train the run again into another folder"
    )


def test_retention_of_a_cut_or_missing_checkpoint_is_one_line(run, capsys):
    newest = run / "checkpoints" / "epoch-0002.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    assert main(["retention", str(run), "--quiet"]) == EXIT_BAD_INPUT
    line = _one_line(capsys)
    assert line.startswith(f"aimc retention: error: checkpoint {newest} cannot be read (")
    assert line.endswith("the model it holds is lost; train the run again into another folder")
    shutil.rmtree(run / "checkpoints")
    assert main(["retention", str(run), "--quiet"]) == EXIT_BAD_INPUT
    assert "holds no checkpoint (removed?)" in _one_line(capsys)
    assert not (run / "retention.csv").exists()


@pytest.mark.parametrize("name", ["manifest.json", "config.json"])
def test_a_corrupt_json_file_is_named(run, capsys, name):
    (run / name).write_text('{"status": "fini')
    for args in (["retention", str(run)], ["train", "--resume", str(run)]):
        assert main([*args, "--quiet"]) == EXIT_BAD_INPUT
        line = _one_line(capsys)
        assert line.endswith(
            f"error: {run / name}: not valid JSON at line 1, column 12 (Unterminated string starting at): the file "
            "is corrupt; restore it or train the run again into another folder"
        ), line
