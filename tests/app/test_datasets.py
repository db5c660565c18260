"""IDX reader (tiny files written here, malformed ones rejected clearly), shipped subset, models."""

import gzip
import struct

import numpy as np
import pytest
import torch

from aimc.config import FCNConfig, LeNet5Config, R1CNNConfig, ResNetConfig
from aimc.datasets import DataError, load_dataset, load_idx_dir, load_shipped, read_idx
from aimc.models import build_model


def _idx(arr: np.ndarray, code: int = 0x08) -> bytes:
    return struct.pack(">BBBB", 0, 0, code, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def _write_split(d, stem, x, y, gz):
    for part, arr in (("images-idx3-ubyte", x), ("labels-idx1-ubyte", y)):
        data = _idx(arr)
        name = f"{stem}-{part}" + (".gz" if gz else "")
        (d / name).write_bytes(gzip.compress(data) if gz else data)


@pytest.mark.parametrize("gz", [False, True])
def test_idx_roundtrip_and_directory(tmp_path, gz):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    y = np.array([0, 9, 3, 3, 1], np.uint8)
    _write_split(tmp_path, "train", x, y, gz)
    _write_split(tmp_path, "t10k", x[:2], y[:2], gz)
    ext = ".gz" if gz else ""
    np.testing.assert_array_equal(read_idx(tmp_path / f"train-images-idx3-ubyte{ext}"), x)
    data = load_idx_dir(tmp_path)
    assert data.x_train.shape == (5, 28, 28) and data.y_train.dtype == np.int64
    np.testing.assert_array_equal(data.y_test, [0, 9])
    xt, yt, _, _ = data.tensors()
    assert xt.shape == (5, 1, 28, 28) and xt.dtype == torch.float32 and float(xt.max()) <= 1.0
    with pytest.raises(DataError, match="data.n_train = 6, but mnist has only 5"):
        load_dataset("mnist", str(tmp_path), n_train=6)
    assert len(load_dataset("fashion_mnist", str(tmp_path), n_train=3).y_train) == 3


def test_malformed_idx_files(tmp_path):
    f = tmp_path / "f"
    cases = [
        (b"\x00\x00", "shorter than the 4-byte magic"),
        (b"\x01\x00\x08\x01" + struct.pack(">I", 1) + b"\x00", "bad magic number 0x01000801"),
        (b"\x00\x00\x07\x01" + struct.pack(">I", 1) + b"\x00", "bad magic number"),
        (b"\x00\x00\x08\x03\x00\x00", "truncated header"),
        (_idx(np.zeros((2, 3), np.uint8))[:-1], r"header declares shape \(2, 3\)"),
        (_idx(np.zeros((2, 3), np.uint8)) + b"\x00", r"18 bytes in all\), the file has 19 bytes"),
        (b"\x1f\x8b\x08\x00garbage", "corrupt gzip"),
    ]
    for raw, message in cases:
        f.write_bytes(raw)
        with pytest.raises(DataError, match=message):
            read_idx(f)
    with pytest.raises(DataError, match="does not exist"):
        read_idx(tmp_path / "nope")
    vals = np.array([1.5, -2.0], np.float32)
    f.write_bytes(_idx(vals.astype(">f4"), 0x0D))
    np.testing.assert_array_equal(read_idx(f), vals)


def test_bad_directories(tmp_path):
    with pytest.raises(DataError, match="is not a directory"):
        load_idx_dir(tmp_path / "nope")
    with pytest.raises(DataError, match="has no train-images-idx3-ubyte"):
        load_idx_dir(tmp_path)
    _write_split(tmp_path, "train", np.zeros((2, 28, 28), np.uint8), np.array([1, 12], np.uint8), False)
    _write_split(tmp_path, "t10k", np.zeros((1, 28, 28), np.uint8), np.array([1], np.uint8), False)
    with pytest.raises(DataError, match=r"labels must lie in 0\.\.9, found 1\.\.12"):
        load_idx_dir(tmp_path)
    _write_split(tmp_path, "train", np.zeros((2, 28, 28), np.uint8), np.array([1], np.uint8), False)
    with pytest.raises(DataError, match="expected 2 labels"):
        load_idx_dir(tmp_path)
    _write_split(tmp_path, "train", np.zeros((2, 14, 14), np.uint8), np.array([1, 2], np.uint8), False)
    with pytest.raises(DataError, match=r"shape \(N, 28, 28\)"):
        load_idx_dir(tmp_path)


def test_shipped_subset():
    data = load_shipped()
    assert data.x_train.shape == (6000, 28, 28) and data.x_test.shape == (1000, 28, 28)
    assert data.x_train.dtype == np.uint8 and data.y_train.dtype == np.int64
    for y, n in ((data.y_train, 600), (data.y_test, 100)):
        np.testing.assert_array_equal(np.bincount(y, minlength=10), np.full(10, n))
    assert data.x_train.max() == 255 and data.x_train.mean() > 20  # real digits, not blank images


@pytest.mark.parametrize(
    "cfg",
    [FCNConfig(), FCNConfig(hidden=(8,), activation="relu"), LeNet5Config(), R1CNNConfig(), ResNetConfig(width=4)],
)
def test_models_map_images_to_logits(cfg):
    assert build_model(cfg)(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


def test_r1_cnn_has_r1s_weight_count():
    """R1's CNN: 16*25 + 32*16*25 + 128*512 + 10*128 = 80016 weights (arXiv:2502.06309's MNIST CNN)."""
    model = build_model(R1CNNConfig())
    weights = [p.numel() for n, p in model.named_parameters() if n.endswith("weight")]
    assert weights == [400, 12800, 65536, 1280] and sum(weights) == 80016
