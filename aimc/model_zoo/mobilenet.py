"""MobileNetV2 (Sandler et al. 2018) in the CIFAR form: the stem convolution and the second stage with
stride 1 instead of 2, so 32x32 inputs reach the last stage at 4x4 pixels.

The depthwise 3x3 convolutions are grouped convolutions (groups = channels); `trainers.convert` maps each group
onto its own tile grid.
"""

from __future__ import annotations

import torch
from torch import nn

STAGES = ((1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
"""(expansion t, output channels c, blocks n, stride of the first block s) of each stage (the paper's Table 2,
second stage's stride 1 for 32x32 inputs)."""


class InvertedResidual(nn.Module):
    """1x1 expansion (t c_in channels) + BN + ReLU6, depthwise 3x3 (stride) + BN + ReLU6, 1x1 projection + BN;
    the input added where stride is 1 and the channels match."""

    def __init__(self, c_in: int, c_out: int, expansion: int, stride: int):
        super().__init__()
        hidden = c_in * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers += [nn.Conv2d(c_in, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, c_out, 1, bias=False),
            nn.BatchNorm2d(c_out),
        ]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    """Stem conv 3x3 (32 channels, stride 1), the inverted residual stages of STAGES, conv 1x1 to 1280
    channels, global average pooling, classifier Linear to the logits."""

    def __init__(self, n_classes: int = 10, in_channels: int = 3):
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(in_channels, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
        c = 32
        for t, c_out, n, s in STAGES:
            for b in range(n):
                layers.append(InvertedResidual(c, c_out, t, s if b == 0 else 1))
                c = c_out
        layers += [nn.Conv2d(c, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(1280, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
