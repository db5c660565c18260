"""Small synthetic data sets written in the real file formats, for the data-source and training tests."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np


def write_cifar(root: Path, name: str = "cifar10", n_train: int = 20, n_test: int = 10, seed: int = 0) -> dict:
    """CIFAR-10 / CIFAR-100 python batches under root/<standard folder>, laid out as the distribution's files
    (pickled dicts with bytes keys, `data` uint8 (N, 3072), list labels); returns the arrays written."""
    rng = np.random.default_rng(seed)
    n_classes = 10 if name == "cifar10" else 100
    folder = root / ("cifar-10-batches-py" if name == "cifar10" else "cifar-100-python")
    folder.mkdir(parents=True, exist_ok=True)
    x_train = rng.integers(0, 256, (n_train, 3072), dtype=np.uint8)
    x_test = rng.integers(0, 256, (n_test, 3072), dtype=np.uint8)
    y_train = rng.integers(0, n_classes, n_train).tolist()
    y_test = rng.integers(0, n_classes, n_test).tolist()

    def dump(file: str, obj: dict) -> None:
        with open(folder / file, "wb") as f:
            pickle.dump(obj, f, protocol=2)

    if name == "cifar10":
        train_names = [f"data_batch_{i}" for i in range(1, 6)]
        parts = np.array_split(np.arange(n_train), 5)
        for file, idx in zip(train_names, parts):
            dump(file, {b"batch_label": b"x", b"data": x_train[idx], b"labels": [y_train[i] for i in idx]})
        dump("test_batch", {b"batch_label": b"t", b"data": x_test, b"labels": y_test})
        dump("batches.meta", {b"label_names": [f"c{i}".encode() for i in range(10)], b"num_vis": 3072})
    else:
        coarse = [0] * n_train
        dump("train", {b"data": x_train, b"fine_labels": y_train, b"coarse_labels": coarse})
        dump("test", {b"data": x_test, b"fine_labels": y_test, b"coarse_labels": [0] * n_test})
        dump("meta", {b"fine_label_names": [f"f{i}".encode() for i in range(100)]})
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def write_image_folder(root: Path, classes=("cat", "dog"), per_class=(3, 2), size=(6, 5), mode="RGB", seed=0) -> dict:
    """PNG files root/{train,test}/<class>/<k>.png written by Pillow; returns {(split, class, k): pixels}."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    written = {}
    for split, n in zip(("train", "test"), per_class):
        for cls in classes:
            (root / split / cls).mkdir(parents=True, exist_ok=True)
            for k in range(n):
                shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
                pixels = rng.integers(0, 256, shape, dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / cls / f"{k}.png")
                written[(split, cls, k)] = pixels
    return written
