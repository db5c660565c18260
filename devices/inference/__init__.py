"""Statistical inference noise models of analog memory chips (PCM, ReRAM) on torch tensors, after IBM aihwkit
1.1.0's aihwkit.inference (docs/inference.md): weight <-> conductance converters, noise models (programming
noise, drift coefficients, drift and read noise up to an inference time) and drift compensation.

This package needs torch; aimc.devices itself does not import it.
"""

from aimc.devices.inference.conductance import (
    ConductanceConverter,
    SingleDeviceConductanceConverter,
    SinglePairConductanceConverter,
)
from aimc.devices.inference.noise_model import DriftState, NoiseModel
from aimc.devices.inference.pcm import PCMLikeNoiseModel

__all__ = [
    "ConductanceConverter",
    "DriftState",
    "NoiseModel",
    "PCMLikeNoiseModel",
    "SingleDeviceConductanceConverter",
    "SinglePairConductanceConverter",
]
