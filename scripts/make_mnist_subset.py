"""Build aimc/data/mnist_small.npz, the MNIST subset shipped with the package, from the four IDX files.

    python scripts/make_mnist_subset.py PATH/TO/mnist [--train 6000] [--test 1000] [--seed 0]

Class-balanced: train/10 images of each digit from the training split and test/10 from the test split,
drawn without replacement by a seeded generator, then shuffled. The arrays are uint8 images (N, 28, 28),
uint8 labels, and the indices of the images in the original files (int32), in a compressed .npz. The same
inputs and arguments always give the same file contents.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

from aimc.datasets import load_idx_dir


def balanced(y: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n indices into y, n/10 of each class, in random order."""
    if n % 10:
        raise SystemExit(f"subset size {n} is not a multiple of 10 (one tenth per class)")
    picks = [rng.choice(np.flatnonzero(y == c), n // 10, replace=False) for c in range(10)]
    return rng.permutation(np.concatenate(picks)).astype(np.int32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mnist_dir", help="directory with the four MNIST IDX files (gzip or not)")
    parser.add_argument("--train", type=int, default=6000, help="training images (default 6000)")
    parser.add_argument("--test", type=int, default=1000, help="test images (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the selection (default 0)")
    parser.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parents[1] / "aimc" / "data" / "mnist_small.npz"),
        help="output file",
    )
    args = parser.parse_args()
    data = load_idx_dir(args.mnist_dir)
    rng = np.random.default_rng(args.seed)
    i_train, i_test = balanced(data.y_train, args.train, rng), balanced(data.y_test, args.test, rng)
    out = Path(args.out)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".npz")
    with os.fdopen(fd, "wb") as f:
        np.savez_compressed(
            f,
            x_train=data.x_train[i_train],
            y_train=data.y_train[i_train].astype(np.uint8),
            x_test=data.x_test[i_test],
            y_test=data.y_test[i_test].astype(np.uint8),
            idx_train=i_train,
            idx_test=i_test,
        )
    os.replace(tmp, out)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB): {len(i_train)} train + {len(i_test)} test images")


if __name__ == "__main__":
    main()
