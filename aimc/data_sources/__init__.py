"""The data set of a `[data]` config section, from any source: the MNIST family (aimc.datasets), CIFAR-10/100
pickle batches, image folders, or the user's own function; nothing is downloaded except torchvision's MNIST
when no path is given."""

from __future__ import annotations

from aimc.common.imports import load_callable
from aimc.data_config import DataConfig
from aimc.data_sources.cifar import load_cifar
from aimc.data_sources.image_folder import load_image_folder
from aimc.data_sources.imported import load_imported
from aimc.datasets import Dataset, load_dataset

__all__ = ["load_cifar", "load_data", "load_image_folder", "load_imported"]


def load_data(cfg: DataConfig) -> Dataset:
    """The data set of `cfg`, cut to its n_train / n_test first samples."""
    if cfg.name in ("cifar10", "cifar100"):
        data = load_cifar(cfg.path, cfg.name)
    elif cfg.name == "image_folder":
        data = load_image_folder(cfg.path)
    elif cfg.name == "import":
        data = load_imported(load_callable(cfg.source, "data.source"), cfg.source, cfg.options, cfg.workers)
    else:
        return load_dataset(cfg.name, cfg.path, cfg.n_train, cfg.n_test)
    return data.subset(cfg.n_train, cfg.n_test)
