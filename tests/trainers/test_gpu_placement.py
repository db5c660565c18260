"""Where a model trains, tested on the CPU: the `device` field, the refusals without a GPU, the algorithms
that train on GPU tiles, and which GPU a sweep worker takes (the kernels themselves: tests/gpu)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from aimc import trainers as T
from aimc.config import validate_config
from aimc.runs.network import training_device
from aimc.sweeps import executors

PERFECT = T.TileConfig(device="ideal")


def test_device_field_takes_cpu_and_cuda_devices_and_names_a_wrong_one():
    assert validate_config({"device": "cuda:1"}).device == "cuda:1"
    assert validate_config({}).device == "cpu"
    with pytest.raises(Exception, match="device"):
        validate_config({"device": "gpu"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_training_on_cuda_without_a_gpu_is_one_line_naming_the_field():
    with pytest.raises(ValueError, match=r"^device = 'cuda': torch sees no CUDA GPU here"):
        training_device("cuda")
    assert training_device("cpu") == torch.device("cpu")


def test_an_algorithm_without_a_gpu_path_refuses_gpu_tiles_before_changing_anything(monkeypatch):
    model = T.convert(nn.Sequential(nn.Linear(4, 3)), PERFECT)
    opt = T.build_optimizer(model, T.AnalogSGDConfig(lr=0.1))
    monkeypatch.setattr(opt, "runs_on_gpu", False)  # every algorithm has a GPU path: one without, planted
    model(torch.ones(2, 4)).sum().backward()
    before = model[0].analog_weight().copy()
    model[0].gpu_tiles = True  # as move_tiles leaves it; the refusal comes before any read of the tiles
    with pytest.raises(ValueError, match=r"^analog_sgd trains on the CPU only \(docs/gpu.md\)"):
        opt.step()
    model[0].gpu_tiles = False
    assert (model[0].analog_weight() == before).all()


def test_every_analog_algorithm_trains_on_gpu_tiles():
    analog = [cls for cls in T.OPTIMIZERS.values() if issubclass(cls, T.AnalogOptimizer)]
    assert {"c_ttv2", "agad", "analog_sgd", "ttv2"} <= {cls.algorithm for cls in analog}
    assert all(cls.runs_on_gpu for cls in analog)


@pytest.mark.parametrize("slot, gpus, expected", [(0, 4, 0), (5, 4, 1), (3, 2, 1), (3, 1, None), (2, 0, None)])
def test_a_pool_worker_takes_the_gpu_of_its_slot(monkeypatch, slot, gpus, expected):
    picked = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", picked.append)
    monkeypatch.setattr(executors, "WORKER_SLOT", slot)
    executors._pick_gpu()
    assert picked == ([] if expected is None else [expected])
