"""VGG-8 as in aihwkit's example 11 (its analog VGG-8 on SVHN): six 3x3 convolutions and two Linear layers."""

from __future__ import annotations

from torch import nn


def vgg8(n_classes: int = 10, in_shape: tuple[int, int, int] = (3, 32, 32), width: int = 48) -> nn.Sequential:
    """Three stages of conv 3x3 + ReLU, conv 3x3 + batch norm + ReLU, 2x2 max pooling, at width, 2 width and
    3 width channels (padding 1); flatten, Linear to 8 width, ReLU, Linear to the logits. 32x32 inputs reach
    the flatten at 4x4 pixels (16 x 3 width features)."""
    c_in, h, w = in_shape
    layers: list[nn.Module] = []
    for c in (width, 2 * width, 3 * width):
        layers += [nn.Conv2d(c_in, c, 3, 1, 1), nn.ReLU(), nn.Conv2d(c, c, 3, 1, 1), nn.BatchNorm2d(c), nn.ReLU()]
        layers.append(nn.MaxPool2d(2))
        c_in = c
    features = c_in * (h // 8) * (w // 8)
    return nn.Sequential(
        *layers, nn.Flatten(), nn.Linear(features, 8 * width), nn.ReLU(), nn.Linear(8 * width, n_classes)
    )
