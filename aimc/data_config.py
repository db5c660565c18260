"""The [data] section of the experiment config: the data set and its input pipeline."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from aimc.common.validation import STRICT
from aimc.model_config import IMPORT_PATH


class DataConfig(BaseModel):
    """The data set and its input pipeline: images scaled to [0, 1], optionally augmented and normalised."""

    model_config = STRICT
    name: Literal["mnist_small", "mnist", "fashion_mnist", "cifar10", "cifar100", "image_folder", "import"] = Field(
        "mnist_small",
        description="mnist_small: the MNIST subset shipped with the package; mnist, fashion_mnist: the IDX files "
        "in `path` (or torchvision's copy); cifar10, cifar100: the python pickle batches in `path`; "
        "image_folder: `path`/train/<class>/*.png and `path`/test/<class>/*.png; import: `source`",
    )
    path: str | None = Field(
        None,
        description="directory of the data files; none (mnist, fashion_mnist only): "
        "torchvision's data set under ~/.cache/aimc (if installed)",
    )
    source: str | None = Field(
        None,
        pattern=IMPORT_PATH,
        description='name = "import": "package.module:function" returning (train, test) torch datasets',
    )
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of `source`")
    n_train: int | None = Field(None, ge=1, description="use the first n_train training images (none: all)")
    n_test: int | None = Field(None, ge=1, description="use the first n_test test images (none: all)")
    augment: bool = Field(
        False, description="random crop (zero padding `crop_padding`) and horizontal flip of every training image"
    )
    crop_padding: int = Field(4, ge=0, description="pixels of zero padding of the random crop")
    normalize: bool = Field(
        False, description="subtract the per-channel mean and divide by the std of the training images used"
    )
    workers: int = Field(0, ge=0, description="DataLoader worker processes; 0: batches drawn in the run's process")

    @model_validator(mode="after")
    def _fields_of_name(self) -> DataConfig:
        if self.name == "mnist_small" and self.path is not None:
            raise ValueError("data.path: mnist_small is shipped with the package and takes no path")
        if (self.name == "import") != (self.source is not None):
            raise ValueError('data.source: give it with name = "import" (and only then)')
        if self.name in ("cifar10", "cifar100", "image_folder") and self.path is None:
            raise ValueError(f"data.path: {self.name} reads its files from a directory; give `path`")
        if self.options and self.name != "import":
            raise ValueError('data.options: only name = "import" takes options')
        return self
