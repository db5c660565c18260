"""The data sources beyond MNIST (CIFAR-10/100 pickle batches, image folders, the user's own function) read
from small files written in each real format, and the input pipeline (crop, flip, normalisation)."""

import sys

import numpy as np
import pytest
import torch
from data_helpers import write_cifar, write_image_folder

from aimc.common.errors import ConfigError
from aimc.config import validate_config
from aimc.data_sources import load_cifar, load_data, load_image_folder
from aimc.datasets import DataError
from aimc.runs.batches import EpochBatches, InputPipeline, augmented


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_batches_give_the_written_images_and_labels(tmp_path, name):
    """data (N, 3072) is 3 planes of 32x32 pixels row by row: image i, channel c, row r, column k is
    data[i, 1024 c + 32 r + k]."""
    w = write_cifar(tmp_path, name, n_train=20, n_test=10)
    for path in (tmp_path, tmp_path / ("cifar-10-batches-py" if name == "cifar10" else "cifar-100-python")):
        data = load_cifar(path, name)
        assert data.x_train.shape == (20, 3, 32, 32) and data.x_test.shape == (10, 3, 32, 32)
        assert data.x_train[7, 2, 5, 9] == w["x_train"][7, 2 * 1024 + 5 * 32 + 9]
        assert data.y_train.tolist() == w["y_train"] and data.y_test.tolist() == w["y_test"]
        assert data.n_classes == (10 if name == "cifar10" else 100) and data.image_shape == (3, 32, 32)
    x_train, _, _, _ = data.tensors()
    assert x_train.dtype == torch.float32 and x_train[7, 2, 5, 9] == np.float32(w["x_train"][7, 2217]) / np.float32(255)


def test_cifar_config_subset_and_missing_files(tmp_path):
    write_cifar(tmp_path, "cifar10", n_train=20, n_test=10)
    cfg = validate_config({"data": {"name": "cifar10", "path": str(tmp_path), "n_train": 6, "n_test": 4}})
    data = load_data(cfg.data)
    assert len(data.y_train) == 6 and len(data.y_test) == 4
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DataError, match=r"no data_batch_3; put the files of cifar-10-python.tar.gz") as err:
        load_cifar(tmp_path, "cifar10")
    assert "\n" not in str(err.value)
    with pytest.raises(DataError, match="no train, test, meta; put the files of cifar-100-python.tar.gz"):
        load_cifar(tmp_path / "nowhere", "cifar100")


def test_cifar_unpickler_refuses_other_objects(tmp_path):
    import pickle

    write_cifar(tmp_path, "cifar100", n_train=4, n_test=2)
    with open(tmp_path / "cifar-100-python" / "test", "wb") as f:
        pickle.dump({b"data": ConfigError("x")}, f)
    with pytest.raises(DataError, match="refused to load aimc.common.errors.ConfigError"):
        load_cifar(tmp_path, "cifar100")


def test_image_folder_reads_pngs_in_class_order(tmp_path):
    pytest.importorskip("PIL")
    written = write_image_folder(tmp_path, classes=("dog", "cat"), per_class=(3, 2), size=(6, 5))
    data = load_image_folder(tmp_path)
    assert data.n_classes == 2 and data.x_train.shape == (6, 3, 5, 6) and data.x_test.shape == (4, 3, 5, 6)
    assert data.y_train.tolist() == [0, 0, 0, 1, 1, 1]  # sorted class names: cat = 0, dog = 1
    assert np.array_equal(data.x_train[4], written[("train", "dog", 1)].transpose(2, 0, 1))
    gray = tmp_path / "gray"
    write_image_folder(gray, mode="L", size=(4, 4))
    assert load_image_folder(gray).image_shape == (1, 4, 4)
    with pytest.raises(DataError, match=r"no train/ and test/ folders; put the images as root/train/<class>/"):
        load_image_folder(tmp_path / "dog")


def _write_module(tmp_path, monkeypatch, name: str, text: str) -> None:
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)


USER_DATA = """
import torch

class Split(torch.utils.data.Dataset):
    classes = ["a", "b", "c"]

    def __init__(self, n, offset):
        self.n, self.offset = n, offset

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((2, 4, 4), float(i + self.offset)), i % 3

def build(n_train=6, n_test=3):
    return Split(n_train, 0), Split(n_test, 100)
"""


def test_imported_data_set_is_read_through_the_users_function(tmp_path, monkeypatch):
    _write_module(tmp_path, monkeypatch, "user_data_a", USER_DATA)
    cfg = validate_config({"data": {"name": "import", "source": "user_data_a:build", "options": {"n_train": 5}}})
    data = load_data(cfg.data)
    assert data.x_train.dtype == np.float32 and data.x_train.shape == (5, 2, 4, 4) and data.n_classes == 3
    assert data.x_train[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 4] and data.x_test[:, 1, 3, 3].tolist() == [100, 101, 102]
    assert data.y_train.tolist() == [0, 1, 2, 0, 1]
    x_train = data.tensors()[0]
    assert float(x_train[3, 0, 0, 0]) == 3.0  # float images are used as they are
    bad = validate_config({"data": {"name": "import", "source": "user_data_a:missing"}})
    with pytest.raises(ConfigError, match="data.source: module 'user_data_a' has no callable 'missing'"):
        load_data(bad.data)
    with pytest.raises(ConfigError, match="data.source: cannot import 'no_such_module_x'"):
        load_data(validate_config({"data": {"name": "import", "source": "no_such_module_x:f"}}).data)
    with pytest.raises(ConfigError, match='data.source: give it with name = "import"'):
        validate_config({"data": {"source": "user_data_a:build"}})


def test_crop_and_flip_match_a_numpy_reference():
    """Offsets (B, 2) in 0..2p then flips (B,) drawn from the generator, applied to the zero-padded image."""
    x = torch.arange(4 * 2 * 5 * 6, dtype=torch.float32).reshape(4, 2, 5, 6)
    out = augmented(x, 2, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    offsets, flips = rng.integers(0, 5, size=(4, 2)), rng.random(4) < 0.5
    padded = np.pad(x.numpy(), ((0, 0), (0, 0), (2, 2), (2, 2)))
    for i in range(4):
        (dy, dx) = offsets[i]
        ref = padded[i, :, dy : dy + 5, dx : dx + 6]
        assert np.array_equal(out[i].numpy(), ref[:, :, ::-1] if flips[i] else ref)
    assert augmented(x, 0, np.random.default_rng(0)).abs().sum() == x.abs().sum()  # no padding: flips only


def test_normalisation_gives_zero_mean_unit_std_per_channel_and_batches_are_seeded():
    cfg = validate_config({"data": {"normalize": True, "augment": True, "crop_padding": 1}})
    x = torch.rand(12, 3, 4, 4) * torch.tensor([1.0, 0.5, 0.1]).reshape(1, 3, 1, 1)
    pipe = InputPipeline.of(cfg.data, x)
    z = pipe.normalized(x).double()
    assert torch.allclose(z.mean((0, 2, 3)), torch.zeros(3, dtype=torch.float64), atol=1e-6)
    assert torch.allclose(z.std((0, 2, 3), correction=0), torch.ones(3, dtype=torch.float64), atol=1e-5)
    y = torch.arange(12)
    order = torch.randperm(12, generator=torch.Generator().manual_seed(0))
    a = EpochBatches(x, y, order, 5, pipe, seed=7, epoch=2)
    b = EpochBatches(x, y, order, 5, pipe, seed=7, epoch=2)
    assert len(a) == 3 and a[2][0].shape == (2, 3, 4, 4) and torch.equal(a[2][1], y[order[10:]])
    assert torch.equal(a[1][0], b[1][0])  # the same step draws the same crops and flips
    assert not torch.equal(a[1][0], EpochBatches(x, y, order, 5, pipe, seed=7, epoch=3)[1][0])


def test_data_config_checks_fields_per_source():
    with pytest.raises(ConfigError, match="data.path: cifar10 reads its files from a directory"):
        validate_config({"data": {"name": "cifar10"}})
    with pytest.raises(ConfigError, match='data.options: only name = "import" takes options'):
        validate_config({"data": {"options": {"a": 1}}})
    base = validate_config({})
    assert validate_config({"data": {"workers": 2}}).hash() == base.hash()  # who draws batches: no result change
    assert validate_config({"data": {"augment": False}}).hash() == base.hash()
    assert validate_config({"data": {"augment": True}}).hash() != base.hash()
