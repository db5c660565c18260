"""Training on the data sets and networks beyond MNIST: a CIFAR-format folder with ResNets, the user's own model
and data set by import path, through `aimc train`; the run folder, bit-exact resume and the worker count."""

import sys
from pathlib import Path

import pytest
import torch
from data_helpers import write_cifar
from state_helpers import same_state

import aimc.runs.training
from aimc.commands.cli import main
from aimc.config import apply_overrides, load_config, read_toml, validate_config
from aimc.models import build_model
from aimc.runs.experiment import run_experiment
from aimc.runs.run_folder import RunFolder
from aimc.runs.training import train_run
from aimc.toml_writer import to_toml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "configs"


def _cifar_cfg(tmp_path, model: dict, **more) -> "aimc.config.ExperimentConfig":
    write_cifar(tmp_path / "cifar", "cifar10", n_train=8, n_test=4)
    data = {"name": "cifar10", "path": str(tmp_path / "cifar"), "augment": True, "normalize": True}
    base = {"name": "c", "epochs": 2, "batch_size": 4, "eval_batch_size": 4, "model": model, "data": data}
    return validate_config({**base, "trainer": {"algorithm": "analog_sgd", "lr": 0.05}, **more})


def _without_time(records):
    return [{k: v for k, v in r.items() if k != "time_s"} for r in records]


def _resumes_bit_exactly(cfg, tmp_path, monkeypatch) -> RunFolder:
    """Train `cfg` whole with `aimc train`, and by `train_run` cut by a Ctrl-C after epoch 2's steps then
    resumed: the same checkpoint."""
    (tmp_path / "cfg.toml").write_text(to_toml(cfg.model_dump(mode="json")))
    assert main(["train", str(tmp_path / "cfg.toml"), "--quiet", "--out", str(tmp_path / "whole")]) == 0
    evaluate, calls = aimc.runs.training.evaluate, []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == 3:  # after the training steps of epoch 2, before its checkpoint
            raise KeyboardInterrupt
        return evaluate(*args)

    monkeypatch.setattr(aimc.runs.training, "evaluate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_run(cfg, tmp_path / "cut")
    monkeypatch.setattr(aimc.runs.training, "evaluate", evaluate)
    train_run(cfg, tmp_path / "cut")
    cut, whole = RunFolder(tmp_path / "cut"), RunFolder(tmp_path / "whole")
    assert cut.read_manifest()["status"] == "finished" and cut.read_manifest()["attempts"] == 2
    a, b = cut.load_checkpoint(), whole.load_checkpoint()
    assert all(same_state(a[k], b[k]) for k in ("model", "optimizer", "rng"))
    assert _without_time(a["history"]) == _without_time(b["history"])
    return whole


def test_small_resnet_on_cifar_files_resumes_bit_exactly(tmp_path, monkeypatch):
    """The MNIST `resnet` on 3x32x32 inputs with crops, flips and normalisation: 2 steps per epoch."""
    cfg = _cifar_cfg(tmp_path, {"name": "resnet", "width": 4})
    whole = _resumes_bit_exactly(cfg, tmp_path, monkeypatch)
    records = whole.read_metrics()
    assert [r["epoch"] for r in records] == [0, 1, 2] and records[-1]["steps"] == 4
    assert (whole.root / "config.toml").is_file() and (whole.root / "curves.png").is_file()


def test_resnet18_partly_analog_resumes_bit_exactly(tmp_path, monkeypatch):
    """ResNet-18 (CIFAR form, width 2), layer4 and fc on tiles, the rest digital."""
    cfg = _cifar_cfg(tmp_path, {"name": "resnet18", "width": 2, "analog_layers": ["layer4.*", "fc"]})
    whole = _resumes_bit_exactly(cfg, tmp_path, monkeypatch)
    state = whole.load_checkpoint()["model"]
    assert any(k.startswith("layer4.0.conv1.") and k != "layer4.0.conv1.weight" for k in state)  # analog state
    assert "layer3.0.conv1.weight" in state  # digital


def test_workers_draw_the_same_batches(tmp_path):
    """DataLoader workers draw each batch with the generator of its (seed, epoch, step): the same run."""
    cfg = _cifar_cfg(tmp_path, {"name": "resnet", "width": 2}, epochs=1)
    train_run(cfg, tmp_path / "here")
    two = cfg.model_copy(update={"data": cfg.data.model_copy(update={"workers": 2})})
    assert two.hash() == cfg.hash()
    train_run(two, tmp_path / "workers")
    a, b = RunFolder(tmp_path / "here").load_checkpoint(), RunFolder(tmp_path / "workers").load_checkpoint()
    assert same_state(a["model"], b["model"]) and same_state(a["optimizer"], b["optimizer"])


USER_MODULE = '''
import torch
from torch import nn


class Blobs(torch.utils.data.Dataset):
    """Two classes of 1x6x6 images: label k has mean k."""
    classes = ["zero", "one"]

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.arange(n) % 2
        self.x = torch.randn(n, 1, 6, 6, generator=g) * 0.3 + self.y.float().reshape(-1, 1, 1, 1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], int(self.y[i])


def data(n_train=12):
    return Blobs(n_train, 0), Blobs(6, 1)


def model(num_classes, in_shape, hidden=8):
    c, h, w = in_shape
    return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, hidden), nn.Tanh(), nn.Linear(hidden, num_classes))
'''

USER_CONFIG = """
name = "mine"
epochs = 2
batch_size = 4

[model]
name = "import"
source = "aimc_user_stuff:model"
options = { hidden = 5 }

[data]
name = "import"
source = "aimc_user_stuff:data"
options = { n_train = 12 }

[trainer]
algorithm = "tiki_taka"
lr = 0.1
"""


def test_users_model_and_data_by_import_path_through_aimc_train(tmp_path, monkeypatch, capsys):
    (tmp_path / "aimc_user_stuff.py").write_text(USER_MODULE)
    (tmp_path / "mine.toml").write_text(USER_CONFIG)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("aimc_user_stuff", None)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "mine.toml", "--quiet", "--out", "runs/mine"]) == 0
    run = RunFolder(tmp_path / "runs" / "mine")
    assert run.read_manifest()["status"] == "finished" and [r["epoch"] for r in run.read_metrics()] == [0, 1, 2]
    tile = run.load_checkpoint()["model"]["1._extra_state"]["tiles"][0]
    assert tile["arrays"][0]["w"].shape == (5, 36)  # the user's Linear 36 -> hidden = 5, on a tile
    cfg = load_config(tmp_path / "mine.toml")
    _resumes_bit_exactly(cfg, tmp_path, monkeypatch)


def _tiny_cifar_overrides(tmp_path, name: str) -> dict:
    write_cifar(tmp_path / name, name, n_train=8, n_test=4)
    return {
        "data.path": str(tmp_path / name),
        "data.n_train": 8,
        "data.n_test": 4,
        "epochs": 1,
        "batch_size": 4,
        "eval_batch_size": 4,
        "model.width": 2,
    }


@pytest.mark.slow
@pytest.mark.parametrize("config", ["cifar10_resnet18_digital", "r1_table1_resnet18_cifar10", "dspt_cifar100_resnet18"])
def test_cifar_example_configs_run_a_few_steps(tmp_path, config):
    """Each CIFAR example config, on a tiny synthetic set in its format at width 2, two steps per run; the
    fine-tuning configs start from a digital state dict written here (the pretrained protocol)."""
    raw = read_toml(EXAMPLES / f"{config}.toml")
    overrides = _tiny_cifar_overrides(tmp_path, raw["data"]["name"])
    if "pretrained" in raw["model"]:
        digital = validate_config(apply_overrides({k: v for k, v in raw.items() if k != "compare"}, overrides))
        n_classes = 10 if raw["data"]["name"] == "cifar10" else 100
        torch.manual_seed(1)
        torch.save(build_model(digital.model, n_classes, (3, 32, 32)).state_dict(), tmp_path / "w.pt")
        overrides["model.pretrained"] = str(tmp_path / "w.pt")
    cfg = validate_config(apply_overrides(raw, overrides))
    run_experiment(cfg, tmp_path / "run")
    for label, _ in cfg.runs():
        run = RunFolder(tmp_path / "run" / label if cfg.compare else tmp_path / "run")
        assert run.read_manifest()["status"] == "finished", label
