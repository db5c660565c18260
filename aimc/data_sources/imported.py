"""The user's own data set: a function named by `data.source` returning (train, test) torch datasets.

Each dataset is map-style (`len` and `[i]`) with items (image, label): the image a tensor or array of one shape
(channels, height, width), or (height, width) for one channel, the label an int. The splits are read into
memory once, through a DataLoader with `data.workers` worker processes; the number of classes is
`len(train.classes)` where the dataset has `classes`, else the largest label plus one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from aimc.common.errors import ConfigError
from aimc.datasets import DataError, Dataset


def _read(ds: Any, split: str, field: str, workers: int) -> tuple[np.ndarray, np.ndarray]:
    if not hasattr(ds, "__len__") or not hasattr(ds, "__getitem__") or len(ds) == 0:
        raise DataError(f"{field}: the {split} set must be a non-empty map-style dataset (len and [i]), got {ds!r:.60}")
    first = ds[0]
    if not (isinstance(first, (tuple, list)) and len(first) == 2 and hasattr(first[0], "shape")):
        raise DataError(
            f"{field}: item 0 of the {split} set is {type(first).__name__}; each item must be (image tensor, label)"
            " (a PIL image needs a ToTensor transform)"
        )
    xs, ys = [], []
    for x, y in DataLoader(ds, batch_size=256, shuffle=False, num_workers=workers):
        xs.append(torch.as_tensor(x))
        ys.append(torch.as_tensor(y))
    x, y = torch.cat(xs).numpy(), torch.cat(ys).numpy()
    if x.ndim not in (3, 4) or not np.issubdtype(y.dtype, np.integer) or y.ndim != 1:
        raise DataError(
            f"{field}: the {split} set gives images of shape {x.shape[1:]} and labels {y.dtype} {y.shape[1:]}; "
            "expected (channels, height, width) or (height, width) images and integer labels"
        )
    if x.dtype != np.uint8:
        x = x.astype(np.float32)
    return x, y.astype(np.int64)


def load_imported(build: Callable, source: str, options: dict[str, Any], workers: int = 0) -> Dataset:
    """The data set returned by `build(**options)` (named `source` in messages) as a `Dataset` in memory."""
    field = "data.source"
    try:
        splits = build(**options)
    except TypeError as err:
        raise ConfigError(f"{field}: {source}(**data.options) failed: {err}") from None
    if not isinstance(splits, (tuple, list)) or len(splits) != 2:
        raise DataError(f"{field}: {source} must return (train, test) datasets, got {type(splits).__name__}")
    train, test = splits
    x_train, y_train = _read(train, "train", field, workers)
    x_test, y_test = _read(test, "test", field, workers)
    if x_train.shape[1:] != x_test.shape[1:]:
        raise DataError(f"{field}: train images {x_train.shape[1:]}, test images {x_test.shape[1:]}")
    classes = getattr(train, "classes", None)
    n_classes = len(classes) if classes else int(max(y_train.max(), y_test.max())) + 1
    if min(y_train.min(), y_test.min()) < 0 or max(y_train.max(), y_test.max()) >= n_classes:
        raise DataError(f"{field}: labels must lie in 0..{n_classes - 1}")
    return Dataset(source, x_train, y_train, x_test, y_test, n_classes)
