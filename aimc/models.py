"""The networks of the experiments, as plain torch modules (`trainers.convert` makes them analog): the MNIST
networks here, the larger ones in aimc.model_zoo, the user's own through an import path.

Inputs are images (batch, channels, height, width), (batch, 1, 28, 28) for MNIST; outputs are logits
(batch, classes).
"""

from __future__ import annotations

import math

from torch import nn

from aimc.common.errors import ConfigError
from aimc.common.imports import load_callable
from aimc.model_config import (
    CifarResNetConfig,
    FCNConfig,
    ImportedModelConfig,
    LeNet5Config,
    MobileNetV2Config,
    ModelConfig,
    R1CNNConfig,
    ResNetConfig,
    VGG8Config,
)
from aimc.model_zoo import CifarResNet, MobileNetV2, vgg8

MNIST_SHAPE = (1, 28, 28)

_ACT = {"sigmoid": nn.Sigmoid, "relu": nn.ReLU, "tanh": nn.Tanh}


def fcn(cfg: FCNConfig, n_in: int = 784, n_out: int = 10) -> nn.Sequential:
    """Flatten, then Linear + activation per hidden width, then a Linear to the logits (R1: 784-256-128-10)."""
    layers: list[nn.Module] = [nn.Flatten()]
    width = n_in
    for h in cfg.hidden:
        layers += [nn.Linear(width, h), _ACT[cfg.activation]()]
        width = h
    layers.append(nn.Linear(width, n_out))
    return nn.Sequential(*layers)


def lenet5(cfg: LeNet5Config, n_out: int = 10, in_shape: tuple[int, int, int] = MNIST_SHAPE) -> nn.Sequential:
    """LeNet-5: conv 5x5 (6, padding 2), pool, conv 5x5 (16), pool, then 120-84-n_out (400 features for
    28x28 inputs)."""
    act = _ACT[cfg.activation]
    c, h, w = in_shape
    return nn.Sequential(
        nn.Conv2d(c, 6, 5, padding=2),
        act(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5),
        act(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * ((h // 2 - 4) // 2) * ((w // 2 - 4) // 2), 120),
        act(),
        nn.Linear(120, 84),
        act(),
        nn.Linear(84, n_out),
    )


def r1_cnn(cfg: R1CNNConfig, n_out: int = 10, in_shape: tuple[int, int, int] = MNIST_SHAPE) -> nn.Sequential:
    """R1's CNN: conv 5x5 (16), pool, conv 5x5 (32), pool, activation, then 128-n_out (512 features and
    80016 weights in four layers for 28x28 inputs; arXiv:2502.06309)."""
    act = _ACT[cfg.activation]
    c, h, w = in_shape
    return nn.Sequential(
        nn.Conv2d(c, 16, 5),
        act(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5),
        act(),
        nn.MaxPool2d(2),
        act(),
        nn.Flatten(),
        nn.Linear(32 * (((h - 4) // 2 - 4) // 2) * (((w - 4) // 2 - 4) // 2), 128),
        act(),
        nn.Linear(128, n_out),
    )


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a shortcut (a 1x1 convolution where the shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int, act: type[nn.Module]):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
            nn.BatchNorm2d(c_out),
            act(),
            nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False),
            nn.BatchNorm2d(c_out),
        )
        self.shortcut = (
            nn.Identity()
            if stride == 1 and c_in == c_out
            else nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
        )
        self.act = act()

    def forward(self, x):
        return self.act(self.body(x) + self.shortcut(x))


def resnet(cfg: ResNetConfig, n_out: int = 10, in_channels: int = 1) -> nn.Sequential:
    """A small ResNet: 3x3 stem (width), stages of `blocks` basic blocks at width, 2 width, 4 width
    (28 -> 14 -> 7 pixels), global average pooling, a Linear to the logits."""
    act = _ACT[cfg.activation]
    w = cfg.width
    layers: list[nn.Module] = [nn.Conv2d(in_channels, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), act()]
    c = w
    for stage, width in enumerate((w, 2 * w, 4 * w)):
        for b in range(cfg.blocks):
            layers.append(BasicBlock(c, width, 2 if stage > 0 and b == 0 else 1, act))
            c = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, n_out)]
    return nn.Sequential(*layers)


def build_model(cfg: ModelConfig, n_classes: int = 10, in_shape: tuple[int, int, int] = MNIST_SHAPE) -> nn.Module:
    """The torch model of a model config for images of `in_shape` (channels, height, width) and `n_classes`
    classes (weights from torch's default init and global seed)."""
    if isinstance(cfg, FCNConfig):
        return fcn(cfg, math.prod(in_shape), n_classes)
    if isinstance(cfg, LeNet5Config):
        return lenet5(cfg, n_classes, in_shape)
    if isinstance(cfg, R1CNNConfig):
        return r1_cnn(cfg, n_classes, in_shape)
    if isinstance(cfg, ResNetConfig):
        return resnet(cfg, n_classes, in_shape[0])
    if isinstance(cfg, CifarResNetConfig):
        return CifarResNet(cfg.name, n_classes, in_shape[0], cfg.width)
    if isinstance(cfg, VGG8Config):
        return vgg8(n_classes, in_shape, cfg.width)
    if isinstance(cfg, MobileNetV2Config):
        return MobileNetV2(n_classes, in_shape[0])
    return imported_model(cfg, n_classes, in_shape)


def imported_model(cfg: ImportedModelConfig, n_classes: int, in_shape: tuple[int, int, int]) -> nn.Module:
    """The user's model: `cfg.source`(num_classes=n_classes, in_shape=in_shape, **cfg.options)."""
    build = load_callable(cfg.source, "model.source")
    try:
        model = build(num_classes=n_classes, in_shape=tuple(in_shape), **cfg.options)
    except TypeError as err:
        raise ConfigError(
            f"model.source: {cfg.source}(num_classes=..., in_shape=..., **model.options) failed: {err}"
        ) from None
    if not isinstance(model, nn.Module):
        raise ConfigError(f"model.source: {cfg.source} returned {type(model).__name__}, not a torch.nn.Module")
    return model
