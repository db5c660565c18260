"""The input pipeline of a run: training batches in the epoch's sample order, optionally augmented (random crop
with zero padding, horizontal flip) and normalised, drawn in the run's process or by DataLoader workers.

The draws of batch `step` of epoch `epoch` come from a generator seeded by (AUGMENT, seed, epoch, step) alone,
so a batch is the same whichever process draws it and a resumed run draws what the uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from aimc.common import seeds
from aimc.data_config import DataConfig


@dataclass(frozen=True)
class InputPipeline:
    """What happens to images in [0, 1] before the model: `padding` > 0 with `augment` crops each training
    image at a random offset from the image zero-padded by `padding` pixels, and flips it left-right with
    probability 1/2; `mean`, `std` (per channel, shape (C, 1, 1)) normalise training and test images."""

    augment: bool = False
    padding: int = 4
    mean: torch.Tensor | None = None
    std: torch.Tensor | None = None

    @classmethod
    def of(cls, cfg: DataConfig, x_train: torch.Tensor) -> InputPipeline:
        """The pipeline of a data config; the normalisation's mean and std are those of `x_train` (N, C, H, W)
        per channel (population std, computed in float64)."""
        mean = std = None
        if cfg.normalize:
            x = x_train.double().transpose(0, 1).reshape(x_train.shape[1], -1)
            mean = x.mean(1).float().reshape(-1, 1, 1)
            std = x.std(1, correction=0).clamp_min(1e-12).float().reshape(-1, 1, 1)
        return cls(cfg.augment, cfg.crop_padding, mean, std)

    def normalized(self, x: torch.Tensor) -> torch.Tensor:
        """x, normalised when the pipeline has a mean and std (a test batch's inputs)."""
        return x if self.mean is None else (x - self.mean) / self.std

    def train_batch(self, x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        """A training batch (B, C, H, W): augmented with draws from `rng`, then normalised."""
        if self.augment:
            x = augmented(x, self.padding, rng)
        return self.normalized(x)


def augmented(x: torch.Tensor, padding: int, rng: np.random.Generator) -> torch.Tensor:
    """Random crop and flip of every image of x (B, C, H, W): offsets (dy, dx) uniform in 0..2 padding into the
    zero-padded image, then a left-right flip where a uniform draw is below 1/2 (offsets drawn first, (B, 2))."""
    b, _, h, w = x.shape
    offsets = rng.integers(0, 2 * padding + 1, size=(b, 2))
    flips = rng.random(b) < 0.5
    padded = F.pad(x, (padding, padding, padding, padding))
    out = torch.stack([padded[i, :, dy : dy + h, dx : dx + w] for i, (dy, dx) in enumerate(offsets.tolist())])
    if flips.any():
        idx = torch.from_numpy(np.flatnonzero(flips))
        out[idx] = out[idx].flip(-1)
    return out


class EpochBatches(torch.utils.data.Dataset):
    """The training batches of one epoch as a map-style dataset: item `step` is (inputs, labels) of the
    samples order[step * batch_size : (step + 1) * batch_size]."""

    def __init__(self, x, y, order, batch_size: int, pipeline: InputPipeline, seed: int, epoch: int):
        self.x, self.y, self.order, self.batch_size = x, y, order, batch_size
        self.pipeline, self.seed, self.epoch = pipeline, seed, epoch

    def __len__(self) -> int:
        return -(-len(self.order) // self.batch_size)

    def __getitem__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.order[step * self.batch_size : (step + 1) * self.batch_size]
        x = self.x[idx]
        if self.pipeline.augment or self.pipeline.mean is not None:
            x = self.pipeline.train_batch(x, seeds.generator(seeds.AUGMENT, self.seed, self.epoch, step))
        return x, self.y[idx]


def epoch_batches(batches: EpochBatches, workers: int) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """The batches in step order: drawn here (workers = 0) or by `workers` DataLoader processes."""
    if workers == 0:
        return (batches[step] for step in range(len(batches)))
    return DataLoader(batches, batch_size=None, shuffle=False, num_workers=workers)
