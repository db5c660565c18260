"""ResNet-18/34/50 in the CIFAR form (He et al. 2016, Sec. 4.2 stem): a 3x3 convolution of stride 1 and no max
pooling before the four stages, so 32x32 inputs reach the last stage at 4x4 pixels.

Module names follow torchvision's ResNet (conv1, bn1, layer1..layer4 of blocks with conv1/bn1/conv2/bn2
[/conv3/bn3] and `downsample`, fc), so "layer3.*" selects a stage and torchvision state dicts load except for
the stem convolution (7x7 there).
"""

from __future__ import annotations

import torch
from torch import nn

DEPTHS = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
}
"""Block type and blocks per stage of each network."""


def _downsample(c_in: int, c_out: int, stride: int) -> nn.Module | None:
    """The 1x1 convolution and batch norm of a shortcut that changes the shape; None where it does not."""
    if stride == 1 and c_in == c_out:
        return None
    return nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm, ReLU after the sum with the shortcut."""

    expansion = 1

    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.downsample = _downsample(c_in, width, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Module):
    """1x1 down to `width`, 3x3 (stride here, as torchvision), 1x1 up to 4 width; ReLU after the sum."""

    expansion = 4

    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        c_out = width * self.expansion
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU()
        self.downsample = _downsample(c_in, c_out, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class CifarResNet(nn.Module):
    """Stem conv1 (3x3, `width` channels) + bn1 + ReLU, layer1..layer4 at width, 2, 4, 8 width (strides 1, 2,
    2, 2), global average pooling, fc to the logits. Weights from torch's default init."""

    def __init__(self, name: str, n_classes: int = 10, in_channels: int = 3, width: int = 64):
        super().__init__()
        kind, depths = DEPTHS[name]
        block = BasicBlock if kind == "basic" else Bottleneck
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        c = width
        for i, n in enumerate(depths):
            blocks = []
            for b in range(n):
                blocks.append(block(c, width * 2**i, 2 if i > 0 and b == 0 else 1))
                c = width * 2**i * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))
