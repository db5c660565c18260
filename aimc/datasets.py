"""Data sets in memory (`Dataset`), and the MNIST family: an IDX reader with validation, the MNIST subset shipped
with the package, torchvision fallback.

The MNIST loaders return uint8 images (N, 28, 28) and int64 labels (N,) in 0..9; `tensors()` gives float32
images scaled to [0, 1] with a channel axis, (N, 1, 28, 28). Other sources (aimc.data_sources) give
(N, channels, height, width).
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import torch

# IDX type codes (http://yann.lecun.com/exdb/mnist/): 0x08 unsigned byte ... 0x0E double, big-endian.
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_GZIP_MAGIC = b"\x1f\x8b"
SHIPPED = "mnist_small.npz"


class DataError(ValueError):
    """A data file or directory that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Dataset:
    """Train and test splits: images (N, height, width) for one channel or (N, channels, height, width), uint8
    (scaled to [0, 1] by `tensors`) or float32 (used as they are); labels int64 (N,) in 0..n_classes - 1."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int = 10

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(channels, height, width) of one image."""
        shape = self.x_train.shape[1:]
        return (1, *shape) if len(shape) == 2 else tuple(shape)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x_train, y_train, x_test, y_test) as torch tensors, images float32 (N, channels, height, width),
        uint8 pixels scaled to [0, 1]."""

        def img(x):
            x = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32, copy=False)
            t = torch.from_numpy(x)
            return t.unsqueeze(1) if t.ndim == 3 else t

        return (img(self.x_train), torch.from_numpy(self.y_train), img(self.x_test), torch.from_numpy(self.y_test))

    def subset(self, n_train: int | None, n_test: int | None) -> Dataset:
        """The first n_train / n_test samples of each split (None: all); more than there are is an error."""
        for field, n, have in (("n_train", n_train, len(self.y_train)), ("n_test", n_test, len(self.y_test))):
            if n is not None and n > have:
                raise DataError(f"data.{field} = {n}, but {self.name} has only {have} samples in that split")
        return Dataset(
            self.name,
            self.x_train[:n_train],
            self.y_train[:n_train],
            self.x_test[:n_test],
            self.y_test[:n_test],
            self.n_classes,
        )


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (gzip-compressed or not, detected from its first bytes) into a native-endian array.

    Checks the magic number (two zero bytes, a known type code, the number of dimensions) and that the file
    holds exactly the number of items its header declares.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"IDX file {str(path)!r} does not exist")
    raw = path.read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"IDX file {str(path)!r}: corrupt gzip data ({err})") from None
    if len(raw) < 4:
        raise DataError(f"IDX file {str(path)!r}: {len(raw)} bytes, shorter than the 4-byte magic number")
    if raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES or raw[3] == 0:
        raise DataError(
            f"IDX file {str(path)!r}: bad magic number 0x{raw[:4].hex()} (expected 0x0000, a type "
            f"code in {sorted(hex(t) for t in _IDX_TYPES)}, and at least one dimension)"
        )
    ndim, dtype = raw[3], np.dtype(_IDX_TYPES[raw[2]])
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"IDX file {str(path)!r}: truncated header ({len(raw)} bytes for {ndim} dimensions)")
    shape = tuple(int(s) for s in np.frombuffer(raw, ">u4", ndim, 4))
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise DataError(
            f"IDX file {str(path)!r}: header declares shape {shape} ({expected} bytes in all), "
            f"the file has {len(raw)} bytes"
        )
    return np.frombuffer(raw, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


_SPLITS = {"train": "train", "test": "t10k"}


def _find(directory: Path, split: str, part: str) -> Path:
    """The IDX file of a split (train, t10k) and part (images, labels): standard names, gzip or not."""
    ndim = 3 if part == "images" else 1
    stem = f"{_SPLITS[split]}-{part}"
    names = [f"{stem}-idx{ndim}-ubyte", f"{stem}.idx{ndim}-ubyte"]
    for name in names:
        for candidate in (directory / name, directory / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    raise DataError(f"data directory {str(directory)!r} has no {names[0]}[.gz] (the {split} {part})")


def load_idx_dir(path: str | Path, name: str = "mnist") -> Dataset:
    """The four IDX files of MNIST or Fashion-MNIST in a directory, checked for 28x28 uint8 images, 1-D
    labels in 0..9 and matching counts."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise DataError(f"data.path {str(directory)!r} is not a directory")
    arrays = {}
    for split in _SPLITS:
        img_path, lab_path = _find(directory, split, "images"), _find(directory, split, "labels")
        x, y = read_idx(img_path), read_idx(lab_path)
        if x.dtype != np.uint8 or x.ndim != 3 or x.shape[1:] != (28, 28):
            raise DataError(f"{str(img_path)!r}: expected uint8 images of shape (N, 28, 28), got {x.dtype} {x.shape}")
        if y.ndim != 1 or len(y) != len(x):
            raise DataError(f"{str(lab_path)!r}: expected {len(x)} labels (one per image), got shape {y.shape}")
        if len(y) and (y.min() < 0 or y.max() > 9):
            raise DataError(f"{str(lab_path)!r}: labels must lie in 0..9, found {y.min()}..{y.max()}")
        arrays[split] = (x, y.astype(np.int64))
    return Dataset(name, *arrays["train"], *arrays["test"])


def load_shipped() -> Dataset:
    """The MNIST subset shipped in `aimc/data` (see its README.md for the selection and attribution)."""
    ref = resources.files("aimc") / "data" / SHIPPED
    with resources.as_file(ref) as path, np.load(path) as z:
        return Dataset(
            "mnist_small", z["x_train"], z["y_train"].astype(np.int64), z["x_test"], z["y_test"].astype(np.int64)
        )


def _load_torchvision(name: str) -> Dataset:
    try:
        import torchvision.datasets as tvd
    except ImportError:
        raise DataError(
            f"data.path: give the directory with the IDX files of {name} (torchvision, the "
            f"fallback when no path is given, is not installed)"
        ) from None
    cls = tvd.MNIST if name == "mnist" else tvd.FashionMNIST
    root = Path("~/.cache/aimc/torchvision").expanduser()
    train, test = cls(root, train=True, download=True), cls(root, train=False, download=True)
    return Dataset(
        name,
        train.data.numpy(),
        train.targets.numpy().astype(np.int64),
        test.data.numpy(),
        test.targets.numpy().astype(np.int64),
    )


def load_dataset(name: str, path: str | None = None, n_train: int | None = None, n_test: int | None = None) -> Dataset:
    """The data set of a `DataConfig`: shipped subset, IDX directory, or torchvision's copy."""
    if name == "mnist_small":
        data = load_shipped()
    elif path is not None:
        data = load_idx_dir(path, name)
    else:
        data = _load_torchvision(name)
    return data.subset(n_train, n_test)
