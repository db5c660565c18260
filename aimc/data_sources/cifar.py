"""CIFAR-10 and CIFAR-100 from their python distribution files (https://www.cs.toronto.edu/~kriz/cifar.html).

CIFAR-10 (cifar-10-python.tar.gz, folder cifar-10-batches-py): data_batch_1..5, test_batch, batches.meta.
CIFAR-100 (cifar-100-python.tar.gz, folder cifar-100-python): train, test, meta; the 100 fine labels are used.
Each batch is a pickled dict with `data`, uint8 (N, 3072) = 3 planes (red, green, blue) of 32x32 pixels, row
by row, and the labels (`labels`, `fine_labels`). The pickles are read with an unpickler that builds numpy
arrays and plain Python values only, so a file cannot run code.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from aimc.datasets import DataError, Dataset

_URL = "https://www.cs.toronto.edu/~kriz/cifar.html"
LAYOUT = {
    "cifar10": {
        "folder": "cifar-10-batches-py",
        "train": [f"data_batch_{i}" for i in range(1, 6)],
        "test": ["test_batch"],
        "meta": "batches.meta",
        "labels": "labels",
        "names": "label_names",
        "archive": "cifar-10-python.tar.gz",
    },
    "cifar100": {
        "folder": "cifar-100-python",
        "train": ["train"],
        "test": ["test"],
        "meta": "meta",
        "labels": "fine_labels",
        "names": "fine_label_names",
        "archive": "cifar-100-python.tar.gz",
    },
}
_NUMPY_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),  # bytes in pickle protocols 0 to 2
}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain values and numpy arrays; any other class is refused."""

    def find_class(self, module: str, name: str):
        if (module, name) in _NUMPY_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused to load {module}.{name} (a CIFAR batch holds arrays and lists only)")


def read_batch(path: Path) -> dict[str, object]:
    """The dict of one CIFAR pickle file, keys as str (the distribution's files have bytes keys)."""
    try:
        with open(path, "rb") as f:
            raw = _ArrayUnpickler(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as err:
        raise DataError(f"CIFAR file {str(path)!r} is not a CIFAR python batch: {err}") from None
    if not isinstance(raw, dict):
        raise DataError(f"CIFAR file {str(path)!r} holds a {type(raw).__name__}, not a dict")
    return {k.decode() if isinstance(k, bytes) else str(k): v for k, v in raw.items()}


def _split(directory: Path, names: list[str], label_key: str, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for name in names:
        path = directory / name
        batch = read_batch(path)
        if "data" not in batch or label_key not in batch:
            raise DataError(f"CIFAR file {str(path)!r} has no `data` and `{label_key}` entries")
        x, y = np.asarray(batch["data"]), np.asarray(batch[label_key], dtype=np.int64)
        if x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3 * 32 * 32:
            raise DataError(f"CIFAR file {str(path)!r}: expected uint8 data (N, 3072), got {x.dtype} {x.shape}")
        if y.shape != (len(x),):
            raise DataError(f"CIFAR file {str(path)!r}: {len(x)} images but {y.size} labels")
        if len(y) and (y.min() < 0 or y.max() >= n_classes):
            raise DataError(
                f"CIFAR file {str(path)!r}: labels must lie in 0..{n_classes - 1}, not {y.min()}..{y.max()}"
            )
        xs.append(x.reshape(-1, 3, 32, 32))
        ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


def load_cifar(path: str | Path, name: str = "cifar10") -> Dataset:
    """CIFAR-10 (`name` = "cifar10") or CIFAR-100 ("cifar100") from the extracted distribution folder at
    `path` (or from its standard sub-folder there): uint8 images (N, 3, 32, 32), int64 labels."""
    spec = LAYOUT[name]
    directory = Path(path).expanduser()
    if (directory / spec["folder"]).is_dir():
        directory = directory / spec["folder"]
    wanted = [*spec["train"], *spec["test"], spec["meta"]]
    missing = [f for f in wanted if not (directory / f).is_file()]
    if missing:
        raise DataError(
            f"data.path {str(directory)!r}: no {', '.join(missing)}; put the files of {spec['archive']} "
            f"({_URL}, folder {spec['folder']}: {', '.join(wanted)}) there"
        )
    meta = read_batch(directory / spec["meta"])
    n_classes = len(meta.get(spec["names"], ())) or (10 if name == "cifar10" else 100)
    x_train, y_train = _split(directory, spec["train"], spec["labels"], n_classes)
    x_test, y_test = _split(directory, spec["test"], spec["labels"], n_classes)
    return Dataset(name, x_train, y_train, x_test, y_test, n_classes)
