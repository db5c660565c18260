"""Image folders in torchvision's ImageFolder layout: root/train/<class>/<image> and root/test/<class>/<image>.

Class names are the sub-folders of train/, sorted (label k = the k-th name); test/ may hold any of them.
Images are decoded with Pillow into memory: all must have the same size; grayscale ("L", "1") images give
one channel, anything else is converted to RGB.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from aimc.datasets import DataError, Dataset

EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
"""The file endings read as images (torchvision's IMG_EXTENSIONS); other files are skipped."""
_LAYOUT = "root/train/<class>/<image> and root/test/<class>/<image>"


def _files(split_dir: Path, classes: list[str]) -> list[tuple[Path, int]]:
    found = []
    for label, cls in enumerate(classes):
        folder = split_dir / cls
        if folder.is_dir():
            found += [(p, label) for p in sorted(folder.iterdir()) if p.suffix.lower() in EXTENSIONS]
    return found


def _decode(files: list[tuple[Path, int]], gray: bool) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image

    xs, size = [], None
    for path, _ in files:
        try:
            with Image.open(path) as im:
                arr = np.asarray(im.convert("L" if gray else "RGB"), dtype=np.uint8)
        except OSError as err:
            raise DataError(f"image {str(path)!r} cannot be read: {err}") from None
        if size is None:
            size = arr.shape
        elif arr.shape != size:
            raise DataError(f"image {str(path)!r} is {arr.shape[:2]} pixels, the first image {size[:2]}: resize them")
        xs.append(arr if gray else arr.transpose(2, 0, 1))
    return np.stack(xs), np.array([label for _, label in files], dtype=np.int64)


def load_image_folder(path: str | Path) -> Dataset:
    """The images under `path`/train and `path`/test as uint8 (N, channels, height, width), int64 labels."""
    try:
        from PIL import Image
    except ImportError:
        raise DataError("data.name = image_folder reads images with Pillow: pip install pillow") from None
    root = Path(path).expanduser()
    train_dir, test_dir = root / "train", root / "test"
    if not train_dir.is_dir() or not test_dir.is_dir():
        raise DataError(f"data.path {str(root)!r}: no train/ and test/ folders; put the images as {_LAYOUT}")
    classes = sorted(p.name for p in train_dir.iterdir() if p.is_dir())
    unknown = sorted({p.name for p in test_dir.iterdir() if p.is_dir()} - set(classes))
    if unknown:
        raise DataError(f"data.path {str(test_dir)!r}: classes {unknown} have no folder in {str(train_dir)!r}")
    train, test = _files(train_dir, classes), _files(test_dir, classes)
    for split, files in (("train", train), ("test", test)):
        if not files:
            raise DataError(f"data.path {str(root / split)!r}: no images ({', '.join(EXTENSIONS)}); layout {_LAYOUT}")
    with Image.open(train[0][0]) as first:
        gray = first.mode in ("L", "1")
    x_train, y_train = _decode(train, gray)
    x_test, y_test = _decode(test, gray)
    if x_train.shape[1:] != x_test.shape[1:]:
        raise DataError(f"data.path {str(root)!r}: train images {x_train.shape[1:]}, test images {x_test.shape[1:]}")
    return Dataset(root.name, x_train, y_train, x_test, y_test, len(classes))
