"""Networks for image classification beyond MNIST: ResNet-18/34/50 and MobileNetV2 in their CIFAR forms,
aihwkit's VGG-8."""

from aimc.model_zoo.cifar_resnet import CifarResNet
from aimc.model_zoo.mobilenet import MobileNetV2
from aimc.model_zoo.vgg import vgg8

__all__ = ["CifarResNet", "MobileNetV2", "vgg8"]
