"""The [model] section of the experiment config: one validated pydantic model per network, tagged by `name`,
each with the fields every network has (pretrained weights, which layers go onto tiles)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field

from aimc.common.validation import STRICT

IMPORT_PATH = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
"""A "package.module:function" import path."""
Activation = Literal["sigmoid", "relu", "tanh"]
AnalogType = Literal["linear", "conv1d", "conv2d"]


class NetworkConfig(BaseModel):
    """What every model config has: pretrained digital weights and which layers go onto tiles."""

    model_config = STRICT
    pretrained: str | None = Field(
        None,
        description="state-dict file (torch.save) loaded into the digital model before its layers go onto "
        "tiles, or an aimc checkpoint (its `model` entry); none: torch's default init from `seed`",
    )
    analog_layers: list[str] | None = Field(
        None,
        min_length=1,
        description="glob patterns of the qualified layer names that go onto tiles, e.g. "
        '["layer3.*", "layer4.*", "fc"]; none: every layer',
    )
    analog_types: list[AnalogType] | None = Field(
        None, min_length=1, description="layer types that go onto tiles (linear, conv1d, conv2d); none: all"
    )


class FCNConfig(NetworkConfig):
    """Fully connected network on the flattened image (R1's FCN: 784-256-128-10, sigmoid)."""

    name: Literal["fcn"] = "fcn"
    hidden: tuple[Annotated[int, Field(ge=1, strict=True)], ...] = Field(
        (256, 128), strict=False, description="hidden layer widths (a TOML list)"
    )
    activation: Activation = Field("sigmoid", description="activation after every hidden layer")


class LeNet5Config(NetworkConfig):
    """LeNet-5: two 5x5 convolutions (6, 16 channels) with 2x2 max pooling, then 120-84-classes."""

    name: Literal["lenet5"] = "lenet5"
    activation: Activation = Field("tanh", description="activation after every hidden layer")


class R1CNNConfig(NetworkConfig):
    """R1's CNN (arXiv:2502.06309, its MNIST CNN script): two 5x5 convolutions (16, 32 channels, no padding) with
    2x2 max pooling, then 512-128-classes."""

    name: Literal["r1_cnn"] = "r1_cnn"
    activation: Activation = Field("tanh", description="activation after every hidden layer")


class ResNetConfig(NetworkConfig):
    """A small ResNet: a 3x3 stem and three stages of basic blocks (width, 2 width, 4 width channels)."""

    name: Literal["resnet"] = "resnet"
    width: int = Field(16, ge=1, description="channels of the first stage")
    blocks: int = Field(1, ge=1, description="basic blocks per stage")
    activation: Activation = Field("relu", description="activation inside the blocks")


class CifarResNetConfig(NetworkConfig):
    """ResNet-18/34/50 in the CIFAR form: a 3x3 stem without max pooling, four stages (layer1..layer4) of
    width, 2, 4, 8 width channels (times 4 for ResNet-50's bottlenecks), average pooling, `fc`."""

    name: Literal["resnet18", "resnet34", "resnet50"] = "resnet18"
    width: int = Field(64, ge=1, description="channels of the stem and the first stage (64 in the paper)")


class VGG8Config(NetworkConfig):
    """VGG-8 (aihwkit's example network): three stages of two 3x3 convolutions (width, 2, 3 width channels),
    batch norm and 2x2 max pooling, then a hidden Linear of 8 width and the logits."""

    name: Literal["vgg8"] = "vgg8"
    width: int = Field(48, ge=1, description="channels of the first stage (48 in aihwkit's example)")


class MobileNetV2Config(NetworkConfig):
    """MobileNetV2 in the CIFAR form: a 3x3 stem of stride 1 and the first two down-samplings removed."""

    name: Literal["mobilenet_v2"] = "mobilenet_v2"


class ImportedModelConfig(NetworkConfig):
    """The user's network: `source = "package.module:function"`, called as
    function(num_classes=..., in_shape=(channels, height, width), **options), returning a torch module."""

    name: Literal["import"] = "import"
    source: str = Field(..., pattern=IMPORT_PATH, description='"package.module:function" that builds the model')
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the function")


ModelConfig = Annotated[
    Union[
        FCNConfig,
        LeNet5Config,
        R1CNNConfig,
        ResNetConfig,
        CifarResNetConfig,
        VGG8Config,
        MobileNetV2Config,
        ImportedModelConfig,
    ],
    Field(discriminator="name"),
]
MODEL_NAMES = (
    "fcn",
    "lenet5",
    "r1_cnn",
    "resnet",
    "resnet18",
    "resnet34",
    "resnet50",
    "vgg8",
    "mobilenet_v2",
    "import",
)
