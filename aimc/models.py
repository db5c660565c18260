"""The networks of the experiments, as plain torch modules (`trainers.convert` makes them analog).

Inputs are images (batch, 1, 28, 28) in [0, 1]; outputs are logits (batch, 10).
"""

from __future__ import annotations

from torch import nn

from aimc.config import FCNConfig, LeNet5Config, ModelConfig, R1CNNConfig, ResNetConfig

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


def lenet5(cfg: LeNet5Config, n_out: int = 10) -> nn.Sequential:
    """LeNet-5 for 28x28 inputs: conv 5x5 (6, padding 2), pool, conv 5x5 (16), pool, 400-120-84-n_out."""
    act = _ACT[cfg.activation]
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2),
        act(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5),
        act(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120),
        act(),
        nn.Linear(120, 84),
        act(),
        nn.Linear(84, n_out),
    )


def r1_cnn(cfg: R1CNNConfig, n_out: int = 10) -> nn.Sequential:
    """R1's CNN for 28x28 inputs: conv 5x5 (16), pool, conv 5x5 (32), pool, activation, 512-128-n_out
    (arXiv:2502.06309; 80016 weights in four layers)."""
    act = _ACT[cfg.activation]
    return nn.Sequential(
        nn.Conv2d(1, 16, 5),
        act(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5),
        act(),
        nn.MaxPool2d(2),
        act(),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 128),
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


def resnet(cfg: ResNetConfig, n_out: int = 10) -> nn.Sequential:
    """A small ResNet: 3x3 stem (width), stages of `blocks` basic blocks at width, 2 width, 4 width
    (28 -> 14 -> 7 pixels), global average pooling, a Linear to the logits."""
    act = _ACT[cfg.activation]
    w = cfg.width
    layers: list[nn.Module] = [nn.Conv2d(1, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), act()]
    c = w
    for stage, width in enumerate((w, 2 * w, 4 * w)):
        for b in range(cfg.blocks):
            layers.append(BasicBlock(c, width, 2 if stage > 0 and b == 0 else 1, act))
            c = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, n_out)]
    return nn.Sequential(*layers)


def build_model(cfg: ModelConfig, n_classes: int = 10) -> nn.Module:
    """The torch model of a model config (weights from torch's default init and global seed)."""
    if isinstance(cfg, FCNConfig):
        return fcn(cfg, 28 * 28, n_classes)
    if isinstance(cfg, LeNet5Config):
        return lenet5(cfg, n_classes)
    if isinstance(cfg, R1CNNConfig):
        return r1_cnn(cfg, n_classes)
    return resnet(cfg, n_classes)
